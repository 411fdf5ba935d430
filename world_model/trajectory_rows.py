"""A trajectory's token rows, built once, and the collate that pads a batch of them.

``build_training_batch`` used to tokenise every trajectory of every batch again, so a fit of many
epochs tokenised each trajectory once per epoch. ``trajectory_rows`` tokenises a whole list at
once (one tokenizer call over all its texts) into ``TrajectoryRows``, which the fit's dataset keeps;
``collate_rows`` only pads them into a ``WorldModelBatch``. ``build_training_batch``
does both at once, for rows used once.

Only real trajectories are accepted: a world model trained on its own imaginations would learn its
own errors. Trajectories without turns carry no observation and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from envs.trajectory import Trajectory
from world_model.batch import WorldModelBatch
from world_model.turn_tokens import TurnTokenizer, pad_nested, pad_rows


@dataclass(frozen=True)
class TrajectoryRows:
    """One trajectory's rows (``turn_tokens``), before padding."""

    observation: list[int]  # encoder row of the first observation
    turns: list[list[int]]  # (N) encoder turn rows
    queries: list[list[int]]  # (N) decoder queries "<act> action"
    texts: list[list[int]]  # (N + 1) decoder rows of the observation seen after k turns
    rewards: list[float]  # (N)
    dones: list[float]  # (N) 0/1
    branch_turn: int  # turns before it are a restored prefix: history only


def trajectory_rows(trajectories: Sequence[Trajectory], tokenizer: TurnTokenizer) -> list[TrajectoryRows]:
    """The rows of each trajectory (each must have at least one turn), tokenised in one call per kind."""
    tk = tokenizer
    observations = tk.observation_words(
        [text for t in trajectories for text in (t.turns[0].observation, *(u.next_observation for u in t.turns))]
    )
    actions = tk.action_words([u.action for t in trajectories for u in t.turns])
    out, o, a = [], 0, 0
    for t in trajectories:
        n = t.num_turns
        seen, acts = observations[o : o + n + 1], actions[a : a + n]
        o, a = o + n + 1, a + n
        out.append(
            TrajectoryRows(
                observation=tk.observation_row(seen[0]),
                turns=[tk.turn_row(r, act) for r, act in zip(seen[1:], acts, strict=True)],
                queries=[tk.query_row(act) for act in acts],
                texts=[tk.text_row(w) for w in seen],
                rewards=[float(u.reward) for u in t.turns],
                dones=[float(u.done) for u in t.turns],
                branch_turn=t.branch_turn,
            )
        )
    return out


def collate_rows(items: Sequence[TrajectoryRows], pad_id: int) -> WorldModelBatch:
    """Pad ``items`` into a ``WorldModelBatch`` (``world_model.batch`` describes its fields)."""
    observation_ids, observation_mask = pad_rows([r.observation for r in items], pad_id)
    turn_ids, turn_mask = pad_nested([r.turns for r in items], pad_id)
    query_ids, query_mask = pad_nested([r.queries for r in items], pad_id)
    text_ids, text_mask = pad_nested([r.texts for r in items], pad_id)
    n_turns = turn_ids.shape[1]
    rewards = torch.zeros(len(items), n_turns)  # (B, N)
    dones = torch.zeros(len(items), n_turns)  # (B, N)
    for b, r in enumerate(items):
        rewards[b, : len(r.rewards)] = torch.tensor(r.rewards, dtype=torch.float)
        dones[b, : len(r.dones)] = torch.tensor(r.dones, dtype=torch.float)
    count = torch.tensor([len(r.turns) for r in items])  # (B,)
    start = torch.tensor([r.branch_turn for r in items])  # (B,)
    k = torch.arange(n_turns + 1)  # (N + 1,)
    latent_mask = (k[None] >= start[:, None]) & (k[None] <= count[:, None])  # (B, N + 1)
    outcome_mask = (k[None, :-1] >= start[:, None]) & (k[None, :-1] < count[:, None])  # (B, N)
    return WorldModelBatch(
        observation_ids=observation_ids,
        observation_mask=observation_mask,
        turn_ids=turn_ids,
        turn_mask=turn_mask,
        turn_count=count,
        query_ids=query_ids,
        query_mask=query_mask,
        text_ids=text_ids,
        text_mask=text_mask,
        rewards=rewards,
        dones=dones,
        outcome_mask=outcome_mask,
        latent_mask=latent_mask,
    )


def build_training_batch(trajectories: Sequence[Trajectory], tokenizer: TurnTokenizer) -> WorldModelBatch:
    """Rows for ``WorldModel.loss`` from real trajectories (see the module docstring).

    Raises ``ValueError`` naming imagined trajectories, and when no trajectory has a played turn.
    """
    imagined = [t.trajectory_id for t in trajectories if t.source != "real"]
    if imagined:
        raise ValueError(
            f"world model batches take real trajectories only; imagined trajectory ids: {imagined}"
        )
    kept = [t for t in trajectories if t.turns]
    if not any(t.num_turns > t.branch_turn for t in kept):
        raise ValueError("no trajectory has a played turn to learn from")
    return collate_rows(trajectory_rows(kept, tokenizer), tokenizer.pad_id)
