"""The Sokoban puzzle model (cells, the push rule) and a breadth-first planner over it.

Cells are integers ``row * width + col``. A :class:`Puzzle` is the static part of a room (its
floor and targets); everything that is not floor is wall. A state is the player's cell plus a
frozenset of box cells. The env, the generator and the planner all move through :func:`move`, so
there is one push rule in the code base.

:func:`solve` finds a shortest plan counted in player moves (not pushes) by breadth-first search
over (player, boxes) states, with a depth limit and a cap on the number of states it stores.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

ACTIONS: tuple[str, ...] = ("Up", "Down", "Left", "Right")
_OFFSETS = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}

DEFAULT_MAX_NODES = 200_000


@dataclass(frozen=True)
class Puzzle:
    """The static part of a room. The floor never touches the outer border (rooms are walled in),
    so adding a direction's offset to a floor cell never wraps onto another row."""

    height: int
    width: int
    floor: frozenset[int]
    targets: frozenset[int]

    def cell(self, row: int, col: int) -> int:
        return row * self.width + col

    def row_col(self, cell: int) -> tuple[int, int]:
        return divmod(cell, self.width)

    def delta(self, action: str) -> int:
        """How a cell index changes when moving one step in ``action`` (one of ``ACTIONS``)."""
        dr, dc = _OFFSETS[action]
        return dr * self.width + dc


def move(puzzle: Puzzle, player: int, boxes: frozenset[int], action: str) -> tuple[int, frozenset[int]]:
    """Apply one move. The player walks onto free floor, or pushes a box one cell when the cell
    behind it is free floor; a move into a wall, or a push into a wall or another box, changes
    nothing."""
    d = puzzle.delta(action)
    ahead = player + d
    if ahead not in puzzle.floor:
        return player, boxes
    if ahead not in boxes:
        return ahead, boxes
    beyond = ahead + d
    if beyond not in puzzle.floor or beyond in boxes:
        return player, boxes
    return ahead, (boxes - {ahead}) | {beyond}


def is_solved(puzzle: Puzzle, boxes: frozenset[int]) -> bool:
    """All boxes stand on targets (rooms have as many targets as boxes)."""
    return boxes <= puzzle.targets


def live_cells(puzzle: Puzzle) -> frozenset[int]:
    """Cells from which a lone box could still be pushed onto some target.

    Worked backwards from the targets: a box reaches cell ``c`` by a push in direction ``d`` from
    ``c - d``, with the player standing at ``c - 2d``; both must be floor. A box pushed anywhere
    else is dead, so the planner may drop such states without losing any solution.
    """
    live = set(puzzle.targets)
    frontier = deque(puzzle.targets)
    while frontier:
        cell = frontier.popleft()
        for action in ACTIONS:
            d = puzzle.delta(action)
            before, stand = cell - d, cell - 2 * d
            if before not in live and before in puzzle.floor and stand in puzzle.floor:
                live.add(before)
                frontier.append(before)
    return frozenset(live)


def solve(
    puzzle: Puzzle,
    player: int,
    boxes: frozenset[int],
    max_depth: int | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[str] | None:
    """A shortest list of moves that puts every box on a target, or ``None``.

    ``None`` means no plan of at most ``max_depth`` moves was found before ``max_nodes`` states
    were stored (the puzzle may be unsolvable, or only solvable beyond the limits). An already
    solved state gives ``[]``. Ties between shortest plans go to the first in ``ACTIONS`` order.
    """
    if is_solved(puzzle, boxes):
        return []
    live = live_cells(puzzle)
    start = (player, boxes)
    parent: dict[tuple[int, frozenset[int]], tuple[tuple[int, frozenset[int]], str] | None] = {start: None}
    frontier = [start]
    depth = 0
    while frontier and (max_depth is None or depth < max_depth):
        depth += 1
        next_frontier = []
        for state in frontier:
            for action in ACTIONS:
                new_player, new_boxes = move(puzzle, state[0], state[1], action)
                if new_player == state[0]:
                    continue  # blocked: the state did not change
                new_state = (new_player, new_boxes)
                if new_state in parent or not new_boxes <= live:
                    continue
                parent[new_state] = (state, action)
                if is_solved(puzzle, new_boxes):
                    return _plan_to(parent, new_state)
                if len(parent) >= max_nodes:
                    return None
                next_frontier.append(new_state)
        frontier = next_frontier
    return None


def _plan_to(parent: dict, state: tuple[int, frozenset[int]]) -> list[str]:
    """Walk parent links back from ``state`` to the start and return the actions in order."""
    plan = []
    link = parent[state]
    while link is not None:
        state, action = link
        plan.append(action)
        link = parent[state]
    plan.reverse()
    return plan
