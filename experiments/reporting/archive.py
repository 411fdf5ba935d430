"""A finished run's record: the few small files the reports read, kept beside the figures they back.

A run folder holds checkpoints, trajectories and TensorBoard logs (megabytes), but ``load_run``
reads only its overrides, its saved config, ``summary.json``, its ``done`` marker and, from
``metrics.jsonl``, the evaluations and the ``SERIES``. ``archive_run`` copies just those (the metric
records cut down to the keys the reports use), so a sweep's finished runs can be committed and its
tables rebuilt from them later (``python -m experiments.report DIR``) without the runs themselves.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from experiments.reporting.runs import SERIES, find_run_dirs, load_run

KEPT_FILES = ("config.yaml", ".hydra/overrides.yaml", "summary.json", "done")
STEP_KEYS = ("iteration", "charts/real_env_steps", "charts/elapsed_s")


def is_reported(key: str) -> bool:
    """Whether a metric key is one the reports read: a held-out evaluation, or a series they draw."""
    return key.startswith("eval/") or key in SERIES


def kept_records(lines: list[str]) -> list[dict]:
    """The metric records that log something the reports read, each cut down to those keys and its
    step keys; the last record is kept too, since its step count stands in for a missing summary."""
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line a killed run left half-written
        if isinstance(record, dict):
            records.append(record)
    kept = []
    for index, record in enumerate(records):
        reported = {key: value for key, value in record.items() if is_reported(key) and value is not None}
        if reported or index == len(records) - 1:
            kept.append({**{key: record[key] for key in STEP_KEYS if key in record}, **reported})
    return kept


def archive_run(run_dir: Path, dest: Path) -> Path:
    """Write ``run_dir``'s record into ``dest`` (replacing what was there) and return ``dest``; a
    record archived onto itself is left as it is."""
    if dest.resolve() == run_dir.resolve():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    for name in KEPT_FILES:
        if (run_dir / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / name, dest / name)
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in kept_records(lines)),
                                        encoding="utf-8")
    return dest


def archive_finished(root: Path, dest: Path) -> list[Path]:
    """The record of every finished run at or below ``root``, at the same relative path below
    ``dest``; runs still going or failed are left out. Returns the records written."""
    written = []
    for run_dir in find_run_dirs(root):
        if load_run(run_dir).status != "done":
            continue
        written.append(archive_run(run_dir, dest / run_dir.relative_to(root)))
    return written
