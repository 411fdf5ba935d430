"""``ObservationDecoder``: one ensemble member's text decoder, reading a latent and a query.

Strict latent mediation (the default): ``forward`` takes the latent, the query row (``<act>
action``, or ``<look>`` for the latest observation) and the decoder's own text prefix, nothing
else; the raw history never reaches it, so whatever the decoder knows about the past went through
the latent.

The copy path (``copy_observation``): the memory also holds the words of the observation the
action was taken in (its text row ``<s> words </s>``), each with its own learned position and one
learned segment vector that marks them as copy memory. Grid observations mostly repeat that
observation with a small edit, which the decoder can then copy word by word instead of rebuilding
it from the compressed latent. It stays O(1) per turn: one observation is at most
``max_text_tokens`` tokens. The latent still carries everything older. On top of it,
``aligned_copy`` makes "the same word as at this place before" the starting guess of every
position (``world_model/aligned_copy.py``).

Every word the decoder embeds (query, copy memory, its own text) is looked up in ``token_table``:
the learned token embeddings, plus, with ``ordinal_numbers``, the ordinal component of number words
(``world_model.ordinal``). The batched and cached paths read the same table.

A small causal Transformer decoder writes the observation word by word. It cross-attends to a
memory of ``latent_slots`` vectors cut from a projection of the latent, plus the embedded query
words. Slots rather than one vector let each output position read its own part of the latent (a
grid row's cells, a page's lines), and the query words can be copied (``guess 8 : ...`` repeats
the guessed number).

Against the "average grid": the same decoder is also trained, with the ``<look>`` query, to
rewrite the latest observation from the latent alone (``WorldModel.loss``'s reconstruction
term, the Dreamer-style observation decoder). That forces the latent to hold the full current
grid, so predicting the next one under ``<act> action`` is learned as copy-plus-edit of what
the latent holds rather than as the mean grid of the data. With the copy path the ``<look>`` rows
still get no copy memory (``WorldModel._copy_memory``), so this pressure on the latent stays. One
autoregressive decoder serves every env, including minishop's free-length pages; for fixed-layout
grids its learned output positions play the part of a per-position decoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from envs.checks import check_bool
from world_model.aligned_copy import add_copy_bonus, aligned_words
from world_model.config import DecoderSection
from world_model.decoder_context import DecoderContext
from world_model.ordinal import OrdinalEmbedding, token_table

SWITCHES = ("copy_observation", "aligned_copy")
"""The decoder's on/off options (the other fields are sizes)."""


@dataclass(kw_only=True)
class DecoderConfig(DecoderSection):
    """One member's observation decoder as built: its options (``DecoderSection``, the YAML's
    ``decoder`` section, declared once there) plus the sizes that come from the tokenizer and the model."""

    vocab_size: int
    """Number of token ids (the turn tokenizer's ``len``)."""
    latent_size: int
    """Size D of the latent it reads (the encoder's ``latent_size``)."""
    max_query_tokens: int
    """Longest query row (``TokenLimits.query_tokens``)."""
    max_text_tokens: int
    """Longest text row, ``<s>`` and ``</s>`` included (``TokenLimits.text_tokens``)."""

    def __post_init__(self) -> None:  # every field, the section's too, named as this class's
        for name in SWITCHES:
            check_bool(f"DecoderConfig.{name}", getattr(self, name))
        if self.aligned_copy and not self.copy_observation:
            raise ValueError("DecoderConfig.aligned_copy needs copy_observation: it reads the observation acted in")
        for f in fields(self):
            if f.name in SWITCHES:
                continue
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


def check_previous(config: DecoderConfig, context: DecoderContext) -> None:
    """The copy memory is given exactly when ``config.copy_observation`` is on, as ``(B, O)`` ids
    and mask with ``O <= max_text_tokens``; raises ``ValueError`` otherwise."""
    previous_ids, previous_mask, rows = context.previous_ids, context.previous_mask, context.query_ids.shape[0]
    if not config.copy_observation:
        if previous_ids is not None or previous_mask is not None:
            raise ValueError("previous observation rows given to a decoder without copy_observation")
        return
    if previous_ids is None or previous_mask is None:
        raise ValueError(
            "a decoder with copy_observation needs the rows of the observation acted in "
            "(previous_ids and previous_mask)"
        )
    if previous_ids.shape != previous_mask.shape or previous_ids.dim() != 2 or previous_ids.shape[0] != rows:
        raise ValueError(
            f"previous_ids {tuple(previous_ids.shape)} and previous_mask {tuple(previous_mask.shape)} "
            f"must both be ({rows}, O)"
        )
    if previous_ids.shape[1] > config.max_text_tokens:
        raise ValueError(
            f"previous observation rows of {previous_ids.shape[1]} tokens exceed max_text_tokens "
            f"({config.max_text_tokens})"
        )


class ObservationDecoder(nn.Module):
    """Latent + query -> next-token logits over a text row (see the module docstring).

    ``integer_values`` (per token id, the integer the word spells or None) adds the ordinal number
    component to the token embeddings (``world_model.ordinal``); None: plain word embeddings.
    """

    def __init__(self, config: DecoderConfig, integer_values: Sequence[int | None] | None = None) -> None:
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
        if config.copy_observation:  # created last: the weights above are drawn as without the copy path
            self.copy_positions = nn.Embedding(config.max_text_tokens, size)
            self.copy_segment = nn.Parameter(torch.randn(size))
        if config.aligned_copy:  # after the copy path's weights, so those are drawn as without this
            self.copy_gate = nn.Linear(size, 1)
        # Last, and drawing nothing (its steps start at zero): the weights above are as without it.
        self.ordinal = None if integer_values is None else OrdinalEmbedding(integer_values, size)

    def token_table(self) -> torch.Tensor:
        """The effective ``(V, d)`` token embeddings, what every decoding path embeds words with (this
        forward, ``batched_members`` and ``cached_decoding``): ``tokens`` plus the ordinal component."""
        return token_table(self.tokens, self.ordinal)  # (V, d)

    def memory(self, context: DecoderContext) -> tuple[torch.Tensor, torch.Tensor]:
        """What the text cross-attends to: ``(B, T, d)`` vectors and a ``(B, T)`` bool padding mask,
        ``T = M + A`` (latent slots, query words), plus ``O`` with the copy path: the ``(B, O)`` text
        rows ``previous_ids`` of the observation acted in (``previous_mask`` 0 on padding)."""
        check_previous(self.config, context)
        latent, query_ids, query_mask = context.latent, context.query_ids, context.query_mask
        previous_ids, previous_mask = context.previous_ids, context.previous_mask
        if query_ids.shape[1] > self.config.max_query_tokens:
            raise ValueError(
                f"query rows of {query_ids.shape[1]} tokens exceed max_query_tokens "
                f"({self.config.max_query_tokens})"
            )
        slots = rearrange(self.to_slots(latent), "b (m d) -> b m d", m=self.config.latent_slots)  # (B, M, d)
        slots = slots + self.slot_positions  # (B, M, d)
        positions = torch.arange(query_ids.shape[1], device=query_ids.device)  # (A,)
        table = self.token_table()  # (V, d)
        query = F.embedding(query_ids, table) + self.query_positions(positions)  # (B, A, d)
        memory = torch.cat([slots, query], dim=1)  # (B, M + A, d)
        blocked = torch.cat(
            [torch.zeros_like(slots[..., 0], dtype=torch.bool), query_mask == 0], dim=1
        )  # (B, M + A)
        if previous_ids is None:
            return memory, blocked
        positions = torch.arange(previous_ids.shape[1], device=previous_ids.device)  # (O,)
        copied = F.embedding(previous_ids, table) + self.copy_positions(positions) + self.copy_segment  # (B, O, d)
        return torch.cat([memory, copied], dim=1), torch.cat([blocked, previous_mask == 0], dim=1)  # (B, T + O, .)

    def forward(self, context: DecoderContext, text_ids: torch.Tensor) -> torch.Tensor:
        """``context`` (``(B, D)`` latent, ``(B, A)`` query rows; with the copy path also the ``(B, O)``
        text rows of the observations acted in and their mask), ``(B, S)`` text prefix -> ``(B, S, V)`` logits.

        Logits at position ``s`` predict text token ``s + 1``. Text rows are right-padded; causal
        attention keeps real positions from seeing the padding after them.
        """
        width = text_ids.shape[1]
        if width > self.config.max_text_tokens:
            raise ValueError(
                f"text rows of {width} tokens exceed max_text_tokens ({self.config.max_text_tokens})"
            )
        memory, blocked = self.memory(context)  # (B, T, d), (B, T)
        positions = torch.arange(width, device=text_ids.device)  # (S,)
        x = F.embedding(text_ids, self.token_table()) + self.text_positions(positions)  # (B, S, d)
        x = self.blocks(
            x, memory, tgt_mask=causal_mask(width, text_ids.device), memory_key_padding_mask=blocked
        )
        hidden = self.norm(x)  # (B, S, d)
        logits = self.out(hidden)  # (B, S, V)
        if not self.config.aligned_copy:
            return logits
        rows = torch.arange(text_ids.shape[0], device=text_ids.device)[:, None].expand_as(text_ids)  # (B, S)
        previous = context.previous_ids, context.previous_mask  # (B, O) each
        ids, valid = aligned_words(*previous, rows, positions.expand_as(text_ids))  # (B, S)
        return add_copy_bonus(logits, F.softplus(self.copy_gate(hidden)).squeeze(-1), ids, valid)  # (B, S, V)
