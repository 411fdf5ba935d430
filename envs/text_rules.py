"""Each env's own rules, read off its observation text: the anchor key and the turn's outcome.

A world model writes observation text; these rules say what the real env would make of that text,
so an imagined episode is keyed and scored the way the real env keys and scores the same text:

- an **anchor rule** ``(anchor before the turn, observation after it) -> anchor after it`` gives
  the key GiGPO groups steps on (``anchor_observation()`` of the env). The first anchor of an
  episode is ``rule(first_observation, first_observation)``.
- an **outcome rule** ``(anchor before the turn, observation after it) -> TextOutcome`` gives the
  reward and done flag the env attaches to that text. The env's turn budget is not in the text;
  the caller, which counts turns, ends the episode there as the env does.

The rules accept both an env's raw text and the word tokenizer's rendering of it (``guess ( k )``
for ``guess(k)``): they read grid symbols, result lines and fixed phrases, not punctuation spacing.
``anchor_rule`` / ``outcome_rule`` return None for an env without rules; a caller then falls back
(to the observation itself as anchor, to a learned head for the outcome). Tests check every rule
against the real envs' own anchors, rewards and done flags on recorded episodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envs import minishop_pages as pages
from envs.sokoban import (
    BOX,
    BOX_OFF_TARGET_PENALTY,
    BOX_ON_TARGET,
    BOX_ON_TARGET_REWARD,
    FINISHED_REWARD,
    FLOOR,
    PLAYER,
    PLAYER_ON_TARGET,
    STEP_PENALTY,
    TARGET,
    WALL,
)


@dataclass(frozen=True)
class TextOutcome:
    """The reward and done flag the real env gives a turn whose observation is the text read."""

    reward: float
    done: bool


AnchorRule = Callable[[str, str], str]
OutcomeRule = Callable[[str, str], TextOutcome]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n")]


def _grid_lines(text: str, symbols: frozenset[str]) -> list[str]:
    """The lines made only of ``symbols`` separated by spaces (a rendered grid's rows)."""
    return [line for line in _lines(text) if line and set(line.split()) <= symbols]


# --- hidden_number ------------------------------------------------------------------------------
_RESULT = re.compile(r"guess \d+ : (higher|lower|correct)")


def _results(text: str) -> list[str]:
    return [line for line in _lines(text) if _RESULT.fullmatch(line)]


def _hidden_number_anchor(transcript: bool) -> AnchorRule:
    """The anchor is the transcript of tool results so far, the intro before any; malformed actions
    leave no line. ``transcript``: every observation already holds the whole transcript."""

    def rule(before: str, observation: str) -> str:
        lines = _results(observation) if transcript else _results(before) + _results(observation)
        return "\n".join(lines) if lines else before

    return rule


def _hidden_number_outcome(before: str, observation: str) -> TextOutcome:
    """Reward 1 and the end on ``correct`` in this turn's line (the last line), else 0."""
    correct = bool(re.fullmatch(r"guess \d+ : correct", _lines(observation)[-1]))
    return TextOutcome(1.0 if correct else 0.0, correct)


# --- frozen_lake ----------------------------------------------------------------------------------
_LAKE = frozenset({"_", "O", "G", "P", "X", "√"})  # cells; P / X / √: the player on ice / a hole / the goal


def _frozen_lake_anchor(before: str, observation: str) -> str:
    """The grid alone (the header or the error line dropped)."""
    return "\n".join(_grid_lines(observation, _LAKE)) or observation


def _frozen_lake_outcome(before: str, observation: str) -> TextOutcome:
    """Reward 1 and the end with the player on the goal; the end without reward in a hole."""
    cells = " ".join(_grid_lines(observation, _LAKE)).split()
    return TextOutcome(1.0 if "√" in cells else 0.0, "√" in cells or "X" in cells)


# --- sokoban ------------------------------------------------------------------------------------------
_ROOM = frozenset({WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET})


def _sokoban_anchor(before: str, observation: str) -> str:
    """The room alone (the invalid-action line dropped)."""
    return "\n".join(_grid_lines(observation, _ROOM)) or observation


def _sokoban_outcome(before: str, observation: str) -> TextOutcome:
    """The step penalty, plus or minus a box reward when the count of boxes on targets rose or
    fell, plus the finishing reward (and the end) once no box stands off a target."""
    after = " ".join(_grid_lines(observation, _ROOM)).split()
    change = after.count(BOX_ON_TARGET) - " ".join(_grid_lines(before, _ROOM)).split().count(BOX_ON_TARGET)
    reward = STEP_PENALTY + (BOX_ON_TARGET_REWARD if change > 0 else BOX_OFF_TARGET_PENALTY if change < 0 else 0.0)
    solved = BOX_ON_TARGET in after and BOX not in after
    return TextOutcome(reward + (FINISHED_REWARD if solved else 0.0), solved)


# --- minishop ------------------------------------------------------------------------------------------
_NOTICES = ("invalid action", "that action is not available")  # the first line of an answer that keeps the page
_RECEIPT = re.compile(rf"you bought .* it matched (\d+) of {pages.NUM_WANTED} wanted attributes \.")
_OVER = pages.OUT_OF_TURNS.strip()


def _minishop_anchor(before: str, observation: str) -> str:
    """The page alone (a notice line above it and the out-of-turns line below it dropped)."""
    lines = observation.split("\n")
    if lines and lines[0].startswith(_NOTICES):
        lines = lines[1:]
    if lines and lines[-1].strip() == _OVER:
        lines = lines[:-1]
    return "\n".join(lines)


def _minishop_outcome(before: str, observation: str) -> TextOutcome:
    """A receipt ends the episode with reward matched / wanted; the out-of-turns line ends it with 0."""
    for line in _lines(observation):
        bought = _RECEIPT.fullmatch(line)
        if bought:
            return TextOutcome(int(bought.group(1)) / pages.NUM_WANTED, True)
    return TextOutcome(0.0, _OVER in _lines(observation))


def anchor_rule(env_name: str, env_kwargs: dict[str, Any] | None = None) -> AnchorRule | None:
    """The anchor rule of env ``env_name`` built with ``env_kwargs``; None when it has none."""
    kwargs = env_kwargs or {}
    rules: dict[str, AnchorRule] = {
        "hidden_number": _hidden_number_anchor(kwargs.get("observation", "last") == "transcript"),
        "frozen_lake": _frozen_lake_anchor,
        "sokoban": _sokoban_anchor,
        "minishop": _minishop_anchor,
    }
    return rules.get(env_name)


def outcome_rule(env_name: str, env_kwargs: dict[str, Any] | None = None) -> OutcomeRule | None:
    """The outcome rule of env ``env_name``; None when its text does not fix reward and done."""
    rules: dict[str, OutcomeRule] = {
        "hidden_number": _hidden_number_outcome,
        "frozen_lake": _frozen_lake_outcome,
        "sokoban": _sokoban_outcome,
        "minishop": _minishop_outcome,
    }
    return rules.get(env_name)
