"""``ObservationDecoder``: one ensemble member's text decoder, reading only a latent and a query.

Strict latent mediation: ``forward`` takes the latent, the query row (``<act> action``, or
``<look>`` for the latest observation) and the decoder's own text prefix, nothing else; the raw
history never reaches it, so whatever the decoder knows about the past went through the latent.

A small causal Transformer decoder writes the observation word by word. It cross-attends to a
memory of ``latent_slots`` vectors cut from a projection of the latent, plus the embedded query
words. Slots rather than one vector let each output position read its own part of the latent (a
grid row's cells, a page's lines), and the query words can be copied (``guess 8 : ...`` repeats
the guessed number).

Against the "average grid": the same decoder is also trained, with the ``<look>`` query, to
rewrite the latest observation from the latent alone (``WorldModel.loss``'s reconstruction
term, the Dreamer-style observation decoder). That forces the latent to hold the full current
grid, so predicting the next one under ``<act> action`` is learned as copy-plus-edit of what
the latent holds rather than as the mean grid of the data. One autoregressive decoder serves every
env, including minishop's free-length pages; for fixed-layout grids its learned output positions
play the part of a per-position decoder.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from einops import rearrange
from torch import nn


@dataclass
class DecoderConfig:
    """Sizes of one member's observation decoder."""

    vocab_size: int
    """Number of token ids (the turn tokenizer's ``len``)."""
    latent_size: int
    """Size D of the latent it reads (the encoder's ``latent_size``)."""
    max_query_tokens: int
    """Longest query row (``TokenLimits.query_tokens``)."""
    max_text_tokens: int
    """Longest text row, ``<s>`` and ``</s>`` included (``TokenLimits.text_tokens``)."""
    model_size: int = 64
    """Width of the Transformer decoder."""
    num_layers: int = 2
    """Decoder blocks (causal self-attention, cross-attention to the memory, MLP)."""
    num_heads: int = 4
    """Attention heads; must divide ``model_size``."""
    latent_slots: int = 8
    """Memory vectors cut from the latent."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DecoderConfig.{f.name} must be an integer >= 1, got {value!r}")
        if self.model_size % self.num_heads:
            raise ValueError(
                f"DecoderConfig.model_size ({self.model_size}) must be divisible by num_heads "
                f"({self.num_heads})"
            )


def causal_mask(length: int, device: torch.device) -> torch.Tensor:
    """``(S, S)`` bool, True where attention is blocked: position ``i`` sees positions ``<= i``."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool, device=device), diagonal=1)


class ObservationDecoder(nn.Module):
    """Latent + query -> next-token logits over a text row (see the module docstring)."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        size = config.model_size
        self.tokens = nn.Embedding(config.vocab_size, size)
        self.text_positions = nn.Embedding(config.max_text_tokens, size)
        self.query_positions = nn.Embedding(config.max_query_tokens, size)
        self.slot_positions = nn.Parameter(torch.zeros(config.latent_slots, size))
        self.to_slots = nn.Linear(config.latent_size, config.latent_slots * size)
        layer = nn.TransformerDecoderLayer(
            size, config.num_heads, dim_feedforward=4 * size, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerDecoder(layer, config.num_layers)
        self.norm = nn.LayerNorm(size)
        self.out = nn.Linear(size, config.vocab_size)

    def memory(
        self, latent: torch.Tensor, query_ids: torch.Tensor, query_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What the text cross-attends to: ``(B, M + A, d)`` vectors, ``(B, M + A)`` bool padding mask."""
        if query_ids.shape[1] > self.config.max_query_tokens:
            raise ValueError(
                f"query rows of {query_ids.shape[1]} tokens exceed max_query_tokens "
                f"({self.config.max_query_tokens})"
            )
        slots = rearrange(self.to_slots(latent), "b (m d) -> b m d", m=self.config.latent_slots)  # (B, M, d)
        slots = slots + self.slot_positions  # (B, M, d)
        positions = torch.arange(query_ids.shape[1], device=query_ids.device)  # (A,)
        query = self.tokens(query_ids) + self.query_positions(positions)  # (B, A, d)
        memory = torch.cat([slots, query], dim=1)  # (B, M + A, d)
        blocked = torch.cat(
            [torch.zeros_like(slots[..., 0], dtype=torch.bool), query_mask == 0], dim=1
        )  # (B, M + A)
        return memory, blocked

    def forward(
        self, latent: torch.Tensor, query_ids: torch.Tensor, query_mask: torch.Tensor, text_ids: torch.Tensor
    ) -> torch.Tensor:
        """``(B, D)`` latent, ``(B, A)`` query rows, ``(B, S)`` text prefix -> ``(B, S, V)`` logits.

        Logits at position ``s`` predict text token ``s + 1``. Text rows are right-padded; causal
        attention keeps real positions from seeing the padding after them.
        """
        width = text_ids.shape[1]
        if width > self.config.max_text_tokens:
            raise ValueError(
                f"text rows of {width} tokens exceed max_text_tokens ({self.config.max_text_tokens})"
            )
        memory, blocked = self.memory(latent, query_ids, query_mask)  # (B, M + A, d), (B, M + A)
        positions = torch.arange(width, device=text_ids.device)  # (S,)
        x = self.tokens(text_ids) + self.text_positions(positions)  # (B, S, d)
        x = self.blocks(
            x, memory, tgt_mask=causal_mask(width, text_ids.device), memory_key_padding_mask=blocked
        )
        return self.out(self.norm(x))  # (B, S, V)
