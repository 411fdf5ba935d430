"""Faults in a tiny in-process training run: an env that raises and NaN updates are survived and
logged with their iteration; too many NaN updates in a row stop the run; bad fault options fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.faults import training_run_stops, training_run_survives
from experiments.config import validate
from tests.experiments.test_config import compose_train


@pytest.mark.slow
def test_a_raising_env_and_a_nan_update_are_survived_and_logged(tmp_path: Path) -> None:
    row = training_run_survives(tmp_path)
    lines = (tmp_path / "faults.log").read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("faults/env_error\titeration 1: env hidden_number (seed ")
    assert "RuntimeError: injected simulator crash" in lines[0] and "marked failed" in lines[0]
    assert (
        lines[1]
        == "faults/nonfinite\titeration 2: 2 optimizer steps had a non-finite loss or gradient and were skipped"
    )
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [0, 1, 2, 3]  # training went on to the end
    assert [r.get("losses/nonfinite_steps") for r in records[1:]] == [0.0, 2.0, 0.0]
    assert row.ok


@pytest.mark.slow
def test_nan_updates_in_a_row_stop_the_run_with_a_clear_message(tmp_path: Path) -> None:
    row = training_run_stops(tmp_path)
    assert row.ok and "2 updates in a row had a non-finite loss" in row.observed
    assert (tmp_path / "faults.log").read_text().count("\n") == 1  # one survived, the next one stopped it


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.on_env_error=ignore", "trainer.on_env_error must be 'skip' or 'raise'"),
        ("trainer.max_nonfinite_updates=-1", "trainer.max_nonfinite_updates must be an integer >= 0"),
    ],
)
def test_bad_fault_options_fail_naming_the_key(override: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate(compose_train([override]))
