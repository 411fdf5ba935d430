"""A finished run's record: the few small files the reports read, kept beside the figures they back.

A run folder holds checkpoints, trajectories and TensorBoard logs (megabytes), but ``load_run``
reads only its overrides, its saved config, ``summary.json``, its ``done`` marker and, from
``metrics.jsonl``, the evaluations and the ``SERIES``. ``archive_run`` copies just those (the metric
records cut down to the keys the reports use), so a sweep's finished runs can be committed and its
tables rebuilt from them later (``python -m experiments.report DIR``) without the runs themselves.

A record names what was run, not where: the paths of the machine that ran the sweep
(``LOCAL_PATH_KEYS``: the warm-start cache folder, and the run folder a stopped run was resumed from;
neither changes a number) are left out of its overrides and reset to their default (none) in its
config.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from envs.strict_json import strict_dumps
from experiments.reporting.runs import SERIES, find_run_dirs, read_records, run_status, split_override

KEPT_FILES = ("summary.json", "done")
LOCAL_PATH_KEYS = ("trainer.warm_start.cache_dir", "resume")
STEP_KEYS = ("iteration", "charts/real_env_steps", "charts/elapsed_s")


def is_reported(key: str) -> bool:
    """Whether a metric key is one the reports read: a held-out evaluation, or a series they draw."""
    return key.startswith("eval/") or key in SERIES


def kept_records(records: list[dict]) -> list[dict]:
    """The metric records that log something the reports read, each cut down to those keys and its
    step keys; the last record is kept too, since its step count stands in for a missing summary."""
    kept = []
    for index, record in enumerate(records):
        reported = {key: value for key, value in record.items() if is_reported(key) and value is not None}
        if reported or index == len(records) - 1:
            kept.append({**{key: record[key] for key in STEP_KEYS if key in record}, **reported})
    return kept


def without_local_paths(overrides: list[str]) -> list[str]:
    """The overrides less those of ``LOCAL_PATH_KEYS``."""
    return [item for item in overrides if split_override(str(item))[0] not in LOCAL_PATH_KEYS]


def config_without_local_paths(config: dict) -> dict:
    """The saved config with each of ``LOCAL_PATH_KEYS`` that it holds set to None (its default)."""
    for dotted in LOCAL_PATH_KEYS:
        *parents, leaf = dotted.split(".")
        node = config
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = None
    return config


def write_yaml(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def archive_run(run_dir: Path, dest: Path) -> Path:
    """Write ``run_dir``'s record into ``dest`` (replacing what was there) and return ``dest``; a
    record archived onto itself is left as it is."""
    if dest.resolve() == run_dir.resolve():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in KEPT_FILES:
        if (run_dir / name).is_file():
            shutil.copyfile(run_dir / name, dest / name)
    overrides, config = run_dir / ".hydra" / "overrides.yaml", run_dir / "config.yaml"
    if overrides.is_file():
        write_yaml(dest / ".hydra" / "overrides.yaml", without_local_paths(yaml.safe_load(overrides.read_text()) or []))
    if config.is_file():
        write_yaml(dest / "config.yaml", config_without_local_paths(yaml.safe_load(config.read_text()) or {}))
    records = kept_records(read_records(run_dir / "metrics.jsonl"))
    (dest / "metrics.jsonl").write_text("".join(strict_dumps(record) + "\n" for record in records), encoding="utf-8")
    return dest


def archive_finished(root: Path, dest: Path) -> list[Path]:
    """The record of every finished run at or below ``root``, at the same relative path below
    ``dest``; runs still going or failed are left out. Returns the records written."""
    written = []
    for run_dir in find_run_dirs(root):
        if run_status(run_dir) != "done":
            continue
        written.append(archive_run(run_dir, dest / run_dir.relative_to(root)))
    return written
