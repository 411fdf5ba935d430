"""From trajectories to the learner's token batch: one row per agent turn, a mask on the agent's tokens.

Row layout (left-padded so every row ends at the last column)::

    <pad> ... <pad> [BOS] prompt ids (left-truncated)  action ids (truncated)  EOS
    response_mask:  0 ... 0   0         0 ... 0          1 ... 1               1

The prompt is the rendered history window before the turn, so earlier actions, observations and
error answers sit inside it and are never trained; the turn's own action is trained even when it was
invalid, since it is what the agent produced.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from envs.trajectory import Trajectory
from policy.batch import TokenBatch
from policy.render import SYSTEM_PROMPT, has_chat_template, render_prompt


@dataclass(frozen=True)
class TurnSample:
    """One trainable (prompt, action) pair: turn ``turn_index`` of trajectory ``trajectory_index``."""

    trajectory_index: int  # position in the list of trajectories given to turn_samples
    turn_index: int
    prompt: str
    action: str


def turn_samples(
    trajectories: Sequence[Trajectory], history_window: int, tokenizer=None, *,
    system_prompt: str | None = SYSTEM_PROMPT, prior: Sequence[dict[str, str]] = (),
) -> list[TurnSample]:
    """One sample per turn, in trajectory order then turn order.

    The prompt shows the ``history_window`` turns before the turn, then the turn's observation. With a
    ``tokenizer`` that has a chat template the prompt is rendered with it (after ``system_prompt`` and
    the ``prior`` messages); otherwise as plain text.
    """
    samples = []
    for i, trajectory in enumerate(trajectories):
        for t, turn in enumerate(trajectory.turns):
            prompt = render_prompt(tokenizer, trajectory.turns[:t], turn.observation, history_window, system_prompt, prior)
            samples.append(TurnSample(trajectory_index=i, turn_index=t, prompt=prompt, action=turn.action))
    return samples


def _bos_prefix(tokenizer) -> list[int]:
    """BOS for a plain-text prompt; a chat template writes its own start tokens."""
    if tokenizer.bos_token_id is None or has_chat_template(tokenizer):
        return []
    return [tokenizer.bos_token_id]


def _pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def prompt_ids(tokenizer, prompts: Sequence[str], *, max_prompt_tokens: int) -> list[list[int]]:
    """Each prompt's ids: [BOS] + its last tokens, at most ``max_prompt_tokens`` in all (the end is kept)."""
    bos = _bos_prefix(tokenizer)
    keep = max_prompt_tokens - len(bos)
    if keep < 1:
        raise ValueError(f"max_prompt_tokens must leave room for one token after BOS, got {max_prompt_tokens}")
    encoded = tokenizer(list(prompts), add_special_tokens=False)["input_ids"] if prompts else []
    longest = max((len(ids) for ids in encoded), default=0)
    if longest > keep:
        warn_prompt_cut(longest + len(bos), max_prompt_tokens)
    # Sliced here rather than by the tokenizer: a call-time truncation_side is ignored by fast
    # tokenizers, and setting it on the tokenizer would change an object the caller shares.
    return [bos + ids[-keep:] for ids in encoded]


class PromptCutWarning(UserWarning):
    """A prompt was longer than ``policy.max_prompt_tokens`` and lost its start."""


_warned_caps: set[int] = set()  # caps already warned about: once per cap and process, not per batch


def warn_prompt_cut(length: int, max_prompt_tokens: int) -> None:
    """Say, once per cap, that prompts are being cut from the start, with the numbers and the way out."""
    if max_prompt_tokens in _warned_caps:
        return
    _warned_caps.add(max_prompt_tokens)
    message = (f"a prompt of {length} tokens was cut to policy.max_prompt_tokens={max_prompt_tokens}: its first "
               f"{length - max_prompt_tokens} tokens (the oldest history, or the start of a long observation) "
               "are not shown to the policy; raise policy.max_prompt_tokens or lower policy.history_window "
               "(said once per run)")
    logging.getLogger(__name__).warning(message)
    warnings.warn(message, PromptCutWarning, stacklevel=3)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both (B, L) long, rows right-aligned."""
    width = max((len(row) for row in rows), default=0)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, L)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, L)
    for b, row in enumerate(rows):
        if row:
            input_ids[b, width - len(row):] = torch.tensor(row, dtype=torch.long)
            attention_mask[b, width - len(row):] = 1
    return input_ids, attention_mask


def encode_prompts(tokenizer, prompts: Sequence[str], *, max_prompt_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts alone, left-padded for generation: exactly the prompt part of ``encode_samples``' rows."""
    return left_pad(prompt_ids(tokenizer, prompts, max_prompt_tokens=max_prompt_tokens), _pad_id(tokenizer))


def encode_samples(
    tokenizer, prompts: Sequence[str], actions: Sequence[str], *, max_prompt_tokens: int, max_action_tokens: int
) -> TokenBatch:
    """Prompt + action + EOS rows with ``response_mask`` 1 exactly on the action ids and the EOS."""
    if len(prompts) != len(actions):
        raise ValueError(f"encode_samples: {len(prompts)} prompts but {len(actions)} actions")
    if tokenizer.eos_token_id is None:
        raise ValueError("encode_samples: the tokenizer has no EOS token to close an action")
    heads = prompt_ids(tokenizer, prompts, max_prompt_tokens=max_prompt_tokens)
    tails = tokenizer(list(actions), add_special_tokens=False)["input_ids"] if actions else []
    tails = [ids[:max_action_tokens] + [tokenizer.eos_token_id] for ids in tails]
    input_ids, attention_mask = left_pad([h + t for h, t in zip(heads, tails, strict=True)], _pad_id(tokenizer))
    response_mask = torch.zeros(input_ids.shape, dtype=torch.float)  # (B, L)
    width = input_ids.shape[1]
    for b, tail in enumerate(tails):
        response_mask[b, width - len(tail):] = 1.0
    return TokenBatch(input_ids=input_ids, attention_mask=attention_mask, response_mask=response_mask)


def response_lengths(batch: TokenBatch) -> torch.Tensor:
    """Trained tokens per row (action tokens + EOS), (B,) long."""
    return batch.response_mask.sum(dim=-1).round().long()
