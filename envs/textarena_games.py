"""What the TextArena adapter knows about individual single-player games, beyond the common API.

Nothing here is needed to play a game: an unlisted game runs through the adapter all the same.
A listed game adds the action format its own parser searches for (so a world model can mark
validity from the text, and the docs can state it), random well-formed actions (probe episodes,
tests), a task key where episodes draw an observable task, and, for GuessTheNumber, a binary-search
expert that reads only the hints the player was shown.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GameSpec:
    """One game family's extras; each callable reads the live TextArena env (``inner``)."""

    action_pattern: re.Pattern[str]
    """What the game's parser searches the action text for (copied from the game's ``step``)."""
    random_action: Callable[[Any, random.Random], str]
    task_key: Callable[[Any], str] | None = None
    """None: every episode starts from the same observation (the hidden part is chance, not a task)."""
    expert: Callable[[Any], str] | None = None


def _guess_random(inner: Any, rng: random.Random) -> str:
    return f"[{rng.randint(inner.min_number, inner.max_number)}]"


def _guess_expert(inner: Any) -> str:
    """Binary search over the range the hints shown so far leave open (never the hidden number)."""
    low, high = inner.min_number, inner.max_number
    for guess, hint in inner.state.game_state["guess_history"]:
        if hint == "higher":
            low = max(low, guess + 1)
        else:
            high = min(high, guess - 1)
    return f"[{(low + high) // 2}]" if low <= high else f"[{low}]"


def _mastermind_random(inner: Any, rng: random.Random) -> str:
    numbers = range(1, inner.num_numbers + 1)
    code = ([rng.choice(numbers) for _ in range(inner.code_length)] if inner.duplicate_numbers
            else rng.sample(numbers, inner.code_length))
    return "[" + " ".join(map(str, code)) + "]"


_HANOI_MOVES = [f"[{a} {b}]" for a in "ABC" for b in "ABC" if a != b]
_LAKE_MOVES = ["[up]", "[down]", "[left]", "[right]"]


def _lake_task(inner: Any) -> str:
    game = inner.state.game_state
    rows = ["".join(cell if cell.strip() else "F" for cell in row) for row in game["grid"]]
    return "\n".join(rows) + f"\nstart {tuple(game['player_pos'])} goal {tuple(game['goal_pos'])}"


GAMES: dict[str, GameSpec] = {
    "GuessTheNumber": GameSpec(re.compile(r"\[(\d+)\]"), _guess_random, expert=_guess_expert),
    "Mastermind": GameSpec(re.compile(r"\[(\d+(?:\s+\d+)*)\]"), _mastermind_random),
    "TowerOfHanoi": GameSpec(re.compile(r"\[([ABCabc])\s*,?\s*([ABCabc])\]"),
                             lambda inner, rng: rng.choice(_HANOI_MOVES)),
    "FrozenLake": GameSpec(re.compile(r"\[\s*(up|down|left|right|w|a|s|d)\s*\]", re.IGNORECASE),
                           lambda inner, rng: rng.choice(_LAKE_MOVES), task_key=_lake_task),
}


def game_family(game: str) -> str:
    """``GuessTheNumber-v0-hardcore`` -> ``GuessTheNumber``: the part before the version."""
    return game.split("-v", 1)[0]


def game_spec(game: str) -> GameSpec | None:
    return GAMES.get(game_family(game))
