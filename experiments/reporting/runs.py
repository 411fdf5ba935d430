"""Run folders on disk, and seeds grouped into configurations.

A run folder is any folder holding ``metrics.jsonl`` (``experiments/train.py`` writes one per Hydra
job). What a ``Run`` reads from it, and where each field falls back to:

- ``overrides``: the command-line overrides from ``.hydra/overrides.yaml``; without that file, from
  the folder name: ``algo=grpo,seed=1`` (Hydra's sweep subfolders) gives both keys, any other name
  gives ``{"run": name}`` with a leading ``HH-MM-SS_`` and a trailing ``_s<seed>`` taken off, so
  ``12-00-00_hidden_number_grpo_s3`` and ``hidden_number_grpo_s4`` are seeds of ``hidden_number_grpo``.
- ``seed``: the ``seed`` override, else ``seed`` in the saved config, else in ``summary.json``, else
  the folder name's ``_s<seed>``.
- ``curve``: ``(charts/real_env_steps, eval/success_rate)`` of every evaluation, sorted by steps; two
  evaluations at the same step count (the final one after a budget stop) keep the later record.
- ``final_success``, ``wall_s``, ``real_env_steps``: ``summary.json``, else the last evaluation, the
  last ``charts/elapsed_s`` and the last record's step count.
- ``cpu_s``: ``cpu_seconds`` of ``summary.json``: the process CPU seconds over the span of ``wall_s``
  (None for a run from before it was recorded).
- ``eval_every_steps``: ``trainer.eval_every_steps`` of the saved config (None: evaluated by iterations).
- ``ledger``: ``summary.json``'s ledger of env steps (empty for a run without one).
- ``status``: ``done`` or ``failed`` from the markers (the newer one if both are there), else
  ``running`` (a job still going, or one killed before it could leave a marker).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from experiments.neutral_keys import NEUTRAL_KEYS

SEED_KEY = "seed"
# Series drawn on the extra panels when any run logged them.
SERIES = ("wm/one_step_exact_match", "imagination/return_gap", "imagination/start_return_gap")
# Overrides that name a configuration best when there is only one configuration to label.
HEADLINE_KEYS = ("experiment", "env", "algo", "critic", "imagination", "run")
LABEL_MAX = 48  # characters of differing overrides a label spells out; longer: ``config N``
UNKNOWN_ENV = "env?"  # a run whose env neither its config, summary nor overrides name
_TIME_PREFIX = re.compile(r"^\d{2}-\d{2}-\d{2}_")
_SEED_SUFFIX = re.compile(r"_s(\d+)$")

Curve = list[tuple[int, float]]


@dataclass
class Run:
    path: Path
    overrides: dict[str, str]
    seed: int | None
    env: str | None
    status: str  # "done" | "failed" | "running"
    curve: Curve  # (real env steps, eval success rate), sorted by steps
    final_success: float | None
    wall_s: float | None
    real_env_steps: int | None
    series: dict[str, Curve] = field(default_factory=dict)  # SERIES name -> (real env steps, value)
    eval_every_steps: int | None = None  # the run's real-step evaluation marks (trainer.eval_every_steps)
    ledger: dict[str, int] = field(default_factory=dict)  # summary.json's ledger (experiments/ledger.py)
    cpu_s: float | None = None  # summary.json's cpu_seconds (None: an older run, or a resume that lost it)

    def config_key(self, ignore: Iterable[str] = (SEED_KEY,)) -> tuple[tuple[str, str], ...]:
        """The overrides that define this run's configuration: all but ``ignore`` (the seed) and the
        ``NEUTRAL_KEYS``. An ``ignore`` entry ``key=value`` leaves the key out only at that value."""
        skip = {*ignore, *NEUTRAL_KEYS}
        return tuple(sorted((k, v) for k, v in self.overrides.items() if k not in skip and f"{k}={v}" not in skip))


def find_run_dirs(root: str | Path) -> list[Path]:
    """Every folder at or below ``root`` holding ``metrics.jsonl``, sorted by path."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(path.parent for path in root.rglob("metrics.jsonl") if path.is_file())


def find_failed_before_metrics(root: str | Path) -> list[Path]:
    """Folders at or below ``root`` with a ``failed`` marker but no ``metrics.jsonl``: runs that failed
    at start (a bad option, a missing package), which a report still lists, sorted by path."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(path.parent for path in root.rglob("failed")
                  if path.is_file() and not (path.parent / "metrics.jsonl").exists())


def load_runs(root: str | Path) -> list[Run]:
    """Every run at or below ``root`` (``root`` itself may be one run folder), those that failed before
    writing metrics included; empty if none."""
    paths = sorted({*find_run_dirs(root), *find_failed_before_metrics(root)})
    return [load_run(path) for path in paths]


def load_run(path: str | Path) -> Run:
    path = Path(path)
    records = read_records(path / "metrics.jsonl") if (path / "metrics.jsonl").is_file() else []
    summary = _read_json(path / "summary.json")
    config = _read_config(path)
    overrides, name_seed = _overrides(path)

    curve = _series(records, "eval/success_rate")
    final = summary.get("final_success")
    if final is None and curve:
        final = curve[-1][1]
    wall = summary.get("wall_s")
    if wall is None:
        elapsed = [r["charts/elapsed_s"] for r in records if r.get("charts/elapsed_s") is not None]
        wall = elapsed[-1] if elapsed else None
    steps = summary.get("real_env_steps")
    if steps is None and records:
        steps = records[-1].get("charts/real_env_steps")

    seed = _first_int(overrides.get(SEED_KEY), config.get(SEED_KEY), summary.get(SEED_KEY), name_seed)
    env_config = config.get("env")
    env = (env_config.get("name") if isinstance(env_config, dict) else None) or summary.get("env") \
        or overrides.get("env") or overrides.get("experiment")
    series = {name: points for name in SERIES if (points := _series(records, name))}
    return Run(path=path, overrides=overrides, seed=seed, env=env, status=run_status(path), curve=curve,
               final_success=None if final is None else float(final), wall_s=None if wall is None else float(wall),
               real_env_steps=None if steps is None else int(steps), series=series,
               eval_every_steps=_first_int((config.get("trainer") or {}).get("eval_every_steps")),
               ledger=summary.get("ledger") if isinstance(summary.get("ledger"), dict) else {},
               cpu_s=_finite_float(summary.get("cpu_seconds")))


def configurations(runs: Sequence[Run], ignore: Iterable[str] = (SEED_KEY,),
                   names: Callable[[Run], str | None] | None = None) -> dict[str, list[Run]]:
    """Runs grouped by env and configuration: runs of one env whose overrides differ only in the
    ``ignore`` keys (the seed) are seeds of one configuration. Keys are the labels of
    ``configuration_labels`` (the env first), or the ``names`` of a configuration's first run where
    that gives one (a benchmark's method name; the env put first only when runs of several envs
    share a name), sorted; each configuration's runs are sorted by seed, then path. Configurations
    that would share a label (one benchmark name over runs whose overrides differ) are numbered
    ``name (#1)``, ``name (#2)`` in the order of their first run, never merged or dropped."""
    ignore = tuple(ignore)
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault((run.env or "", run.config_key(ignore)), []).append(run)
    keys = list(groups)
    labels = configuration_labels([dict(key) for _, key in keys], [env or None for env, _ in keys])
    if names is not None:
        named = [names(groups[key][0]) for key in keys]
        shared = {name for name in named if name and len({env for (env, _), n in zip(keys, named, strict=True) if n == name}) > 1}
        labels = [(f"{key[0] or UNKNOWN_ENV}: {name}" if name in shared else name) if name else label
                  for key, label, name in zip(keys, labels, named, strict=True)]
    repeated = {label for label in labels if labels.count(label) > 1}  # one name, several configurations
    labels = [f"{label} (#{labels[:i].count(label) + 1})" if label in repeated else label
              for i, label in enumerate(labels)]  # each kept apart, none dropped
    by_label = {label: sorted(groups[key], key=lambda r: (r.seed is None, r.seed or 0, str(r.path)))
                for label, key in zip(labels, keys, strict=True)}
    return dict(sorted(by_label.items()))


def configuration_labels(configs: Sequence[dict[str, str]], envs: Sequence[str | None] | None = None) -> list[str]:
    """A short readable label per configuration: ``key=value`` pairs, sorted by key, of only the
    overrides that differ between configurations (a key that some configurations lack counts as
    differing; a configuration without it shows nothing for it, and ``defaults`` if nothing is left).
    A lone configuration is labelled by its headline overrides (experiment, env, algo, critic,
    imagination), or ``all runs`` if it has none. ``run=NAME`` (from a folder name) shows as ``NAME``.

    With ``envs`` (each configuration's env), the env leads every label (where it is known) and the pairs are those that
    differ between the configurations of that env (``env=`` left out); pairs beyond ``LABEL_MAX``
    characters are left to the report's key table, the label saying how many and its number
    (``hidden_number: algo=grpo,critic=latent +3 (#2)``).
    """
    if envs is None:
        return _differing_labels(configs)
    labels = [""] * len(configs)
    for env in dict.fromkeys(envs):
        members = [i for i, e in enumerate(envs) if e == env]
        parts = _differing_labels([{k: v for k, v in configs[i].items() if k != "env"} for i in members],
                                  lone_default="", shorten=True)
        for i, part in zip(members, parts, strict=True):
            part = part.replace("#?", f"#{i + 1}")
            labels[i] = part or "defaults" if env is None else f"{env}: {part}" if part else env
    return labels


def _differing_labels(configs: Sequence[dict[str, str]], lone_default: str = "all runs",
                      shorten: bool = False) -> list[str]:
    if not configs:
        return []
    if len(configs) == 1:
        keys = [k for k in HEADLINE_KEYS if k in configs[0]]
        return [_label(configs[0], sorted(keys), shorten) or lone_default]
    all_keys = sorted({k for config in configs for k in config})
    differing = [k for k in all_keys if len({config.get(k) for config in configs}) > 1]
    return [_label(config, differing, shorten) or "defaults" for config in configs]


def differing_overrides(configs: Sequence[dict[str, str]]) -> tuple[list[str], dict[str, str]]:
    """The keys whose values differ between ``configs`` (or that some lack), and the pairs every
    configuration shares: what a label shows, and what the report's key table states once."""
    all_keys = sorted({k for config in configs for k in config})
    differing = [k for k in all_keys if len({config.get(k) for config in configs}) > 1]
    shared = {k: configs[0][k] for k in all_keys if k not in differing} if configs else {}
    return differing, shared


def _label(config: dict[str, str], keys: Sequence[str], shorten: bool = False) -> str:
    """The pairs of ``keys`` (headline keys first when ``shorten``), cut after ``LABEL_MAX``
    characters with ``+N (#?)`` when ``shorten`` (the caller numbers it)."""
    if shorten:
        keys = sorted(keys, key=lambda k: (k not in HEADLINE_KEYS, k))
    pairs = [config[k] if k == "run" else f"{k}={config[k]}" for k in keys if k in config]
    if not shorten or len(",".join(pairs)) <= LABEL_MAX:
        return ",".join(pairs)
    shown = 1
    while len(",".join(pairs[:shown + 1])) <= LABEL_MAX:
        shown += 1
    return f"{','.join(pairs[:shown])} +{len(pairs) - shown} (#?)"


def _overrides(path: Path) -> tuple[dict[str, str], int | None]:
    """The run's overrides, and a seed read from its folder name (None if the name has none)."""
    listed = path / ".hydra" / "overrides.yaml"
    name = path.name
    match = _SEED_SUFFIX.search(name)
    name_seed = int(match.group(1)) if match else None
    if listed.is_file():
        items = yaml.safe_load(listed.read_text(encoding="utf-8")) or []
        return dict(split_override(str(item)) for item in items), name_seed
    if "=" in name:
        overrides = dict(split_override(item) for item in name.split(",") if item)
        return overrides, _first_int(overrides.get(SEED_KEY), name_seed)
    stem = _SEED_SUFFIX.sub("", _TIME_PREFIX.sub("", name))
    return {"run": stem}, name_seed


def split_override(item: str) -> tuple[str, str]:
    """``+key=value`` / ``++key=value`` / ``key=value`` -> (key, value); ``~key`` -> (``~key``, "")."""
    key, _, value = item.partition("=")
    return key.lstrip("+"), value


def read_records(path: Path) -> list[dict]:
    """The records of ``metrics.jsonl``; a line that does not parse (a run still writing it) is skipped."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def _series(records: list[dict], name: str) -> Curve:
    """(real env steps, value) of every record where ``name`` is logged and finite; at a repeated
    step count the later record wins; sorted by steps."""
    points: dict[int, float] = {}
    for record in records:
        value, steps = record.get(name), record.get("charts/real_env_steps")
        if isinstance(value, (int, float)) and math.isfinite(value) and steps is not None:
            points[int(steps)] = float(value)
    return sorted(points.items())


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_config(path: Path) -> dict:
    for candidate in (path / "config.yaml", path / ".hydra" / "config.yaml"):
        try:
            data = yaml.safe_load(candidate.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict):
            return data
    return {}


def run_status(path: Path) -> str:
    """``done`` or ``failed`` from the run folder's markers (the newer one if both), else ``running``."""
    markers = {name: path / name for name in ("done", "failed") if (path / name).is_file()}
    if not markers:
        return "running"
    return max(markers, key=lambda name: (markers[name].stat().st_mtime, name == "done"))


def _finite_float(value: object) -> float | None:
    """A number as a float; None for anything else (absent, null, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _first_int(*values: object) -> int | None:
    for value in values:
        if value is None or value == "":
            continue
        try:
            return int(value)
        except (TypeError, ValueError):
            continue
    return None
