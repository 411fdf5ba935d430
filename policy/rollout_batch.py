"""One iteration's training batch, built from exactly what the policy sampled (token in, token out).

Each row is one agent turn: the prompt ids the policy conditioned on, followed by the action ids it
sampled, left-padded so every row ends at the last column::

    <pad> ... <pad>  prompt ids (as sampled)  action ids (as sampled, EOS only if it was emitted)
    response_mask:   0 ... 0                  1 ... 1

Nothing is decoded and re-tokenised: a pretrained BPE tokenizer that would split a decoded action
differently, or an action cut at the token budget without EOS, is trained on the very ids that were
sampled. Rows of turns restored from a branch prefix (``Trajectory.branch_turn``) are not trained:
they are the agent's history, not new experience.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from critic import CriticStates
from envs.trajectory import Trajectory, check_unique_ids
from policy.batch import TokenBatch
from policy.encode import left_pad


@dataclass
class RolloutBatch:
    """The learner's rows for one iteration, and where each row came from."""

    tokens: TokenBatch  # (B, L) prompt + sampled action ids; response_mask 1 on the action ids
    prompt_ids: torch.Tensor  # (B, P) long, left-padded: the state before the turn, as the policy saw it
    prompt_mask: torch.Tensor  # (B, P) long
    sampling_logp: torch.Tensor  # (B, L) float, each action id's log-prob when it was sampled; 0 elsewhere
    trajectories: list[Trajectory]  # every trajectory the rows come from
    row_keys: list[tuple[int, int]]  # per row: (index into ``trajectories``, turn index)
    weights: torch.Tensor  # (B,) float, per-row weight of the policy loss

    def __len__(self) -> int:
        return len(self.row_keys)

    @property
    def trajectory_ids(self) -> torch.Tensor:
        """(B,) long: each row's ``Trajectory.trajectory_id``."""
        return torch.tensor([self.trajectories[i].trajectory_id for i, _ in self.row_keys], dtype=torch.long)

    @property
    def turn_index(self) -> torch.Tensor:
        """(B,) long: each row's turn index within its trajectory."""
        return torch.tensor([t for _, t in self.row_keys], dtype=torch.long)

    def critic_states(self) -> CriticStates:
        """The state before each row's turn, for a turn-level critic: prompt ids and history."""
        histories = [(self.trajectories[i], t) for i, t in self.row_keys]
        return CriticStates(input_ids=self.prompt_ids, attention_mask=self.prompt_mask, histories=histories)


def build_rollout_batch(
    trajectories: Sequence[Trajectory], *, pad_id: int, weights: Sequence[float] | None = None
) -> RolloutBatch:
    """Rows for every sampled turn of ``trajectories`` (from ``branch_turn`` on), in trajectory then turn order.

    ``weights``: one per trajectory (default 1), copied to its rows. Every trained turn must carry
    the ``SampledAction`` the policy produced (``Turn.sample``); a turn without one raises, since
    training on re-tokenised text is exactly what this batch exists to prevent.
    """
    trajectories = list(trajectories)
    check_unique_ids(trajectories)  # per-trajectory estimators key on the id
    if weights is not None and len(weights) != len(trajectories):
        raise ValueError(f"build_rollout_batch: {len(weights)} weights for {len(trajectories)} trajectories")
    row_keys, rows, prompts, action_lengths, logps, row_weights = [], [], [], [], [], []
    for i, trajectory in enumerate(trajectories):
        for t in range(trajectory.branch_turn, trajectory.num_turns):
            sample = trajectory.turns[t].sample
            if sample is None:
                raise ValueError(
                    f"trajectory {trajectory.trajectory_id} turn {t} has no sampled token ids; only turns the "
                    "policy sampled can be trained on"
                )
            if not sample.action_ids:
                raise ValueError(f"trajectory {trajectory.trajectory_id} turn {t}: the sampled action is empty")
            row_keys.append((i, t))
            prompts.append(list(sample.prompt_ids))
            rows.append(list(sample.prompt_ids) + list(sample.action_ids))
            action_lengths.append(len(sample.action_ids))
            logps.append(list(sample.logprobs))
            row_weights.append(1.0 if weights is None else float(weights[i]))

    input_ids, attention_mask = left_pad(rows, pad_id)  # (B, L)
    prompt_ids, prompt_mask = left_pad(prompts, pad_id)  # (B, P)
    response_mask = torch.zeros(input_ids.shape, dtype=torch.float)  # (B, L)
    sampling_logp = torch.zeros(input_ids.shape, dtype=torch.float)  # (B, L)
    width = input_ids.shape[1]
    for b, (n, logp) in enumerate(zip(action_lengths, logps, strict=True)):
        response_mask[b, width - n:] = 1.0
        sampling_logp[b, width - n:] = torch.tensor(logp, dtype=torch.float)
    return RolloutBatch(
        tokens=TokenBatch(input_ids=input_ids, attention_mask=attention_mask, response_mask=response_mask),
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        sampling_logp=sampling_logp,
        trajectories=trajectories,
        row_keys=row_keys,
        weights=torch.tensor(row_weights, dtype=torch.float),
    )
