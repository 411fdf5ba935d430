"""Two-hop lookup as text: find where a person's friend lives by looking people up with a tool.

A gymnasium-style env (``reset(seed=...)``, ``step(action)``; run it with ``env=gym_text
env.kwargs.entry_point=envs.lookup_text:LookupText`` or ``experiment=lookup``) without importing
gymnasium. Each seed draws a directory: every one of ``PEOPLE`` has a friend (another person) and a
city (one of ``CITIES``), and the question names one person. The agent has two actions:

- ``look NAME`` calls the directory tool: the next observation shows NAME's record;
- ``answer CITY`` ends the episode, with reward 1.0 when CITY is where the friend of the person in
  the question lives, else 0.

A shortest episode is three turns (look the person, look their friend, answer); after ``time_limit``
turns the episode is truncated. Any other text, a name that is not a person or a city that is not
one, is refused with an error line that lists the people and the cities, and costs the turn.

Every observation is the question, then the tool's last answer::

    question : where does the friend of ada live ?
    record : ada friend cal city riga

What the agent needs is never in the first observation: it reads the friend's name off one tool
result and the city off the next, which no amount of training on the question alone can guess.

The task is (person asked about, their friend, the friend's city): ``task_key`` names it, so
``envs/splits.py`` holds out a fifth of the 336 of them for evaluation. The rest of a directory is
drawn afresh per seed, so people, friends and cities all recur in training; an evaluation episode
asks about a combination of the three that no training episode asked about.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

PEOPLE = ("ada", "bob", "cal", "dan", "eve", "fay", "gus", "hal")
CITIES = ("baku", "doha", "lima", "oslo", "riga", "rome")
_ACTION = re.compile(r"\s*(look|answer)\s+([a-z]+)\s*", re.IGNORECASE | re.ASCII)
ERROR = ("invalid action . say look and a person or answer and a city . people : " + " ".join(PEOPLE)
         + " . cities : " + " ".join(CITIES))
NO_RECORD = "none"


@dataclass(frozen=True)
class Directory:
    """One episode's hidden data: each person's friend and city, and whom the question is about."""

    friend: dict[str, str]
    city: dict[str, str]
    asked: str

    @property
    def answer(self) -> str:
        return self.city[self.friend[self.asked]]


def draw_directory(seed: int | None) -> Directory:
    """The directory of ``seed``: friends first, then cities, then the person asked about, in
    ``PEOPLE`` order from one ``random.Random(seed)``."""
    rng = random.Random(seed)
    friend = {person: rng.choice([other for other in PEOPLE if other != person]) for person in PEOPLE}
    city = {person: rng.choice(CITIES) for person in PEOPLE}
    return Directory(friend, city, rng.choice(PEOPLE))


def parse_action(action: str) -> tuple[str, str] | None:
    """``("look", person)`` or ``("answer", city)`` (any case, outer spaces), else None."""
    match = _ACTION.fullmatch(action)
    if match is None:
        return None
    verb, word = match.group(1).lower(), match.group(2).lower()
    known = PEOPLE if verb == "look" else CITIES
    return (verb, word) if word in known else None


def question(person: str) -> str:
    return f"question : where does the friend of {person} live ?"


def record(directory: Directory, person: str) -> str:
    return f"{person} friend {directory.friend[person]} city {directory.city[person]}"


class LookupText:
    """Options: ``time_limit`` (turns, then truncated; default 4, one spare turn)."""

    def __init__(self, time_limit: int = 4) -> None:
        if isinstance(time_limit, bool) or not isinstance(time_limit, int) or time_limit < 1:
            raise ValueError(f"time_limit must be an integer >= 1, got {time_limit!r}")
        self.time_limit = time_limit
        self._directory = draw_directory(0)
        self._looked: set[str] = set()  # whose records the agent has been shown
        self._turns = 0

    def _observation(self, line: str) -> str:
        return f"{question(self._directory.asked)}\nrecord : {line}"

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        self._directory = draw_directory(seed)
        self._looked = set()
        self._turns = 0
        return self._observation(NO_RECORD), {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self._turns += 1
        truncated = self._turns >= self.time_limit
        parsed = parse_action(action)
        if parsed is None:
            return self._observation(ERROR), 0.0, False, truncated, {"valid": False}
        verb, word = parsed
        if verb == "answer":
            right = word == self._directory.answer
            line = f"answer {word} is {'right' if right else 'wrong'}"
            return self._observation(line), float(right), True, False, {"valid": True, "success": right}
        self._looked.add(word)
        return self._observation(record(self._directory, word)), 0.0, False, truncated, {"valid": True}

    def expert_action(self) -> str:
        """Look the person asked about, then their friend, then answer: each step reads only records
        the agent has been shown."""
        asked = self._directory.asked
        if asked not in self._looked:
            return f"look {asked}"
        friend = self._directory.friend[asked]
        if friend not in self._looked:
            return f"look {friend}"
        return f"answer {self._directory.answer}"

    def random_action(self, rng: random.Random) -> str:
        return rng.choice([*(f"look {person}" for person in PEOPLE), *(f"answer {city}" for city in CITIES)])

    def is_well_formed(self, text: str) -> bool:
        return parse_action(text) is not None

    def task_key(self) -> str:
        asked = self._directory.asked
        return f"asked {asked} friend {self._directory.friend[asked]} city {self._directory.answer}"
