"""Sokoban as a text environment: push every box onto a target.

The observation is the room, one row per line, cells separated by single spaces (RAGEN's symbols):

    # # # # # #
    # _ _ _ _ #
    # _ P X O #
    # _ _ _ _ #
    # # # # # #

``#`` wall, ``_`` floor, ``O`` target, ``X`` box, ``√`` box on target, ``P`` player, ``S`` player on
target. The spaces matter for the word-level tokenizer: ``_``, ``O``, ``X``, ``P`` and ``S`` are
word characters, so an unspaced row such as ``#_PXO#`` would be one opaque word per row layout.
Spaced, every cell is its own token and the whole vocabulary is about twenty words.

Actions are ``Up``, ``Down``, ``Left``, ``Right``, case-insensitive, with whitespace anywhere
ignored (`` up ``, ``RIGHT`` and ``L eft`` parse; ``go left`` and ``Up.`` do not). A push into a
wall or another box leaves everything where it was; it is still a valid action. A malformed
action gets :data:`INVALID_ACTION_MESSAGE` on the line above the unchanged grid.

Rewards follow RAGEN / gym-sokoban: -0.1 every turn (malformed actions included), +1 for a box
pushed onto a target, -1 for a box pushed off one, +10 more when the last box reaches its target.
The episode ends with success when every box is on a target, or without it after ``max_turns``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from envs.base import EnvSnapshot, StepResult, ensure_not_done, ensure_started, snapshot_state
from envs.capabilities import Capabilities
from envs.sokoban_generator import generate_room
from envs.sokoban_solver import ACTIONS, Puzzle, is_solved, move, solve
from envs.tokenizer import words_of

WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#", "_", "O", "X", "√", "P", "S"
STEP_PENALTY = -0.1
BOX_ON_TARGET_REWARD = 1.0
BOX_OFF_TARGET_PENALTY = -1.0
FINISHED_REWARD = 10.0
INVALID_ACTION_MESSAGE = "Invalid action. Answer with one word: Up, Down, Left or Right."

_ACTION_BY_KEY = {action.lower(): action for action in ACTIONS}
_MIN_SIDE, _MAX_SIDE = 5, 8
# The generator met every request up to these (300 seeds per room size, max_turns=20); a third box
# in a 3x3 interior (5x5 room) often cannot leave its target.
_MAX_BOXES_SMALL, _MAX_BOXES = 2, 3
_SMALL_INTERIOR = 16  # interiors below 4x4 (e.g. 5x5 rooms) are too cramped for a third box


def render_grid(puzzle: Puzzle, player: int, boxes: frozenset[int]) -> str:
    """The room as text: rows on lines, cells separated by spaces."""
    rows = []
    for row in range(puzzle.height):
        cells = []
        for col in range(puzzle.width):
            cell = puzzle.cell(row, col)
            on_target = cell in puzzle.targets
            if cell not in puzzle.floor:
                cells.append(WALL)
            elif cell == player:
                cells.append(PLAYER_ON_TARGET if on_target else PLAYER)
            elif cell in boxes:
                cells.append(BOX_ON_TARGET if on_target else BOX)
            else:
                cells.append(TARGET if on_target else FLOOR)
        rows.append(" ".join(cells))
    return "\n".join(rows)


def parse_grid(text: str) -> tuple[Puzzle, int, frozenset[int]]:
    """Read a room written with the observation symbols (cell spacing optional) into
    ``(puzzle, player, boxes)``. Raises ValueError for ragged rows, unknown symbols, an open
    border, no single player, or box and target counts that differ."""
    rows = ["".join(line.split()) for line in text.strip().splitlines()]
    height, width = len(rows), len(rows[0]) if rows else 0
    if height < 3 or any(len(row) != width for row in rows) or width < 3:
        raise ValueError("grid must be a rectangle of at least 3x3 cells")
    floor, targets, boxes, players = set(), set(), set(), []
    for r, row in enumerate(rows):
        for c, symbol in enumerate(row):
            cell = r * width + c
            if symbol not in (WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET):
                raise ValueError(f"unknown grid symbol {symbol!r}")
            if symbol == WALL:
                continue
            if r in (0, height - 1) or c in (0, width - 1):
                raise ValueError("grid border must be walls")
            floor.add(cell)
            if symbol in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET):
                targets.add(cell)
            if symbol in (BOX, BOX_ON_TARGET):
                boxes.add(cell)
            if symbol in (PLAYER, PLAYER_ON_TARGET):
                players.append(cell)
    if len(players) != 1:
        raise ValueError(f"grid must have exactly one player, found {len(players)}")
    if not boxes or len(boxes) != len(targets):
        raise ValueError(
            f"grid needs as many targets as boxes (at least one): {len(boxes)} boxes, {len(targets)} targets"
        )
    return Puzzle(height, width, frozenset(floor), frozenset(targets)), players[0], frozenset(boxes)


def parse_action(text: str) -> str | None:
    """The canonical action name for ``text``, or None when it is not exactly one of the four."""
    return _ACTION_BY_KEY.get("".join(text.split()).lower())


class SokobanEnv:
    """Sokoban rooms from the reverse-play generator, one per seed.

    Options: ``dim_room=(6, 6)`` (height, width including the border walls, as in RAGEN and
    gym-sokoban; each side 5 to 8), ``num_boxes=1`` (1 to 3; at most 2 in rooms whose interior has
    fewer than 16 cells, such as 5x5), ``max_turns=20`` (the episode's turn budget, and also the
    longest shortest solution a generated room may have, so the expert always fits). A very small
    ``max_turns`` with several boxes can make ``reset`` raise ``GenerationError``.
    """

    name = "sokoban"
    capabilities = Capabilities(expert=True, task_key=True, max_turns_option=True, snapshots=True)

    def __init__(self, dim_room: tuple[int, int] = (6, 6), num_boxes: int = 1, max_turns: int = 20) -> None:
        if (
            # Any sequence, so a Hydra/OmegaConf ListConfig from YAML (``dim_room: [5, 5]``) works.
            not isinstance(dim_room, Sequence)
            or isinstance(dim_room, str)
            or len(dim_room) != 2
            or not all(_is_int(side) and _MIN_SIDE <= side <= _MAX_SIDE for side in dim_room)
        ):
            raise ValueError(
                f"dim_room must be (height, width) with each side {_MIN_SIDE}..{_MAX_SIDE}, got {dim_room!r}"
            )
        interior = (dim_room[0] - 2) * (dim_room[1] - 2)
        max_boxes = _MAX_BOXES_SMALL if interior < _SMALL_INTERIOR else _MAX_BOXES
        if not _is_int(num_boxes) or not 1 <= num_boxes <= max_boxes:
            raise ValueError(
                f"num_boxes must be 1..{max_boxes} for dim_room={tuple(dim_room)}, got {num_boxes!r}"
            )
        if not _is_int(max_turns) or max_turns < 1:
            raise ValueError(f"max_turns must be a positive integer, got {max_turns!r}")
        self.dim_room = (int(dim_room[0]), int(dim_room[1]))
        self.num_boxes = num_boxes
        self.max_turns = max_turns
        self._done = True  # nothing to step until reset
        self._plan: list[str] = []
        self._plan_state: tuple[int, frozenset[int]] | None = None
        self._task: str | None = None  # the start room's grid, set by every reset

    def reset(self, seed: int) -> str:
        """Generate the room for ``seed`` (same seed, same room) and return its grid."""
        room = generate_room(random.Random(seed), self.dim_room, self.num_boxes, self.max_turns)
        self._start(room.puzzle, room.player, room.boxes)
        self._plan, self._plan_state = list(room.solution), (room.player, room.boxes)
        return self.anchor_observation()

    def reset_to_grid(self, grid: str) -> str:
        """Start an episode from a hand-written room (see :func:`parse_grid`); for tests and
        curated levels. The room is used as given, whatever ``dim_room`` and ``num_boxes`` say."""
        puzzle, player, boxes = parse_grid(grid)
        if is_solved(puzzle, boxes):
            raise ValueError("grid is already solved: every box stands on a target")
        self._start(puzzle, player, boxes)
        return self.anchor_observation()

    def _start(self, puzzle: Puzzle, player: int, boxes: frozenset[int]) -> None:
        self.puzzle, self.player, self.boxes = puzzle, player, boxes
        self.turn = 0
        self._done = False
        self._plan, self._plan_state = [], None
        self._task = render_grid(puzzle, player, boxes)

    def step(self, action: str) -> StepResult:
        ensure_not_done(self._done, self.name)
        self.turn += 1
        parsed = parse_action(action)
        reward = STEP_PENALTY
        if parsed is not None:
            reward += self._apply(parsed)
        success = is_solved(self.puzzle, self.boxes)
        if success:
            reward += FINISHED_REWARD
        self._done = success or self.turn >= self.max_turns
        grid = self.anchor_observation()
        observation = grid if parsed is not None else f"{INVALID_ACTION_MESSAGE}\n{grid}"
        return StepResult(observation, reward, self._done, {"valid": parsed is not None, "success": success})

    def _apply(self, action: str) -> float:
        """Move, keep the expert's cached plan in step, and return the box reward of the move."""
        before = (self.player, self.boxes)
        self.player, self.boxes = move(self.puzzle, self.player, self.boxes, action)
        if self._plan and self._plan_state == before and self._plan[0] == action:
            self._plan.pop(0)
            self._plan_state = (self.player, self.boxes)
        # A move pushes at most one box, so the count of boxes on targets changes by at most one.
        change = len(self.boxes & self.puzzle.targets) - len(before[1] & self.puzzle.targets)
        if change > 0:
            return BOX_ON_TARGET_REWARD
        return BOX_OFF_TARGET_PENALTY if change < 0 else 0.0

    def expert_action(self) -> str:
        """First move of a shortest plan from the current state (BFS; the plan is reused while the
        episode follows it). When no plan exists (a box is stuck), answers ``Up``."""
        state = (self.player, self.boxes)
        if self._plan_state != state:  # an empty plan for this very state means "none": no retry
            self._plan = solve(self.puzzle, self.player, self.boxes) or []
            self._plan_state = state
        return self._plan[0] if self._plan else ACTIONS[0]

    def random_action(self, rng: random.Random) -> str:
        return rng.choice(ACTIONS)

    def anchor_observation(self) -> str:
        return render_grid(self.puzzle, self.player, self.boxes)

    def vocabulary(self) -> list[str]:
        symbols = " ".join([WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET])
        return sorted(words_of([symbols, "\n", INVALID_ACTION_MESSAGE, *ACTIONS]))

    # --- snapshots and tasks -----------------------------------------------------------------
    def _options(self) -> dict:
        return {"dim_room": self.dim_room, "num_boxes": self.num_boxes, "max_turns": self.max_turns}

    def snapshot(self) -> EnvSnapshot:
        """The room, player, boxes, turn, done flag, and the expert's cached plan (so a restored
        env answers ``expert_action`` without searching again)."""
        ensure_started(self._task is not None, self.name, "snapshot")
        state = {
            "puzzle": self.puzzle, "player": self.player, "boxes": self.boxes, "turn": self.turn,
            "done": self._done, "plan": list(self._plan), "plan_state": self._plan_state, "task": self._task,
        }
        return EnvSnapshot.take(self.name, self._options(), state)

    def restore(self, snapshot: EnvSnapshot) -> None:
        state = snapshot_state(snapshot, self.name, self._options())
        self.puzzle, self.player, self.boxes = state["puzzle"], state["player"], state["boxes"]
        self.turn, self._done = state["turn"], state["done"]
        self._plan, self._plan_state, self._task = state["plan"], state["plan_state"], state["task"]

    def task_key(self) -> str:
        """The start room's grid: walls, targets, boxes and player, which fix the whole puzzle."""
        ensure_started(self._task is not None, self.name, "task_key")
        return self._task


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
