"""Incremental decoding for the ensemble's observation decoders: one new token per call, all members at once.

``EnsembleDynamics.generate`` writes an observation one token at a time. Running every member's
``ObservationDecoder.forward`` over the whole prefix for each new token recomputes every earlier
position again (quadratic in the row length) and costs K module calls per token, which on small
models is mostly Python and dispatch overhead. :class:`CachedEnsembleDecoder` instead

- stacks the K members' weights along a leading member axis, so one batched matmul serves every
  member (the weights are read from the members each time one is built, never copied into new
  parameters: training and saved models are untouched);
- keeps each layer's self-attention keys and values of the positions already fed (a KV cache), so
  a new token attends to them without recomputing them;
- projects the cross-attention memory (latent slots, query words and, with the copy path, the
  words of the observation acted in) to keys and values once.

The math is ``nn.TransformerDecoderLayer``'s as ``ObservationDecoder`` builds it (``norm_first``,
ReLU, no dropout), written out for a single query position; the constructor refuses decoders built
otherwise. Logits equal the uncached forward's last position up to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

from world_model.aligned_copy import add_copy_bonus, aligned_words
from world_model.decoder import ObservationDecoder
from world_model.decoder_context import DecoderContext

Linear = tuple[torch.Tensor, torch.Tensor]
"""Every member's copy of one linear map: ``(K, in, out)`` weight (transposed) and ``(K, 1, out)`` bias."""


def stack_linear(
    weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor], norms: Sequence[nn.LayerNorm] = ()
) -> Linear:
    """The members' ``(out, in)`` weights and ``(out,)`` biases as one :data:`Linear`, in the shapes
    ``torch.baddbmm`` takes.

    ``norms``, the members' ``nn.LayerNorm`` right before this map, have their affine part folded in
    (``(n * g + b) W^T + c = n (g W^T) + (b W^T + c)``), so the step normalises without an affine
    and saves two ops per norm; the result differs from the unfolded one by float rounding only.
    """
    weight = torch.stack(list(weights)).transpose(1, 2)  # (K, in, out)
    bias = torch.stack(list(biases)).unsqueeze(1)  # (K, 1, out)
    if norms:
        gain = torch.stack([n.weight for n in norms]).unsqueeze(2)  # (K, in, 1)
        shift = torch.stack([n.bias for n in norms]).unsqueeze(1)  # (K, 1, in)
        bias = torch.baddbmm(bias, shift, weight)  # (K, 1, out)
        weight = gain * weight  # (K, in, out)
    return weight.contiguous(), bias


@dataclass(frozen=True)
class MemberLayer:
    """One ``nn.TransformerDecoderLayer`` of every member, stacked on a leading member axis K.

    Each pre-norm's affine part is folded into the map that reads it (``stack_linear``); ``eps``
    keeps the three norms' epsilons.
    """

    self_in: Linear  # norm1 then the packed q, k, v projection: (K, d, 3d)
    self_out: Linear  # (K, d, d)
    cross_query: Linear  # norm2 then the cross-attention query projection: (K, d, d)
    cross_memory: Linear  # the packed memory key, value projection: (K, d, 2d)
    cross_out: Linear  # (K, d, d)
    feed_in: Linear  # norm3 then linear1: (K, d, 4d)
    feed_out: Linear  # linear2: (K, 4d, d)
    eps: tuple[float, float, float]  # of norm1, norm2, norm3

    @classmethod
    def of(cls, layers: Sequence[nn.TransformerDecoderLayer]) -> MemberLayer:
        """Stack the members' copies of one layer (``layers[k]`` is member k's)."""
        size = layers[0].self_attn.embed_dim
        self_attn = [m.self_attn for m in layers]
        cross = [m.multihead_attn for m in layers]
        return cls(
            self_in=stack_linear(
                [a.in_proj_weight for a in self_attn],
                [a.in_proj_bias for a in self_attn],
                [m.norm1 for m in layers],
            ),
            self_out=stack_linear(
                [a.out_proj.weight for a in self_attn], [a.out_proj.bias for a in self_attn]
            ),
            cross_query=stack_linear(
                [a.in_proj_weight[:size] for a in cross],
                [a.in_proj_bias[:size] for a in cross],
                [m.norm2 for m in layers],
            ),
            cross_memory=stack_linear(
                [a.in_proj_weight[size:] for a in cross], [a.in_proj_bias[size:] for a in cross]
            ),
            cross_out=stack_linear([a.out_proj.weight for a in cross], [a.out_proj.bias for a in cross]),
            feed_in=stack_linear(
                [m.linear1.weight for m in layers],
                [m.linear1.bias for m in layers],
                [m.norm3 for m in layers],
            ),
            feed_out=stack_linear([m.linear2.weight for m in layers], [m.linear2.bias for m in layers]),
            eps=(layers[0].norm1.eps, layers[0].norm2.eps, layers[0].norm3.eps),
        )


def member_linear(x: torch.Tensor, linear: Linear) -> torch.Tensor:
    """Each member's linear map: ``(K, R, in)`` -> ``(K, R, out)``."""
    weight, bias = linear
    return torch.baddbmm(bias, x, weight)


def normalised(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Layer normalisation over the last axis without an affine part (folded into the next map)."""
    return F.layer_norm(x, x.shape[-1:], eps=eps)


def stack_copy_gate(decoders: Sequence[ObservationDecoder]) -> Linear:
    """The members' ``aligned_copy`` gates after their final norm's affine part: ``(K, d, 1)``."""
    return stack_linear([d.copy_gate.weight for d in decoders], [d.copy_gate.bias for d in decoders],
                        [d.norm for d in decoders])


def member_copy_bonus(hidden: torch.Tensor, gate: Linear) -> torch.Tensor:
    """Every member's ``aligned_copy`` bonus from its ``(K, R, d)`` final states (normalised without
    an affine part) and its ``stack_copy_gate``: ``(K, R)``, as ``ObservationDecoder.forward`` has it."""
    return F.softplus(member_linear(hidden, gate)).squeeze(-1)  # (K, R)


def check_supported(decoder: ObservationDecoder) -> None:
    """Refuse a decoder whose layers are not the ones the incremental math writes out."""
    for index, layer in enumerate(decoder.blocks.layers):
        if not layer.norm_first or layer.activation is not F.relu or layer.dropout.p != 0:
            raise ValueError(
                f"cached decoding supports norm_first ReLU decoder layers without dropout; layer {index} differs"
            )
    if decoder.blocks.norm is not None:
        raise ValueError("cached decoding expects no final norm inside the decoder's Transformer blocks")


class CachedEnsembleDecoder:
    """Next-token logits of K member decoders for B rows, fed one token per call.

    Built for one ``DecoderContext`` of B rows (``ObservationDecoder.memory``'s input, the copy
    path's previous observation rows included) and at most
    ``max_positions`` text positions; ``next_logits(tokens)`` feeds the ``(B,)`` tokens at the next
    position (the first call feeds ``<s>`` at position 0) and returns ``(K, B, V)`` logits for the
    token after it, what every member's ``forward`` would give at that position of the whole prefix.
    """

    @torch.no_grad()
    def __init__(
        self,
        decoders: Sequence[ObservationDecoder],
        context: DecoderContext,
        max_positions: int,
    ) -> None:
        if not decoders:
            raise ValueError("CachedEnsembleDecoder needs at least one member decoder")
        config = decoders[0].config
        if max_positions > config.max_text_tokens:
            raise ValueError(
                f"text rows of {max_positions} tokens exceed max_text_tokens ({config.max_text_tokens})"
            )
        for decoder in decoders:
            check_supported(decoder)
        members, rows, heads = len(decoders), context.latent.shape[0], config.num_heads
        self.members, self.rows, self.heads = members, rows, heads
        self.head_size = config.model_size // heads
        self.max_positions = max_positions
        self.position = 0  # text positions fed so far
        self.token_table = torch.stack([d.token_table() for d in decoders])  # (K, V, d)
        self.position_table = torch.stack([d.text_positions.weight for d in decoders])  # (K, P, d)
        self.final_eps = decoders[0].norm.eps
        self.out = stack_linear(
            [d.out.weight for d in decoders], [d.out.bias for d in decoders], [d.norm for d in decoders]
        )  # the final norm then the vocabulary projection: (K, d, V)
        # With aligned_copy: the copy memory's rows, whose word at the next place gets the bonus, and the gates.
        self.previous = (context.previous_ids, context.previous_mask) if config.aligned_copy else None
        self.copy_gate = stack_copy_gate(decoders) if config.aligned_copy else None
        self.layers = [
            MemberLayer.of([d.blocks.layers[i] for d in decoders]) for i in range(config.num_layers)
        ]
        memories = [d.memory(context) for d in decoders]
        memory = torch.stack([m for m, _ in memories])  # (K, B, T, d) with T = M + A (+ O with the copy path)
        blocked = memories[0][1]  # (B, T), the same for every member
        # Added to the cross-attention scores: -inf on padding, one row per (member, row).
        additive = torch.zeros(blocked.shape, dtype=memory.dtype, device=memory.device).masked_fill(
            blocked, float("-inf")
        )  # (B, T)
        self.memory_mask = repeat(additive, "b t -> (k b) 1 1 t", k=members)  # (K B, 1, 1, T)
        self.memory_keys, self.memory_values = [], []  # per layer, (K B, H, T, e)
        flat_memory = rearrange(memory, "k b t d -> k (b t) d")  # (K, B T, d)
        for layer in self.layers:
            keys, values = member_linear(flat_memory, layer.cross_memory).chunk(2, dim=-1)  # (K, B T, d) each
            for kept, x in ((self.memory_keys, keys), (self.memory_values, values)):
                kept.append(rearrange(x, "k (b t) (h e) -> (k b) h t e", b=rows, h=heads))
        # The KV cache: per layer, keys (index 0) and values (1) of every position fed so far.
        shape = (members * rows, 2, heads, max_positions, self.head_size)
        self.cache = [memory.new_zeros(shape) for _ in self.layers]  # per layer, (K B, 2, H, P, e)

    @torch.no_grad()
    def keep(self, rows: torch.Tensor) -> None:
        """Keep only the rows where the ``(B,)`` bool ``rows`` is True, in their order; the others
        (rows that have finished) leave the batch, so later tokens cost only the rows still going."""
        if rows.shape != (self.rows,):
            raise ValueError(f"keep expects a ({self.rows},) mask, got {tuple(rows.shape)}")
        index = rows.nonzero().squeeze(1)  # (A,)
        offsets = torch.arange(self.members, device=index.device) * self.rows  # (K,)
        flat = (offsets[:, None] + index[None, :]).reshape(-1)  # (K A,) places on the (K B) axis
        self.cache = [c.index_select(0, flat) for c in self.cache]
        self.memory_keys = [m.index_select(0, flat) for m in self.memory_keys]
        self.memory_values = [m.index_select(0, flat) for m in self.memory_values]
        self.memory_mask = self.memory_mask.index_select(0, flat)
        if self.previous is not None:
            self.previous = tuple(x.index_select(0, index) for x in self.previous)
        self.rows = index.numel()

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """One position's ``(K, B, H e)`` -> ``(K B, H, 1, e)`` (a view: the heads are contiguous)."""
        return x.reshape(self.members * self.rows, self.heads, 1, self.head_size)

    def _merge(self, x: torch.Tensor) -> torch.Tensor:
        """``(K B, H, 1, e)`` attention output of one position -> ``(K, B, H e)``."""
        return x.reshape(self.members, self.rows, self.heads * self.head_size)

    @torch.no_grad()
    def next_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed ``(B,)`` tokens at the next position; ``(K, B, V)`` logits for the token after them."""
        if self.position >= self.max_positions:
            raise ValueError(f"CachedEnsembleDecoder was built for {self.max_positions} positions")
        if tokens.shape != (self.rows,):
            raise ValueError(f"next_logits expects ({self.rows},) tokens, got {tuple(tokens.shape)}")
        p = self.position
        x = self.token_table.index_select(1, tokens) + self.position_table[:, p : p + 1]  # (K, B, d)
        for i, layer in enumerate(self.layers):
            # Causal self-attention: this position's query against the cached keys of 0 .. p.
            h = normalised(x, layer.eps[0])  # (K, B, d)
            qkv = member_linear(h, layer.self_in).view(
                self.members * self.rows, 3, self.heads, self.head_size
            )  # (K B, 3, H, e): query, key, value
            cache = self.cache[i]  # (K B, 2, H, P, e)
            cache[:, :, :, p] = qkv[:, 1:]  # this position's keys and values
            a = F.scaled_dot_product_attention(
                qkv[:, 0].unsqueeze(2), cache[:, 0, :, : p + 1], cache[:, 1, :, : p + 1]
            )  # (K B, H, 1, e)
            x = x + member_linear(self._merge(a), layer.self_out)
            # Cross-attention to the memory (latent slots and query words), padding blocked.
            h = normalised(x, layer.eps[1])  # (K, B, d)
            q = member_linear(h, layer.cross_query)  # (K, B, d)
            a = F.scaled_dot_product_attention(
                self._heads(q), self.memory_keys[i], self.memory_values[i], attn_mask=self.memory_mask
            )  # (K B, H, 1, e)
            x = x + member_linear(self._merge(a), layer.cross_out)
            # Feed-forward.
            h = F.relu(member_linear(normalised(x, layer.eps[2]), layer.feed_in))  # (K, B, 4d)
            x = x + member_linear(h, layer.feed_out)  # (K, B, d)
        self.position += 1
        hidden = normalised(x, self.final_eps)  # (K, B, d)
        logits = member_linear(hidden, self.out)  # (K, B, V)
        if self.previous is None:
            return logits
        rows = torch.arange(self.rows, device=tokens.device)  # (B,)
        ids, valid = aligned_words(*self.previous, rows, torch.full_like(rows, p))  # (B,), (B,)
        bonus = member_copy_bonus(hidden, self.copy_gate)  # (K, B)
        return add_copy_bonus(logits, bonus, ids.expand(self.members, -1), valid)  # (K, B, V)
