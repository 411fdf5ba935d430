"""JSON that strict parsers accept: NaN and infinities become ``null``.

Python's ``json`` writes a float NaN as the bare word ``NaN``, which JSON does not have: JavaScript's
``JSON.parse``, ``jq`` and most other languages' parsers reject the whole file. Every JSON file the
project writes (summaries, ``metrics.jsonl`` records, markers, the trajectory store, saved configs)
goes through ``strict_dumps``, so a figure that was not defined (a return gap with nothing imagined)
reads as null, and ``allow_nan=False`` makes any non-finite value that slips past an error here.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """``value`` with every NaN / +-inf float, at any depth of dicts, lists and tuples, replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(item) for item in value]
    return value


def strict_dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``value`` with non-finite floats as null (the same text as ``json.dumps`` otherwise)."""
    return json.dumps(finite_or_none(value), allow_nan=False, **kwargs)
