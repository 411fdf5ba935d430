"""The ensemble's members as one batched computation for training: stacked weights, a member axis K.

``EnsembleDynamics.logits`` calls each member's ``ObservationDecoder`` in turn: K module calls,
each over the full padded ``(B, S)`` text, then logits at every position, padding included. For
training this module instead

- stacks the K members' weights along a leading member axis on every call (``torch.stack`` is
  differentiable, so the gradients land in each member's own parameters: the modules, their
  state-dict names and saved models stay as they are), and runs every member in one batched matmul
  per map (``cached_decoding.member_linear``);
- runs causal self-attention through ``scaled_dot_product_attention`` with ``is_causal``;
- projects onto the vocabulary only at the positions a loss scores (the ``(K, R, S, V)`` logits of
  all positions were the largest tensor of a fit step and mostly padding).

The math is ``ObservationDecoder.forward``'s (``norm_first`` ReLU layers without dropout, as
``cached_decoding`` writes them out); the results equal it up to float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from einops import rearrange, repeat

from world_model.aligned_copy import add_copy_bonus, aligned_words
from world_model.cached_decoding import (
    MemberLayer,
    check_supported,
    member_copy_bonus,
    member_linear,
    normalised,
    stack_copy_gate,
    stack_linear,
)
from world_model.decoder import ObservationDecoder, check_previous
from world_model.decoder_context import DecoderContext


def member_memory(
    decoders: Sequence[ObservationDecoder], context: DecoderContext
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every member's ``ObservationDecoder.memory``: ``(K, B, T, d)`` vectors and the ``(B, T)`` bool
    padding mask (the same for every member); ``T = M + A``, plus ``O`` with the copy path."""
    config = decoders[0].config
    check_previous(config, context)
    latent, query_ids, query_mask = context.latent, context.query_ids, context.query_mask
    previous_ids, previous_mask = context.previous_ids, context.previous_mask
    if query_ids.shape[1] > config.max_query_tokens:
        raise ValueError(
            f"query rows of {query_ids.shape[1]} tokens exceed max_query_tokens ({config.max_query_tokens})"
        )
    members, rows = len(decoders), latent.shape[0]
    to_slots = stack_linear([d.to_slots.weight for d in decoders], [d.to_slots.bias for d in decoders])
    slots = member_linear(repeat(latent, "b d -> k b d", k=members), to_slots)  # (K, B, M d)
    slots = rearrange(slots, "k b (m d) -> k b m d", m=config.latent_slots)  # (K, B, M, d)
    slots = slots + torch.stack([d.slot_positions for d in decoders])[:, None]  # (K, B, M, d)
    tokens = torch.stack([d.token_table() for d in decoders])  # (K, V, d)
    width = query_ids.shape[1]
    query_positions = torch.stack([d.query_positions.weight[:width] for d in decoders])  # (K, A, d)
    query = tokens[:, query_ids] + query_positions[:, None]  # (K, B, A, d)
    memory = torch.cat([slots, query], dim=2)  # (K, B, M + A, d)
    blocked = torch.cat(
        [torch.zeros(rows, config.latent_slots, dtype=torch.bool, device=latent.device), query_mask == 0], dim=1
    )  # (B, M + A)
    if previous_ids is None:
        return memory, blocked
    width = previous_ids.shape[1]
    copy_positions = torch.stack([d.copy_positions.weight[:width] for d in decoders])  # (K, O, d)
    segment = torch.stack([d.copy_segment for d in decoders])  # (K, d)
    copied = tokens[:, previous_ids] + copy_positions[:, None] + segment[:, None, None]  # (K, B, O, d)
    return torch.cat([memory, copied], dim=2), torch.cat([blocked, previous_mask == 0], dim=1)  # (K, B, T, d), (B, T)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, **kw) -> torch.Tensor:
    """``(K, B, S, d)`` queries against ``(K, B, T, d)`` keys and values, per head -> ``(K, B, S, d)``."""
    members = q.shape[0]
    split = "k b s (h e) -> (k b) h s e"
    out = F.scaled_dot_product_attention(*(rearrange(x, split, h=heads) for x in (q, k, v)), **kw)
    return rearrange(out, "(k b) h s e -> k b s (h e)", k=members)  # (K, B, S, d)


class Packing:
    """The scored positions of ``(B, S)`` right-padded rows as one packed axis of P positions.

    Position-wise maps (projections, feed-forward, norms) run on the packed ``(K, P, c)`` tensors
    only; attention needs its rows, so ``unpack`` scatters into ``(K, B, S, c)`` with zeros at the
    other positions. Dropping the unscored positions changes no scored value: they are all after a
    row's scored ones (right padding, and the last real token predicts nothing), and causal
    attention never lets a position read a later one.
    """

    def __init__(self, scored: torch.Tensor) -> None:
        self.rows, self.width = scored.shape
        self.full = bool(scored.all())  # no padding: packing is a reshape
        self.index = scored.reshape(-1).nonzero().squeeze(1)  # (P,) places on the (B S) axis

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """``(K, B, S, c)`` -> ``(K, P, c)``."""
        flat = x.reshape(x.shape[0], self.rows * self.width, x.shape[-1])  # (K, B S, c)
        return flat if self.full else flat.index_select(1, self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """``(K, P, c)`` -> ``(K, B, S, c)``, zeros at the unscored positions."""
        if not self.full:
            x = x.new_zeros(x.shape[0], self.rows * self.width, x.shape[-1]).index_copy(1, self.index, x)
        return x.reshape(x.shape[0], self.rows, self.width, x.shape[-1])


def _self_attention(x: torch.Tensor, layer: MemberLayer, packing: Packing, heads: int) -> torch.Tensor:
    """A layer's causal self-attention sublayer with its residual, on packed ``(K, P, d)`` states."""
    qkv = packing.unpack(member_linear(normalised(x, layer.eps[0]), layer.self_in))  # (K, B, S, 3d)
    attended = _attend(*qkv.chunk(3, dim=-1), heads, is_causal=True)  # (K, B, S, d)
    return x + member_linear(packing.pack(attended), layer.self_out)  # (K, P, d)


def _first_self_attention(
    decoders: Sequence[ObservationDecoder], layer: MemberLayer, text_ids: torch.Tensor, scored: torch.Tensor,
    packing: Packing,
) -> torch.Tensor:
    """Embeddings and the first layer's self-attention sublayer, packed: ``(K, P, d)``.

    Up to there a row's states depend on its text alone, and a fit's rows repeat texts (the
    observation after turn ``t`` is both turn ``t``'s target and the text the latent after ``t``
    rewrites), so each distinct row is computed once and copied to its repeats.
    """
    width, heads = text_ids.shape[1], decoders[0].config.num_heads
    distinct, inverse = torch.unique(torch.cat([text_ids, scored.long()], dim=1), dim=0, return_inverse=True)
    own = Packing(distinct[:, width:].bool())  # the distinct rows' scored positions
    tokens = torch.stack([d.token_table() for d in decoders])  # (K, V, d)
    positions = torch.stack([d.text_positions.weight[:width] for d in decoders])  # (K, S, d)
    x = own.pack(tokens[:, distinct[:, :width]] + positions[:, None])  # (K, P_u, d)
    x = _self_attention(x, layer, own, heads)  # (K, P_u, d)
    return packing.pack(own.unpack(x)[:, inverse])  # (K, P, d)


def member_hidden(
    decoders: Sequence[ObservationDecoder], context: DecoderContext, text_ids: torch.Tensor, scored: torch.Tensor
) -> torch.Tensor:
    """Every member's final hidden states at the ``P`` positions where the ``(B, S)`` bool ``scored``
    is True (row-major), after the last layer norm: ``(K, P, d)``. ``context``'s ``(B, O)`` copy
    memory is given exactly when the decoders have ``copy_observation``.

    ``scored`` must be True on a prefix of each row (right padding). The final norm's affine part is
    left to the caller (``member_logits_at`` folds it into the output map).
    """
    config = decoders[0].config
    for decoder in decoders:
        check_supported(decoder)
    width, heads = text_ids.shape[1], config.num_heads
    if width > config.max_text_tokens:
        raise ValueError(f"text rows of {width} tokens exceed max_text_tokens ({config.max_text_tokens})")
    if scored.shape != text_ids.shape or bool((scored[:, 1:] & ~scored[:, :-1]).any()):
        raise ValueError("scored must be a (B, S) mask that is True on a prefix of each row")
    memory, blocked = member_memory(decoders, context)  # (K, B, T, d), (B, T)
    members = memory.shape[0]
    # -inf on padded memory slots, one row per (member, row); broadcast over heads and positions.
    additive = torch.zeros(blocked.shape, dtype=memory.dtype, device=memory.device).masked_fill(blocked, float("-inf"))
    memory_mask = repeat(additive, "b t -> (k b) 1 1 t", k=members)  # (K B, 1, 1, T)
    packing = Packing(scored)
    layers = [MemberLayer.of([d.blocks.layers[i] for d in decoders]) for i in range(config.num_layers)]
    x = _first_self_attention(decoders, layers[0], text_ids, scored, packing)  # (K, P, d)
    for i, layer in enumerate(layers):
        if i > 0:
            x = _self_attention(x, layer, packing, heads)  # (K, P, d)
        q = packing.unpack(member_linear(normalised(x, layer.eps[1]), layer.cross_query))  # (K, B, S, d)
        k, v = member_linear(memory.flatten(1, 2), layer.cross_memory).view(*memory.shape[:3], -1).chunk(2, dim=-1)
        attended = _attend(q, k, v, heads, attn_mask=memory_mask)  # (K, B, S, d)
        x = x + member_linear(packing.pack(attended), layer.cross_out)  # (K, P, d)
        x = x + member_linear(F.relu(member_linear(normalised(x, layer.eps[2]), layer.feed_in)), layer.feed_out)
    return normalised(x, decoders[0].norm.eps)  # (K, P, d)


def member_logits_at(
    decoders: Sequence[ObservationDecoder], context: DecoderContext, text_ids: torch.Tensor, scored: torch.Tensor
) -> torch.Tensor:
    """Every member's next-token logits at the ``P`` positions where ``scored`` (``(B, S)`` bool, True
    on a prefix of each row) is True, in row-major order: ``(K, P, V)``; the same values as
    ``EnsembleDynamics.logits(...)[:, scored]`` up to float rounding (copy memory as in ``member_hidden``)."""
    hidden = member_hidden(decoders, context, text_ids, scored)  # (K, P, d)
    out = stack_linear([d.out.weight for d in decoders], [d.out.bias for d in decoders], [d.norm for d in decoders])
    logits = member_linear(hidden, out)  # (K, P, V)
    if not decoders[0].config.aligned_copy:
        return logits
    place = scored.reshape(-1).nonzero().squeeze(1)  # (P,) places on the (B S) axis, as ``Packing`` orders them
    width = text_ids.shape[1]
    ids, valid = aligned_words(context.previous_ids, context.previous_mask, place // width, place % width)  # (P,)
    return add_copy_bonus(logits, member_copy_bonus(hidden, stack_copy_gate(decoders)), ids.expand(len(decoders), -1),
                          valid)  # (K, P, V)


def member_outcome(heads: Sequence[torch.nn.Module], latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every member's ``OutcomeHeads`` at once: ``(B, D)`` latent -> ``(K, B)`` rewards, ``(K, B)`` done logits."""
    trunk = stack_linear([h.trunk[0].weight for h in heads], [h.trunk[0].bias for h in heads])  # (K, D, H)
    both = stack_linear(
        [torch.cat([h.reward.weight, h.done.weight]) for h in heads],
        [torch.cat([h.reward.bias, h.done.bias]) for h in heads],
    )  # (K, H, 2): the reward and done maps side by side
    hidden = F.gelu(member_linear(repeat(latent, "b d -> k b d", k=len(heads)), trunk))  # (K, B, H)
    out = member_linear(hidden, both)  # (K, B, 2)
    return out[..., 0], out[..., 1]  # (K, B), (K, B)
