"""Range checks for config values: each raises ``ValueError`` naming the key and the value it got.

At the bottom of the import order, so every package's config dataclasses share one set of checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def check_int(key: str, value: Any, minimum: int, maximum: int | None = None, *, optional: bool = False) -> int | None:
    """``value`` is an int (not a bool) >= ``minimum`` (and <= ``maximum``), or None when ``optional``."""
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
        maximum is not None and value > maximum
    ):
        bound = f"in [{minimum}, {maximum}]" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{key} must be an integer {bound}{' or null' if optional else ''}, got {value!r}")
    return value


def check_float(key: str, value: Any, minimum: float, maximum: float | None = None, *, optional: bool = False) -> None:
    """``value`` is a number (not a bool, not NaN) >= ``minimum`` (and <= ``maximum``), or None when ``optional``."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum or (
        maximum is not None and not value <= maximum
    ):
        bound = f"in [{minimum}, {maximum}]" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{key} must be a number {bound}{' or null' if optional else ''}, got {value!r}")


def check_bool(key: str, value: Any) -> None:
    """``value`` is a bool (a switch: true or false, not 0 / 1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")


def check_choice(key: str, value: Any, choices: Sequence[Any]) -> None:
    """``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{key} must be one of {tuple(choices)}, got {value!r}")
