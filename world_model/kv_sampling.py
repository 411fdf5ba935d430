"""Batched token sampling over a causal LM's KV cache, dropping rows from the batch as they finish.

One loop for every causal LM in Reverie: the policy samples its actions with it and the LM world
model its observations, so it lives here, below both.

Generic over Hugging Face causal LMs: the model is called with ``input_ids``, ``attention_mask``,
``position_ids``, ``use_cache=True`` and ``logits_to_keep=1``, and its cache is passed back under the
name its ``forward`` uses. Rows that have emitted EOS leave the decode batch once they are at least
half of it: their cache rows are dropped with the cache's ``reorder_cache`` (the batch-row selection
every ``transformers.Cache`` has; beam search uses it). Dropping by halves, not row by row, because
a step of a small model costs about the same for 16 rows as for 4 (per-call overhead dominates)
while each drop costs a dozen small tensor ops; a large model saves most of the idle compute either
way. A cache without ``reorder_cache`` keeps every row to the end. Rows that repeat a prompt (a
GRPO group's first turn) share its prefill: each distinct prompt is run once and its cache rows are
copied to the rows that repeat it (``world_model.shared_prefill``). Whatever the batch, the recorded
tokens are the same: the draw of prompt row ``b`` at step ``t`` uses ``uniforms[b, t]``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from envs.token_positions import position_ids_for
from world_model.sampling import draw_categorical
from world_model.shared_prefill import can_select_rows, prefill

_CACHE_KEYWORDS: dict[type, str] = {}  # model class -> the name of its forward's cache argument


def cache_keyword(model: torch.nn.Module) -> str:
    """``"cache"`` (newer transformers) or ``"past_key_values"``: how ``model.forward`` takes its KV cache.

    Looked up once per model class: ``inspect.signature`` on every decode step costs as much as a
    small model's attention.
    """
    kind = type(model)
    if kind not in _CACHE_KEYWORDS:
        parameters = inspect.signature(model.forward).parameters
        _CACHE_KEYWORDS[kind] = "cache" if "cache" in parameters else "past_key_values"
    return _CACHE_KEYWORDS[kind]


def can_drop_rows(cache) -> bool:
    """Whether finished rows can be removed from ``cache`` (it selects batch rows by index)."""
    return can_select_rows(cache)


@dataclass
class Decoded:
    """What one batched sampling run produced, rows in the order of the prompts."""

    token_ids: torch.Tensor  # (B, T) long on CPU, the sampled tokens; pad after a row's EOS
    lengths: torch.Tensor  # (B,) long, tokens each row produced, its EOS included when it stopped
    logprobs: torch.Tensor  # (B, T) float, log-prob of each token at temperature 1; 0 past lengths


def sample_with_cache(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    max_tokens: int,
    eos: int,
    pad: int,
    weights: Callable[[torch.Tensor], torch.Tensor] | None = None,
    uniforms: torch.Tensor | None = None,
    drop_finished: bool = True,
    share_prefill: bool = True,
) -> Decoded:
    """Up to ``max_tokens`` tokens after each left-padded prompt row, a row stopping at its EOS.

    ``input_ids``, ``attention_mask``: (B, P) on the model's device. ``weights`` maps the (A, V)
    next-token logits of the A rows still going to sampling weights (temperature, top-p); None
    decodes greedily (argmax). ``uniforms`` (B, max_tokens) in [0, 1), needed with ``weights``: the
    random numbers of the draws, one per (prompt row, step). ``drop_finished``: remove a row from the
    batch once it has emitted EOS (False keeps every row to the end, as a plain loop does).
    ``share_prefill``: run each distinct prompt row through the prompt pass once and copy its cache to
    the rows that repeat it (``world_model.shared_prefill``; False prefills every row).
    The log-probs are of the full softmax at temperature 1, as a full forward pass scores them.
    """
    batch = input_ids.shape[0]
    if weights is not None and (uniforms is None or tuple(uniforms.shape) != (batch, max_tokens)):
        raise ValueError(f"sample_with_cache: sampling needs uniforms of shape ({batch}, {max_tokens})")
    if batch == 0 or max_tokens == 0:
        empty = torch.zeros((batch, 0), dtype=torch.long)
        return Decoded(empty.fill_(pad), torch.zeros(batch, dtype=torch.long), empty.float())
    key = cache_keyword(model)
    positions = position_ids_for(attention_mask)  # (B, P)
    # logits (A, V), A = rows in the batch (B at first)
    cache, logits = prefill(model, input_ids, attention_mask, positions, key=key, share=share_prefill)
    drop = drop_finished and can_drop_rows(cache)
    prompt_width = attention_mask.shape[1]
    live = _LiveRows.start(attention_mask, positions, uniforms, max_tokens, logits.device)
    steps: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (rows, tokens, log-probs) per step
    for step in range(max_tokens):
        token, logp = _draw(logits, weights, live.fractions, step)  # (A,) on CPU, (A,)
        steps.append((live.rows, token, logp))  # written into (B, T) tensors once, after the loop
        ended = token == eos  # (A,)
        if bool(ended.any()):
            live.done |= ended
            finished = int(live.done.sum())
            if finished == len(live.rows):
                break
            if drop and 2 * finished >= len(live.rows):
                token = live.drop_finished(cache, token, input_ids.device)
        if step == max_tokens - 1:
            break
        out = model(
            input_ids=token[:, None].to(input_ids.device),
            attention_mask=live.attention_mask[:, : prompt_width + step + 1],  # (A, P+step+1)
            position_ids=live.next_position,
            use_cache=True,
            logits_to_keep=1,
            **{key: cache},
        )
        cache, logits = out[key], out.logits[:, -1]
        live.next_position = live.next_position + 1
    return _assemble(steps, batch, eos, pad)


@dataclass
class _LiveRows:
    """The rows still in the decoding batch, and what is cut with them when finished rows leave it."""

    rows: torch.Tensor  # (A,) the prompt row of each batch row, on CPU
    done: torch.Tensor  # (A,) rows that have emitted EOS, still in the batch
    attention_mask: torch.Tensor  # (A, P+T) the mask of every step to come
    next_position: torch.Tensor  # (A, 1)
    fractions: torch.Tensor | None  # (T, A) the draws' numbers as 1 - u in (0, 1]; None: greedy

    @classmethod
    def start(cls, attention_mask, positions, uniforms, max_tokens: int, device) -> _LiveRows:
        batch = attention_mask.shape[0]
        # The mask of every step to come, sliced per step (a view) rather than grown by a cat each step.
        full_mask = torch.cat([attention_mask, attention_mask.new_ones((batch, max_tokens))], dim=1)  # (A, P+T)
        # 1 - u in (0, 1], what draw_categorical takes: one subtraction per call
        fractions = None if uniforms is None else (1.0 - uniforms.T).to(device)
        return cls(
            rows=torch.arange(batch),
            done=torch.zeros(batch, dtype=torch.bool),
            attention_mask=full_mask,
            next_position=positions[:, -1:] + 1,
            fractions=fractions,
        )

    def drop_finished(self, cache, token: torch.Tensor, device) -> torch.Tensor:
        """Remove the finished rows from the batch and from ``cache``; returns ``token`` cut alike."""
        keep = (~self.done).nonzero().squeeze(-1)  # (A',) batch rows still going
        cache.reorder_cache(keep.to(device))
        self.rows, token, self.done = self.rows[keep], token[keep], self.done[keep]
        self.attention_mask, self.next_position = (
            self.attention_mask[keep.to(self.attention_mask.device)],
            self.next_position[keep],
        )
        if self.fractions is not None:
            self.fractions = self.fractions[:, keep.to(self.fractions.device)]
        return token


def _draw(
    logits: torch.Tensor,
    weights: Callable[[torch.Tensor], torch.Tensor] | None,
    fractions: torch.Tensor | None,
    step: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of ``logits`` (A, V), drawn (or argmax without ``fractions``), on CPU, and
    its log-prob at temperature 1 (A,)."""
    if fractions is None:
        token = logits.argmax(dim=-1)  # (A,)
    else:
        token = draw_categorical(weights(logits), fractions[step])  # (A,)
    logp = F.log_softmax(logits.float(), dim=-1).gather(-1, token[:, None]).squeeze(-1)  # (A,)
    return token.cpu(), logp


def _assemble(
    steps: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], batch: int, eos: int, pad: int
) -> Decoded:
    """The (B, T) token and log-prob tensors from each step's (rows, tokens, log-probs), each row cut
    after its first EOS (pad and 0 there: a row kept in the batch after its EOS sampled on)."""
    width = len(steps)
    row_index = torch.cat([rows for rows, _, _ in steps])  # (N,) N = row-steps decoded
    step_index = torch.cat(
        [torch.full((len(rows),), t, dtype=torch.long) for t, (rows, _, _) in enumerate(steps)]
    )
    token_ids = torch.full((batch, width), pad, dtype=torch.long)  # (B, T)
    token_ids[row_index, step_index] = torch.cat([tokens for _, tokens, _ in steps])
    logprobs = torch.zeros((batch, width))  # (B, T)
    logprobs[row_index, step_index] = torch.cat([logp for _, _, logp in steps]).float().cpu()
    is_eos = token_ids == eos  # (B, T)
    first_eos = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), width)  # (B,) width: no EOS
    lengths = (first_eos + 1).clamp(max=width)  # (B,) the EOS counts; a row without one ran to the end
    past_end = torch.arange(width)[None, :] >= lengths[:, None]  # (B, T)
    logprobs = logprobs.masked_fill(past_end, 0.0)
    if not bool(logprobs.isfinite().all()):  # checked once here, not per step
        raise ValueError("sample_with_cache: the model gave non-finite logits (NaN or inf)")
    return Decoded(token_ids.masked_fill(past_end, pad), lengths, logprobs)
