"""Turns and trajectories: the records every later stage (store, world model, critic, learner) reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Source = Literal["real", "imagined"]


@dataclass(frozen=True)
class SampledAction:
    """What a token-level policy sampled for one turn: token in, token out.

    The learner trains on these ids, never on re-tokenised ``text``: a tokenizer may split decoded
    text differently, and an action cut at the token budget has no EOS to re-create. Lists, tensors
    or arrays are accepted and stored as tuples of ``int`` / ``float`` so a record cannot change.
    """

    text: str  # the decoded action the env receives
    prompt_ids: tuple[int, ...]  # exactly the ids the policy conditioned on
    action_ids: tuple[int, ...]  # exactly the sampled ids; the EOS only if the policy emitted it
    logprobs: tuple[float, ...]  # sampling log-prob of each action id
    # True: the policy stopped by itself (EOS); False: cut at its token budget; None: not recorded.
    # A field, not derived from the ids, because a tokenizer may have several stop ids.
    ended: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_ids", tuple(int(i) for i in self.prompt_ids))
        object.__setattr__(self, "action_ids", tuple(int(i) for i in self.action_ids))
        object.__setattr__(self, "logprobs", tuple(float(p) for p in self.logprobs))
        if len(self.logprobs) != len(self.action_ids):
            raise ValueError(
                f"SampledAction: {len(self.logprobs)} logprobs for {len(self.action_ids)} action ids"
            )
        if self.ended and not self.action_ids:
            raise ValueError("SampledAction: ended=True needs the emitted stop id among the action ids")


@dataclass
class Turn:
    """One agent turn: what it saw, what it did, and what came back."""

    observation: str  # shown to the agent before it acted (raw, without history)
    action: str  # the agent's action text, exactly as produced
    next_observation: str  # the tool result / next observation the env answered with
    reward: float
    done: bool
    valid: bool  # False when the action did not parse; the env answered with an error message
    anchor_observation: str  # raw env state key before acting (GiGPO groups steps on it)
    sample: SampledAction | None = None  # the policy's token record; None for text-only agents


@dataclass
class Trajectory:
    """One episode. All members of a group start from the same env state.

    ``turns[:branch_turn]`` is a prefix copied from an earlier trajectory whose state this episode
    was restored to (the agent's history, not new experience); ``turns[branch_turn:]`` were played
    in this episode. ``success`` and ``episode_return`` cover all turns: the episode as a whole.
    An episode ends ``done`` (the env said so, on the last turn) or ``truncated`` (the turn cap
    cut it off); a critic bootstraps at a truncation, never at ``done``.
    """

    env_name: str
    env_kwargs: dict[str, Any]
    seed: int  # the env seed the episode was reset with
    group_id: int
    trajectory_id: int
    source: Source = "real"
    turns: list[Turn] = field(default_factory=list)
    success: bool = False
    truncated: bool = False
    branch_turn: int = 0  # turns before this index were restored, not played
    iteration: int | None = None  # the training iteration that collected it, if the caller records one
    policy_version: int | None = None  # the policy (update count) that acted, if the caller records one

    def __post_init__(self) -> None:
        if not 0 <= self.branch_turn <= len(self.turns):
            raise ValueError(
                f"branch_turn {self.branch_turn} is outside 0..{len(self.turns)} (the turns held)"
            )

    @property
    def episode_return(self) -> float:
        """Undiscounted sum of the turn rewards."""
        return float(sum(t.reward for t in self.turns))

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists (a turn's ``sample`` as a dict or None), plus ``episode_return``."""
        record = asdict(self)
        record["episode_return"] = self.episode_return
        return record


def check_unique_ids(trajectories: Iterable[Trajectory]) -> None:
    """Raise ``ValueError`` naming every ``trajectory_id`` that appears more than once.

    Per-trajectory estimators key on that id, so a collision would chain two episodes into one.
    """
    counts: dict[int, int] = {}
    for traj in trajectories:
        counts[traj.trajectory_id] = counts.get(traj.trajectory_id, 0) + 1
    repeated = sorted(i for i, n in counts.items() if n > 1)
    if repeated:
        raise ValueError(
            f"trajectory_id(s) {repeated} appear more than once; give each collection its own id range"
        )


def merge_trajectories(*collections: Iterable[Trajectory]) -> list[Trajectory]:
    """Concatenate collections (e.g. successive ``collect`` calls) whose ids cannot be confused.

    Raises ``ValueError`` naming the colliding ids when a ``trajectory_id`` repeats anywhere, or when
    one ``group_id`` occurs in two collections: a group is compared against itself (GRPO baselines),
    so it must come from one collection. Give ``collect`` disjoint ranges (``next_ids`` helps).
    """
    lists = [list(c) for c in collections]
    merged = [t for c in lists for t in c]
    check_unique_ids(merged)
    owner: dict[int, int] = {}  # group_id -> index of the first collection holding it
    shared: set[int] = set()
    for index, collection in enumerate(lists):
        for group in {t.group_id for t in collection}:
            if owner.setdefault(group, index) != index:
                shared.add(group)
    if shared:
        raise ValueError(f"group_id(s) {sorted(shared)} occur in more than one collection")
    return merged


def next_ids(trajectories: Iterable[Trajectory]) -> tuple[int, int]:
    """``(first_group_id, first_trajectory_id)`` for a next collection that collides with none of these."""
    trajectories = list(trajectories)
    if not trajectories:
        return 0, 0
    return (
        max(t.group_id for t in trajectories) + 1,
        max(t.trajectory_id for t in trajectories) + 1,
    )
