"""Random actions from a one-line rule in config, for a TextArena game nobody wrote a GameSpec for.

A template is literal text with draws in braces: ``{a-b}`` an integer from a to b (both included),
``{x|y|z}`` one of the words. ``[{0-4} {0-4}]`` gives LightsOut moves such as ``[3 1]``;
``[{up|down|left|right}]`` a direction. Braces cannot nest; a literal brace cannot be written.
"""

from __future__ import annotations

import random
import re

DRAW = re.compile(r"\{([^{}]*)\}")
INTEGER_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")

Part = str | tuple[int, int] | tuple[str, ...]  # literal text, an integer range, or a word choice


def parse_action_template(template: str, key: str) -> list[Part]:
    """The template's literal pieces and draws, in order; a clear error naming ``key`` when malformed."""
    parts: list[Part] = []
    position = 0
    for match in DRAW.finditer(template):
        parts.append(template[position:match.start()])
        parts.append(_draw(match.group(1), template, key))
        position = match.end()
    parts.append(template[position:])
    if any(isinstance(part, str) and ("{" in part or "}" in part) for part in parts):
        raise ValueError(f"{key}: unbalanced brace in {template!r} (draws look like {{0-4}} or {{up|down}})")
    return [part for part in parts if part != ""]


def _draw(body: str, template: str, key: str) -> tuple[int, int] | tuple[str, ...]:
    bounds = INTEGER_RANGE.match(body)
    if bounds is not None:
        low, high = int(bounds.group(1)), int(bounds.group(2))
        if low > high:
            raise ValueError(f"{key}: empty range {{{body}}} in {template!r}")
        return (low, high)
    words = tuple(word.strip() for word in body.split("|"))
    if "|" not in body or not all(words):
        raise ValueError(f"{key}: {{{body}}} in {template!r} is neither a range like {{0-4}} "
                         "nor a choice like {up|down}")
    return words


def sample_action(parts: list[Part], rng: random.Random) -> str:
    """One action: each draw from ``rng`` left to right, literal text as written."""
    pieces = []
    for part in parts:
        if isinstance(part, str):
            pieces.append(part)
        elif all(isinstance(value, int) for value in part):
            pieces.append(str(rng.randint(part[0], part[1])))
        else:
            pieces.append(rng.choice(part))
    return "".join(pieces)
