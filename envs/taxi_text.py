"""Taxi as text: drive to the passenger, pick them up, drive to the destination, drop them off.

A gymnasium-style env (``reset(seed=...)``, ``step(action)``; run it with ``env=gym_text
env.kwargs.entry_point=envs.taxi_text:TaxiText`` or ``experiment=taxi``) without importing
gymnasium. The dynamics are gymnasium's ``Taxi-v3`` without rain: the same 5x5 map and walls, the
four landmarks R, G, Y, B, actions 0..5 ``South``, ``North``, ``East``, ``West``, ``Pickup``,
``Dropoff``; a move into a wall or the border stays in place, a pickup or dropoff where it cannot
happen changes nothing, a dropoff at another landmark leaves the passenger there. A start is
drawn uniformly, as gymnasium's, from the 300 states with the passenger at a landmark other than
the destination. The reward is Reverie's: 1.0 on delivery (the episode ends), else 0 (gymnasium's
-1 per step, -10 and +20 are not used). After ``time_limit`` turns the episode is truncated.

The state is rendered as the map, one row per line, cells and walls separated by spaces (``:`` open,
``|`` a wall; ``_`` empty, ``T`` the taxi), then where the passenger is (a landmark or ``T``, in the
taxi) and where they go::

    R : _ | _ : _ : G
    _ : _ | _ : _ : _
    _ : _ : _ : T : _
    _ | _ : _ | _ : _
    Y | _ : _ | B : _
    passenger Y . destination G

Every word of it shows on every turn, so a word tokenizer built from probe episodes covers it.

The task is the start (taxi cell, passenger, destination): ``task_key`` names it, so
``envs/splits.py`` holds out a fifth of the 300 starts for evaluation. The map is the same in every
episode, so states met on the way from an evaluation start are met in training too.
"""

from __future__ import annotations

import random
import re
from collections import deque

# gymnasium's Taxi-v3 map, without its border rows: cells at even columns, walls (``|``) or
# openings (``:``) between them at odd ones.
MAP = ("R: | : :G", " : | : : ", " : : : : ", " | : | : ", "Y| : |B: ")
SIZE = 5
LANDMARKS = ("R", "G", "Y", "B")
LOCATIONS = ((0, 0), (0, 4), (4, 0), (4, 3))  # (row, col) of R, G, Y, B, gymnasium's ``locs``
IN_TAXI = 4  # the passenger index of gymnasium's state when they ride
ACTIONS = ("South", "North", "East", "West", "Pickup", "Dropoff")  # gymnasium's action ids 0 .. 5
_ACTION = re.compile(r"\s*(south|north|east|west|pickup|dropoff)\s*", re.IGNORECASE | re.ASCII)
ERROR = "invalid action . answer South , North , East , West , Pickup or Dropoff"

State = tuple[int, int, int, int]  # (taxi row, taxi col, passenger index 0 .. 4, destination index 0 .. 3)


def parse_action(action: str) -> int | None:
    """Gymnasium's action id of an action name (any case, outer spaces), else None."""
    match = _ACTION.fullmatch(action)
    return None if match is None else [name.lower() for name in ACTIONS].index(match.group(1).lower())


def move(row: int, col: int, action: int) -> tuple[int, int]:
    """The cell one move away; the border and walls (``|`` in ``MAP``) stop the taxi."""
    if action == 0:
        return min(row + 1, SIZE - 1), col
    if action == 1:
        return max(row - 1, 0), col
    if action == 2 and col < SIZE - 1 and MAP[row][2 * col + 1] == ":":
        return row, col + 1
    if action == 3 and col > 0 and MAP[row][2 * col - 1] == ":":
        return row, col - 1
    return row, col


def transition(state: State, action: int) -> tuple[State, bool]:
    """The next state and whether the passenger was delivered (gymnasium's ``terminated``)."""
    row, col, passenger, destination = state
    if action < 4:
        return (*move(row, col, action), passenger, destination), False
    here = (row, col)
    if action == 4:  # pickup: only where the waiting passenger is
        ride = passenger < IN_TAXI and here == LOCATIONS[passenger]
        return (row, col, IN_TAXI if ride else passenger, destination), False
    if passenger == IN_TAXI and here == LOCATIONS[destination]:
        return (row, col, destination, destination), True
    if passenger == IN_TAXI and here in LOCATIONS:  # dropped at another landmark: they wait there
        return (row, col, LOCATIONS.index(here), destination), False
    return state, False


def render(state: State) -> str:
    row, col, passenger, destination = state
    lines = []
    for r, line in enumerate(MAP):
        cells = []
        for c, char in enumerate(line):
            if c % 2:
                cells.append(char)
            elif (r, c // 2) == (row, col):
                cells.append("T")
            else:
                cells.append(char if char in LANDMARKS else "_")
        lines.append(" ".join(cells))
    where = "T" if passenger == IN_TAXI else LANDMARKS[passenger]
    lines.append(f"passenger {where} . destination {LANDMARKS[destination]}")
    return "\n".join(lines)


def shortest_path(start: tuple[int, int], goal: tuple[int, int]) -> list[int]:
    """Moves of a shortest drive from ``start`` to ``goal``, ties broken by action order (breadth-first)."""
    previous: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            break
        for action in range(4):
            nxt = move(*cell, action)
            if nxt not in previous:
                previous[nxt] = (cell, action)
                queue.append(nxt)
    path: list[int] = []
    cell = goal
    while previous[cell] is not None:
        cell, action = previous[cell]
        path.append(action)
    return path[::-1]


def expert_plan(state: State) -> list[int]:
    """Actions of a shortest delivery from ``state``: drive to the passenger, pick up, drive, drop off."""
    row, col, passenger, destination = state
    plan: list[int] = []
    if passenger != IN_TAXI:
        plan += [*shortest_path((row, col), LOCATIONS[passenger]), 4]
        row, col = LOCATIONS[passenger]
    return plan + [*shortest_path((row, col), LOCATIONS[destination]), 5]


def start_states() -> list[State]:
    """The 300 starts gymnasium draws from, in its state order."""
    return [(row, col, passenger, destination) for row in range(SIZE) for col in range(SIZE)
            for passenger in range(4) for destination in range(4) if passenger != destination]


class TaxiText:
    """Options: ``time_limit`` (turns, then truncated; default 24)."""

    def __init__(self, time_limit: int = 24) -> None:
        if isinstance(time_limit, bool) or not isinstance(time_limit, int) or time_limit < 1:
            raise ValueError(f"time_limit must be an integer >= 1, got {time_limit!r}")
        self.time_limit = time_limit
        self._state: State = start_states()[0]
        self._start: State | None = None
        self._turns = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        self._state = self._start = random.Random(seed).choice(start_states())
        self._turns = 0
        return render(self._state), {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self._turns += 1
        truncated = self._turns >= self.time_limit
        action_id = parse_action(action)
        if action_id is None:
            return f"{ERROR}\n{render(self._state)}", 0.0, False, truncated, {"valid": False}
        self._state, delivered = transition(self._state, action_id)
        return render(self._state), float(delivered), delivered, truncated and not delivered, {"valid": True}

    def expert_action(self) -> str:
        return ACTIONS[expert_plan(self._state)[0]]

    def random_action(self, rng: random.Random) -> str:
        return rng.choice(ACTIONS)

    def is_well_formed(self, text: str) -> bool:
        return parse_action(text) is not None

    def task_key(self) -> str:
        row, col, passenger, destination = self._start
        return f"taxi {row} {col} passenger {LANDMARKS[passenger]} destination {LANDMARKS[destination]}"
