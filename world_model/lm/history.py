"""``LMState``: the LM world model's state, the text history itself (first observation and the
latest turns), batched over rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Turns = tuple[tuple[str, str], ...]
"""(action, the observation it got back) per turn, oldest first."""


@dataclass(frozen=True)
class LMState:
    """B agent states as text: each row's first observation, its latest ``window`` turns, and its
    latest observation (for the caller; the prompt is rebuilt from ``first`` and ``turns``)."""

    first: tuple[str, ...]  # (B,)
    turns: tuple[Turns, ...]  # (B,) the turns kept, at most the model's window
    observations: tuple[str, ...]  # (B,)

    def __post_init__(self) -> None:
        for name in ("first", "turns", "observations"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not len(self.first) == len(self.turns) == len(self.observations):
            raise ValueError(
                f"LMState: {len(self.first)} first observations, {len(self.turns)} histories, "
                f"{len(self.observations)} observations"
            )

    def __len__(self) -> int:
        return len(self.first)

    @classmethod
    def start(cls, observations: Sequence[str]) -> LMState:
        """The states after each row's first observation."""
        return cls(tuple(observations), tuple(() for _ in observations), tuple(observations))

    def select(self, rows: Sequence[int]) -> LMState:
        """The states of ``rows``, in that order (repeats allowed)."""
        return LMState(
            tuple(self.first[i] for i in rows),
            tuple(self.turns[i] for i in rows),
            tuple(self.observations[i] for i in rows),
        )

    @classmethod
    def concat(cls, states: Sequence[LMState]) -> LMState:
        """One batch with the rows of ``states`` in order."""
        return cls(
            tuple(f for s in states for f in s.first),
            tuple(t for s in states for t in s.turns),
            tuple(o for s in states for o in s.observations),
        )

    def advance(self, actions: Sequence[str], observations: Sequence[str], window: int) -> LMState:
        """Each row with one more turn, keeping the latest ``window`` turns."""
        if not len(actions) == len(observations) == len(self):
            raise ValueError(f"{len(actions)} actions and {len(observations)} observations for {len(self)} states")
        turns = tuple(
            (kept + ((a, o),))[max(0, len(kept) + 1 - window) :] if window else ()
            for kept, a, o in zip(self.turns, actions, observations, strict=True)
        )
        return LMState(self.first, turns, tuple(observations))
