"""Random Sokoban rooms by reverse play, drawn from a caller's ``random.Random``.

One attempt:
1. carve a connected floor inside the border walls with a random walk;
2. pick distinct target cells among the floor cells a box could be pulled off (two free cells in
   a line beside it), and a player cell among the rest;
3. put every box on its target, then play the game backwards: the player takes random steps and,
   when a box stands right behind it, pulls that box along into the cell it just left;
4. reject the room if any box still stands on a target, or if the BFS planner finds no solution
   within the move budget.

Every pull is the exact inverse of a push, so the reversed walk is a solution: rooms are solvable by
construction, and the planner's check bounds their length. Attempts are retried a bounded number of
times; after that :class:`GenerationError` says which settings could not be met.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from envs.sokoban_solver import ACTIONS, DEFAULT_MAX_NODES, Puzzle, solve

# The walk turns at random this often, so the floor gets corridors and open patches.
_TURN_PROBABILITY = 0.35


class GenerationError(RuntimeError):
    """No acceptable room was found within the allowed number of attempts."""


@dataclass(frozen=True)
class Room:
    """A generated start state and one of its shortest solutions."""

    puzzle: Puzzle
    player: int
    boxes: frozenset[int]
    solution: tuple[str, ...]


def generate_room(
    rng: random.Random,
    dim_room: tuple[int, int] = (6, 6),
    num_boxes: int = 1,
    max_solution_length: int = 20,
    max_attempts: int = 1000,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Room:
    """Draw a room whose shortest solution takes between 1 and ``max_solution_length`` moves.

    ``dim_room`` is (height, width) including the border walls. Uses only ``rng``, so the same
    generator state gives the same room.
    """
    height, width = dim_room
    interior = (height - 2) * (width - 2)
    if num_boxes < 1 or interior < num_boxes + 2:
        raise GenerationError(f"dim_room={dim_room} has no room for num_boxes={num_boxes} and a player")
    for _ in range(max_attempts):
        room = _attempt(rng, height, width, num_boxes, max_solution_length, max_nodes)
        if room is not None:
            return room
    raise GenerationError(
        f"no room with dim_room={dim_room}, num_boxes={num_boxes} solvable within "
        f"{max_solution_length} moves after {max_attempts} attempts"
    )


def _attempt(
    rng: random.Random, height: int, width: int, num_boxes: int, max_solution_length: int, max_nodes: int
) -> Room | None:
    """One reverse-play attempt; ``None`` when the result is rejected."""
    interior = (height - 2) * (width - 2)
    # At least 60% of the interior is floor, and always space for the boxes, the player and a step.
    min_floor = max(num_boxes + 3, math.ceil(0.6 * interior))
    num_floor = rng.randint(min(min_floor, interior), interior)
    floor = carve_floor(rng, height, width, num_floor)
    # A box can leave a target only by a pull: the player needs two free cells in a line beside it.
    offsets = (-width, width, -1, 1)
    pullable = [c for c in sorted(floor) if any(c + d in floor and c + 2 * d in floor for d in offsets)]
    if len(pullable) < num_boxes:
        return None
    targets = frozenset(rng.sample(pullable, num_boxes))
    player = rng.choice(sorted(floor - targets))
    puzzle = Puzzle(height, width, frozenset(floor), targets)
    num_steps = rng.randint(num_boxes * 4, max(num_boxes * 4, 2 * max_solution_length))
    player, boxes = reverse_play(rng, puzzle, player, targets, num_steps)
    if boxes & targets:
        return None
    solution = solve(puzzle, player, boxes, max_depth=max_solution_length, max_nodes=max_nodes)
    if solution is None:
        return None
    return Room(puzzle, player, boxes, tuple(solution))


def carve_floor(rng: random.Random, height: int, width: int, num_floor: int) -> set[int]:
    """A connected set of ``num_floor`` interior cells, traced by a random walk that stays inside
    the border walls and turns with probability ``_TURN_PROBABILITY``."""
    row, col = rng.randint(1, height - 2), rng.randint(1, width - 2)
    floor = {row * width + col}
    offsets = [(-1, 0), (1, 0), (0, -1), (0, 1)]
    dr, dc = rng.choice(offsets)
    while len(floor) < num_floor:
        if rng.random() < _TURN_PROBABILITY:
            dr, dc = rng.choice(offsets)
        if not (1 <= row + dr <= height - 2 and 1 <= col + dc <= width - 2):
            dr, dc = rng.choice(offsets)  # bounce off the border; try again next step
            continue
        row, col = row + dr, col + dc
        floor.add(row * width + col)
    return floor


def reverse_play(
    rng: random.Random, puzzle: Puzzle, player: int, boxes: frozenset[int], num_steps: int
) -> tuple[int, frozenset[int]]:
    """Take ``num_steps`` random backward steps. A step moves the player onto free floor; if a box
    stands on the opposite side it is pulled into the cell the player left (inverse of a push)."""
    for _ in range(num_steps):
        action = rng.choice(ACTIONS)
        d = puzzle.delta(action)
        ahead = player + d
        if ahead not in puzzle.floor or ahead in boxes:
            continue
        behind = player - d
        if behind in boxes:
            boxes = (boxes - {behind}) | {player}
        player = ahead
    return player, boxes
