"""Every JSON file a run writes parses with a strict parser: an undefined figure (NaN, a return gap
with nothing imagined) is written as null, never as the bare word NaN that JSON does not have."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from envs.strict_json import finite_or_none, strict_dumps
from experiments.reporting.archive import archive_run
from tests.experiments.test_imagination_e2e import BASE, SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import assert_ok, finish, start_train


def refuse_constant(name: str):
    raise ValueError(f"not JSON: {name}")  # what a strict parser does with NaN / Infinity


def strict_loads(text: str):
    return json.loads(text, parse_constant=refuse_constant)


def test_non_finite_floats_become_null_at_any_depth():
    value = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": math.nan, "e": "NaN"}, "f": 3}
    assert finite_or_none(value) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": None, "e": "NaN"}, "f": 3}
    assert strict_dumps(value) == '{"a": null, "b": [1.5, null, [null, 2]], "c": {"d": null, "e": "NaN"}, "f": 3}'


def test_finite_values_give_the_text_json_dumps_gives():
    value = {"x": [0.1, 2, True, None, "s"], "y": {"z": -3.25}}
    assert strict_dumps(value, indent=2, sort_keys=True) == json.dumps(value, indent=2, sort_keys=True)


def json_outputs(folder: Path) -> list[Path]:
    """Every JSON or JSON-lines file under ``folder``, and the ``done`` marker (a JSON summary)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and (p.suffix in (".json", ".jsonl") or p.name == "done"))


@pytest.mark.slow
def test_a_run_with_undefined_figures_writes_only_strict_json(tmp_path):
    run_dir = tmp_path / "run"
    # a closed gate: nothing is imagined, so the return gaps are undefined (NaN in memory)
    result = finish(start_train(*BASE, *SMALL_WORLD_MODEL, "imagination=dyna", "imagination.ratio=0.75",
                                "imagination.gate_threshold=1.0", f"hydra.run.dir={run_dir}"))
    assert_ok(result)
    archived = archive_run(run_dir, tmp_path / "archived")
    files = json_outputs(run_dir) + json_outputs(archived)
    names = {p.name for p in files}
    assert {"summary.json", "metrics.jsonl", "done"} <= names
    for path in files:
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines() if path.suffix == ".jsonl" else [text]
        for line in filter(str.strip, lines):
            strict_loads(line)  # raises on NaN / Infinity
    summary = strict_loads((run_dir / "summary.json").read_text())
    assert summary["imagination"]["return_gap"] is None  # the NaN case was there, and written as null
    records = [strict_loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("imagination/return_gap" in r and r["imagination/return_gap"] is None for r in records)
