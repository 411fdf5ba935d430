"""An agent's history as text: the first observation, then per turn the action and what came back.

The latent critic reads histories in this one form, whatever they came from:

- ``from_trajectory(trajectory, k)``: the state after ``k`` completed turns of a recorded episode;
- ``from_messages(messages)``: chat messages as in ``envs.chat`` (an optional leading ``system``
  message, ``user`` / ``tool`` observations, ``assistant`` actions).

What a turn "brought back" is every observation the agent saw between that action and the next:
normally just the tool result (``turn.next_observation``, which collected episodes also show as the
next turn's observation). When the next observation differs from the result (possible only in
imported chat files, where it is a second ``user`` message), both are kept, joined by a newline, in
either source, so a trajectory and its chat export give the same history. A ``system`` message is
not part of the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envs.trajectory import Trajectory

OBSERVATION_ROLES = ("user", "tool")


@dataclass(frozen=True)
class HistoryText:
    """One history: ``observation`` first, then ``actions[j]`` and the ``results[j]`` it brought back."""

    observation: str
    actions: tuple[str, ...] = ()
    results: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.actions) != len(self.results):
            raise ValueError(f"HistoryText: {len(self.actions)} actions for {len(self.results)} results")

    @property
    def num_turns(self) -> int:
        return len(self.actions)

    def prefix(self, k: int) -> HistoryText:
        """The history after its first ``k`` turns."""
        if not 0 <= k <= self.num_turns:
            raise ValueError(f"HistoryText.prefix: k={k} is outside [0, {self.num_turns}]")
        return HistoryText(self.observation, self.actions[:k], self.results[:k])


def from_trajectory(trajectory: Trajectory, k: int | None = None) -> HistoryText:
    """The history after ``k`` completed turns (default: all of them, the state after the last turn).

    Raises ``ValueError`` for a trajectory without turns (it carries no observation) and for ``k``
    outside ``[0, num_turns]``.
    """
    turns = trajectory.turns
    if not turns:
        raise ValueError(f"trajectory {trajectory.trajectory_id} has no turns, so no observation to start from")
    k = len(turns) if k is None else k
    if not 0 <= k <= len(turns):
        raise ValueError(f"k={k} completed turns is outside [0, {len(turns)}] for trajectory {trajectory.trajectory_id}")
    results = []
    for j in range(k):
        result = turns[j].next_observation
        if j + 1 < len(turns) and turns[j + 1].observation != result:
            result = f"{result}\n{turns[j + 1].observation}"  # a differing next observation (imported chats)
        results.append(result)
    return HistoryText(turns[0].observation, tuple(t.action for t in turns[:k]), tuple(results))


def from_messages(messages: Sequence[dict[str, str]]) -> HistoryText:
    """The history of chat messages; it must start (after an optional system message) with an observation
    and end with one. Raises ``ValueError`` naming the offending message."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError(f"a history must be a list of chat messages, got {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValueError(f"messages[{i}] must be a dict with a string 'role'")
        if message["role"] not in ("system", "assistant", *OBSERVATION_ROLES):
            raise ValueError(f"messages[{i}] has role {message['role']!r}; expected system, user, tool or assistant")
        if message["role"] == "system" and i > 0:
            raise ValueError(f"messages[{i}] is a system message; only the first message may be one")
        if not isinstance(message.get("content"), str):
            raise ValueError(f"messages[{i}] must have a string 'content'")
    start = 1 if messages and messages[0]["role"] == "system" else 0
    runs: list[list[str]] = [[]]  # runs[j]: the observation texts before action j (the last run: after the last)
    actions: list[str] = []
    for i in range(start, len(messages)):
        message = messages[i]
        if message["role"] == "assistant":
            if not runs[-1]:
                what = "starts with an action" if not actions else "has two assistant messages in a row"
                raise ValueError(f"messages[{i}]: the history {what}; an observation must come before each action")
            actions.append(message["content"])
            runs.append([])
        else:
            runs[-1].append(message["content"])
    if not runs[0]:
        raise ValueError("the history holds no observation message (user or tool)")
    if not runs[-1]:
        raise ValueError(
            f"messages[{len(messages) - 1}]: the history ends with an action; a state ends with what came back"
        )
    return HistoryText("\n".join(runs[0]), tuple(actions), tuple("\n".join(run) for run in runs[1:]))
