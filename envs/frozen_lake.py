"""FrozenLake as text: walk from the start to the goal across a frozen lake without falling in a hole.

Dynamics follow gymnasium's ``FrozenLake-v1``: actions 0..3 are ``Left``, ``Down``, ``Right``,
``Up``; a move into the border stays in place; holes (``H``) and goals (``G``) end the episode,
the goal with reward 1. When slippery, the agent moves in the intended direction with probability
1/3 and in each perpendicular direction with 1/3. States are ``row * ncol + col`` and
:meth:`FrozenLakeEnv.transition_probabilities` is laid out exactly like gymnasium's ``P``.

The grid is rendered RAGEN-style, one row per line, cells separated by spaces::

    P _ _ _
    _ O _ O
    _ _ _ O
    O _ _ G

``P`` player, ``_`` frozen ice (the start cell included), ``O`` hole, ``G`` goal, ``X`` player in a
hole, ``√`` player on the goal.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Sequence

from envs.base import EnvSnapshot, StepResult, ensure_not_done, ensure_started, snapshot_state
from envs.capabilities import Capabilities
from envs.tokenizer import words_of

DEFAULT_MAP = ("SFFF", "FHFH", "FFFH", "HFFG")  # gymnasium's "4x4"
ACTIONS = ("Left", "Down", "Right", "Up")  # gymnasium's action ids 0, 1, 2, 3
_STEP = ((0, -1), (1, 0), (0, 1), (-1, 0))  # (drow, dcol) per action id
_SYMBOL = {"S": "_", "F": "_", "H": "O", "G": "G"}
_PLAYER = {"S": "P", "F": "P", "H": "X", "G": "√"}
_ACTION = re.compile(r"\s*(left|down|right|up)\s*", re.IGNORECASE | re.ASCII)
_MAX_MAP_DRAWS = 10_000

HEADER = "reach G and avoid O . answer Left , Down , Right or Up"
ERROR = "invalid action . answer Left , Down , Right or Up"

Transition = tuple[float, int, float, bool]  # (prob, next_state, reward, done), as gymnasium


def parse_action(action: str) -> int | None:
    """Gymnasium's action id of ``Left``/``Down``/``Right``/``Up`` (any case, outer spaces), else None."""
    match = _ACTION.fullmatch(action)
    return None if match is None else [a.lower() for a in ACTIONS].index(match.group(1).lower())


def _move(desc: Sequence[str], state: int, action: int) -> int:
    """The cell reached by walking one step in ``action``'s direction; the border stops you."""
    nrow, ncol = len(desc), len(desc[0])
    row, col = divmod(state, ncol)
    drow, dcol = _STEP[action]
    return min(max(row + drow, 0), nrow - 1) * ncol + min(max(col + dcol, 0), ncol - 1)


def _letter(desc: Sequence[str], state: int) -> str:
    return desc[state // len(desc[0])][state % len(desc[0])]


def outcomes(desc: Sequence[str], state: int, action: int, is_slippery: bool) -> list[tuple[float, int, int]]:
    """``(prob, direction taken, next_state)`` of one action, in gymnasium's order.

    Terminal cells (holes, goals) keep the agent where it is. Slippery moves list the directions
    ``(a - 1) % 4, a, (a + 1) % 4``, separately even when two of them land on the same cell.
    """
    if _letter(desc, state) in "HG":
        return [(1.0, action, state)]
    directions = [(action - 1) % 4, action, (action + 1) % 4] if is_slippery else [action]
    return [(1.0 / len(directions), d, _move(desc, state, d)) for d in directions]


def transition_table(desc: Sequence[str], is_slippery: bool) -> dict[int, dict[int, list[Transition]]]:
    """The exact dynamics, ``P[state][action] -> [(prob, next_state, reward, done), ...]``."""
    table: dict[int, dict[int, list[Transition]]] = {}
    for state in range(len(desc) * len(desc[0])):
        table[state] = {}
        for action in range(4):
            if _letter(desc, state) in "HG":
                table[state][action] = [(1.0, state, 0.0, True)]  # gymnasium's absorbing entry
                continue
            table[state][action] = [
                (prob, nxt, 1.0 if _letter(desc, nxt) == "G" else 0.0, _letter(desc, nxt) in "HG")
                for prob, _, nxt in outcomes(desc, state, action, is_slippery)
            ]
    return table


def distances_to_goal(desc: Sequence[str]) -> list[int | None]:
    """Fewest non-slippery moves from each cell to a goal without entering a hole (None: no way).

    Breadth-first search backwards from the goals over the deterministic moves.
    """
    n_states = len(desc) * len(desc[0])
    predecessors: list[list[int]] = [[] for _ in range(n_states)]
    for state in range(n_states):
        if _letter(desc, state) in "HG":
            continue  # the episode ends there: no moves out
        for action in range(4):
            nxt = _move(desc, state, action)
            if _letter(desc, nxt) != "H":
                predecessors[nxt].append(state)
    dist: list[int | None] = [0 if _letter(desc, s) == "G" else None for s in range(n_states)]
    queue = deque(s for s in range(n_states) if dist[s] == 0)
    while queue:
        state = queue.popleft()
        for prev in predecessors[state]:
            if dist[prev] is None:
                dist[prev] = dist[state] + 1
                queue.append(prev)
    return dist


def generate_random_map(size: int, p_frozen: float, rng: random.Random, max_steps: int) -> list[str]:
    """A ``size x size`` map, start top-left, goal bottom-right, each other cell frozen w.p. ``p_frozen``.

    Maps are redrawn until the goal is reachable from the start in at most ``max_steps`` moves, so
    every episode can be won within its turn budget.
    """
    for _ in range(_MAX_MAP_DRAWS):
        cells = [["F" if rng.random() < p_frozen else "H" for _ in range(size)] for _ in range(size)]
        cells[0][0], cells[-1][-1] = "S", "G"
        desc = ["".join(row) for row in cells]
        dist = distances_to_goal(desc)[0]
        if dist is not None and dist <= max_steps:
            return desc
    raise ValueError(f"p_frozen={p_frozen} too low: no solvable {size}x{size} map in {_MAX_MAP_DRAWS} draws")


def _check_desc(desc: object) -> tuple[str, ...]:
    if isinstance(desc, str) or not isinstance(desc, Sequence) or len(desc) == 0:
        raise ValueError(f"desc must be a non-empty list of row strings, got {desc!r}")
    rows = tuple(desc)
    if not all(isinstance(r, str) and r and len(r) == len(rows[0]) for r in rows):
        raise ValueError(f"desc rows must be non-empty strings of equal length, got {rows!r}")
    text = "".join(rows)
    if set(text) - set("SFHG") or text.count("S") != 1 or "G" not in text:
        raise ValueError(f"desc must use only S F H G, with exactly one S and at least one G, got {rows!r}")
    return rows


class FrozenLakeEnv:
    """Text FrozenLake with gymnasium's dynamics and an exact-transition expert.

    Options: ``desc`` (a fixed map as a list of rows over ``S F H G``; default gymnasium's 4x4),
    or ``size`` (a fresh random ``size x size`` map per reset, drawn from the seed; not with
    ``desc``) with ``p_frozen`` (0.8); ``is_slippery`` (False); ``max_turns`` (None: three times
    the longer map side, 12 on 4x4). Reward 1.0 on reaching the goal (success); a hole ends the
    episode with 0; so does running out of turns.

    Expert: without slip, the first move of a shortest path (breadth-first search). With slip,
    the action maximising the exact probability of reaching the goal within the turns left,
    by finite-horizon value iteration over :meth:`transition_probabilities`. Ties go to the
    earlier action in ``Left, Down, Right, Up``.
    """

    name = "frozen_lake"
    capabilities = Capabilities(expert=True, task_key=True, max_turns_option=True, snapshots=True)

    def __init__(
        self,
        *,
        desc: Sequence[str] | None = None,
        size: int | None = None,
        p_frozen: float = 0.8,
        is_slippery: bool = False,
        max_turns: int | None = None,
    ) -> None:
        if desc is not None and size is not None:
            raise ValueError("give either desc (a fixed map) or size (random maps), not both")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 2):
            raise ValueError(f"size must be an integer >= 2, got {size!r}")
        if isinstance(p_frozen, bool) or not isinstance(p_frozen, (int, float)) or not 0.0 < p_frozen <= 1.0:
            raise ValueError(f"p_frozen must be in (0, 1], got {p_frozen!r}")
        if not isinstance(is_slippery, bool):
            raise ValueError(f"is_slippery must be a bool, got {is_slippery!r}")
        if max_turns is not None and (
            isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
        ):
            raise ValueError(f"max_turns must be an integer >= 1 or None, got {max_turns!r}")
        self.size = size
        self.p_frozen = float(p_frozen)
        self.is_slippery = is_slippery
        self._fixed = None if size is not None else _check_desc(DEFAULT_MAP if desc is None else desc)
        longer_side = size if size is not None else max(len(self._fixed), len(self._fixed[0]))
        self.max_turns = 3 * longer_side if max_turns is None else max_turns
        self._desc: tuple[str, ...] | None = self._fixed
        self._table = None if self._fixed is None else transition_table(self._fixed, is_slippery)
        self._values: list[list[float]] | None = None  # the slippery expert's cache, per map
        self._rng = random.Random(0)
        self._state = 0
        self._turn = 0
        self._done = True
        self._started = False

    # --- map and text -----------------------------------------------------------------------
    @property
    def desc(self) -> list[str]:
        """The current map as rows over ``S F H G`` (for random maps, the one drawn at reset)."""
        if self._desc is None:
            raise RuntimeError("frozen_lake: random map not drawn yet; call reset(seed) first")
        return list(self._desc)

    def render(self) -> str:
        """The grid with the player on it."""
        desc = self.desc
        ncol = len(desc[0])
        rows = []
        for r, row in enumerate(desc):
            cells = [(_PLAYER if r * ncol + c == self._state else _SYMBOL)[ch] for c, ch in enumerate(row)]
            rows.append(" ".join(cells))
        return "\n".join(rows)

    def transition_probabilities(self) -> dict[int, dict[int, list[Transition]]]:
        """Exact dynamics of the current map, in the layout of gymnasium's ``P`` (a fresh copy)."""
        if self._table is None:
            raise RuntimeError("frozen_lake: random map not drawn yet; call reset(seed) first")
        return {s: {a: list(ts) for a, ts in row.items()} for s, row in self._table.items()}

    # --- protocol ---------------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        """Start at ``S``; ``random.Random(seed)`` draws the map (when random) and then the slips."""
        self._rng = random.Random(seed)
        if self._fixed is None:
            self._desc = tuple(generate_random_map(self.size, self.p_frozen, self._rng, self.max_turns))
            self._table = transition_table(self._desc, self.is_slippery)
            self._values = None
        self._state = "".join(self._desc).index("S")
        self._turn = 0
        self._done = False
        self._started = True
        return f"{HEADER}\n{self.render()}"

    def step(self, action: str) -> StepResult:
        ensure_not_done(self._done, self.name)
        self._turn += 1
        action_id = parse_action(action)
        info: dict = {"valid": action_id is not None, "turn": self._turn}
        if action_id is None:
            success = False
            observation = f"{ERROR}\n{self.render()}"
        else:
            options = outcomes(self._desc, self._state, action_id, self.is_slippery)
            # Draw only when there is a choice, so deterministic episodes never touch the RNG.
            pick = 0 if len(options) == 1 else self._sample(p for p, _, _ in options)
            _, direction, self._state = options[pick]
            letter = _letter(self._desc, self._state)
            success = letter == "G"
            self._done = letter in "HG"
            info.update(direction=ACTIONS[direction], slipped=direction != action_id)
            observation = self.render()
        self._done = self._done or self._turn >= self.max_turns
        info.update(success=success, state=self._state)
        return StepResult(observation, 1.0 if success else 0.0, self._done, info)

    def _sample(self, probs) -> int:
        u, cumulative = self._rng.random(), 0.0
        probs = list(probs)
        for i, p in enumerate(probs):
            cumulative += p
            if u < cumulative:
                return i
        return len(probs) - 1  # rounding: the probabilities sum to 1 up to float error

    def expert_action(self) -> str:
        if self.is_slippery:
            return ACTIONS[self._best_action_by_value(max(self.max_turns - self._turn, 1))]
        dist = distances_to_goal(self._desc)
        best, best_dist = None, None
        for action in range(4):
            d = dist[_move(self._desc, self._state, action)]
            if d is not None and (best_dist is None or d < best_dist):
                best, best_dist = action, d
        if best is None:  # no path (only on a hand-made map): at least stay out of the holes
            best = min(range(4), key=lambda a: _letter(self._desc, _move(self._desc, self._state, a)) == "H")
        return ACTIONS[best]

    def _best_action_by_value(self, horizon: int) -> int:
        """argmax_a Q_h(state, a), Q_h(s, a) = E[reward + (V_{h-1}(next) unless done)], V_0 = 0."""
        values = self._values_by_horizon()[horizon - 1]
        q = [self._q(self._state, a, values) for a in range(4)]
        best = max(q)
        return next(a for a in range(4) if q[a] > best - 1e-12)  # the earliest of the (near-)ties

    def _values_by_horizon(self) -> list[list[float]]:
        """``V[h][s]``: the best probability of reaching the goal from ``s`` within ``h`` moves.

        Computed once per map for h = 0 .. max_turns - 1 (value iteration, one sweep per h).
        """
        if self._values is None:
            values = [[0.0] * len(self._table)]
            for _ in range(self.max_turns - 1):
                last = values[-1]
                values.append([max(self._q(s, a, last) for a in range(4)) for s in range(len(last))])
            self._values = values
        return self._values

    def _q(self, state: int, action: int, values: list[float]) -> float:
        return sum(p * (r + (0.0 if done else values[nxt])) for p, nxt, r, done in self._table[state][action])

    def random_action(self, rng: random.Random) -> str:
        return rng.choice(ACTIONS)

    def anchor_observation(self) -> str:
        """The grid alone: with the map drawn, the player's cell is the whole state."""
        return self.render()

    def vocabulary(self) -> list[str]:
        symbols = " ".join(list(_SYMBOL.values()) + list(_PLAYER.values()))
        return sorted(words_of([HEADER, ERROR, symbols, *ACTIONS]) | {"\n"})

    # --- snapshots and tasks -----------------------------------------------------------------
    def _options(self) -> dict:
        return {
            "desc": self._fixed, "size": self.size, "p_frozen": self.p_frozen,
            "is_slippery": self.is_slippery, "max_turns": self.max_turns,
        }

    def snapshot(self) -> EnvSnapshot:
        """The map, the player's cell, turn, done flag and the slip RNG's state."""
        ensure_started(self._started, self.name, "snapshot")
        state = {"rng": self._rng.getstate(), "desc": self._desc, "cell": self._state, "turn": self._turn,
                 "done": self._done}
        return EnvSnapshot.take(self.name, self._options(), state)

    def restore(self, snapshot: EnvSnapshot) -> None:
        state = snapshot_state(snapshot, self.name, self._options())
        if state["desc"] != self._desc:  # another random map: its dynamics and expert cache differ
            self._desc = state["desc"]
            self._table = transition_table(self._desc, self.is_slippery)
            self._values = None
        self._rng = random.Random()
        self._rng.setstate(state["rng"])
        self._state, self._turn, self._done, self._started = state["cell"], state["turn"], state["done"], True

    def task_key(self) -> str | None:
        """The map's rows (the start is always ``S``, so the map is the whole task) for random maps.

        None for a fixed map: every episode then poses the same task, there is no distribution to
        hold tasks out of, and episodes differ at most in hidden slips.
        """
        ensure_started(self._started, self.name, "task_key")
        return None if self._fixed is not None else "\n".join(self._desc)
