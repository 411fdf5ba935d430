"""Exact next-observation distributions of held-out transitions, rebuilt by replaying each episode.

Each trajectory is replayed in a fresh env reset with its seed: the env draws its hidden number,
map and slips from ``random.Random(seed)`` alone, so replaying the recorded actions reproduces the
recording, and every replayed observation is checked against it (a mismatch raises).

- hidden_number: ``predictive_distribution(k)`` over the answer word; the text (``guess k : answer``,
  after the earlier results in the transcript observation mode) is fixed by the action apart from
  that word, so it is also the distribution of the whole text. An action the env refuses (not
  ``guess(k)`` with k in range) gets its fixed error text: probability 1.
- slippery frozen_lake: ``transition_probabilities()[cell][action]`` grouped by next cell (two slip
  directions can land on the same cell), each cell rendered as the grid the env would show.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.frozen_lake import parse_action
from envs.hidden_number import ANSWERS, parse_guess
from envs.registry import make
from envs.trajectory import Trajectory

# The frozen_lake grid: cell letter -> symbol without / with the player on it (envs.frozen_lake).
_CELL = {"S": ("_", "P"), "F": ("_", "P"), "H": ("O", "X"), "G": ("G", "√")}


def frozen_lake_grid(desc: Sequence[str], cell: int) -> str:
    """The observation frozen_lake shows with the player on ``cell`` of map ``desc``."""
    ncol = len(desc[0])
    return "\n".join(
        " ".join(_CELL[ch][r * ncol + c == cell] for c, ch in enumerate(row)) for r, row in enumerate(desc)
    )


def next_cell_distribution(table: dict, desc: Sequence[str], cell: int, action: int) -> dict[str, float]:
    """``{next observation: probability}`` of ``action`` from ``cell`` under the exact ``table``
    (``transition_probabilities()``); slips landing on the same cell are summed."""
    out: dict[str, float] = {}
    for prob, nxt, _, _ in table[cell][action]:
        text = frozen_lake_grid(desc, nxt)
        out[text] = out.get(text, 0.0) + prob
    return out


def hidden_number_distribution(env, action: str, recorded: str) -> dict[str, float]:
    """``{next observation text: probability}`` of ``action`` in hidden_number ``env`` (before it
    steps). The recorded text gives what comes before the result line (the earlier results in the
    transcript mode; nothing in the last-line mode); a refused action's error text is certain."""
    k = parse_guess(action)
    if k is None or not 1 <= k <= env.n:
        return {recorded: 1.0}
    before = recorded.rpartition("\n")[0]
    lead = before + "\n" if before else ""
    return {f"{lead}guess {k} : {a}": p for a, p in env.predictive_distribution(k).items() if a in ANSWERS}


def exact_distributions(env_name: str, kwargs: dict, trajectories: Sequence[Trajectory]) -> list[dict[str, float]]:
    """Per turn (trajectory order, then turn order) ``{next observation text: probability}``.

    hidden_number: keys are the three ``guess k : answer`` texts. frozen_lake: the grids of the
    reachable cells. Raises if a replay diverges from its recording or if the recorded outcome has
    probability 0 (the distribution would be wrong).
    """
    out = []
    for t in trajectories:
        env = make(env_name, **kwargs)
        first = env.reset(t.seed)
        if t.turns and first != t.turns[0].observation:
            raise RuntimeError(f"replay of seed {t.seed}: first observation differs")
        cell = "".join(env.desc).index("S") if env_name == "frozen_lake" else None
        for turn in t.turns:
            if env_name == "hidden_number":
                dist = hidden_number_distribution(env, turn.action, turn.next_observation)
            elif env_name == "frozen_lake":
                dist = next_cell_distribution(env.transition_probabilities(), env.desc, cell,
                                              parse_action(turn.action))
            else:
                raise ValueError(f"no exact distribution for {env_name}")
            result = env.step(turn.action)
            if result.observation != turn.next_observation:
                raise RuntimeError(f"replay of seed {t.seed} diverged: {result.observation!r}")
            if dist.get(turn.next_observation, 0.0) <= 0.0:
                raise RuntimeError(f"seed {t.seed}: the recorded outcome {turn.next_observation!r} has "
                                   f"probability 0 under {dist}")
            cell = result.info.get("state", cell)
            out.append(dist)
    return out
