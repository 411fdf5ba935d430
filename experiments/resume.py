"""Resuming a run from its newest checkpoint: the config check, RNG states, and rewinding the run folder.

``python -m experiments.train resume=RUN_DIR`` continues the run in ``RUN_DIR``. With nothing else on
the command line (or only ``NEUTRAL_KEYS``) the saved config is used; a command line that composes
a different config is refused, naming every key that differs (repeating the original command with
``resume=`` added is accepted). The loop then starts after the checkpoint's iteration, with every RNG where it was, so
the run ends exactly as an uninterrupted one would (bit for bit on CPU).

What the killed process did after its last checkpoint is undone first: lines of ``metrics.jsonl``
past the checkpoint are dropped, and trajectories it appended to the store are rolled back, so
re-collecting them neither duplicates nor loses one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from envs.store import StoreError, TrajectoryStore
from envs.trajectory import Trajectory
from experiments.budget_extension import (
    BUDGET_KEYS,
    budget_refusal,
    extended_keys,
    most_iteration_steps,
    usable_for_extension,
)
from experiments.checkpoint import (
    Checkpoint,
    CheckpointError,
    LoopState,
    checkpoint_iteration,
    list_checkpoints,
    load_checkpoint,
    load_latest,
)
from experiments.config_renames import upgrade_record
from experiments.neutral_keys import NEUTRAL_KEYS

CHECKPOINTS = "checkpoints"
STORE = "trajectories"  # the run's trajectory store, as experiments/train.py names it
NOT_COMPARED = ("resume",)  # keys that may differ between the saved config and a resume's


def config_record(run: Any) -> dict[str, Any]:
    """The run's config as plain JSON values (a ``Resolved`` or any dataclass), without ``resume``."""
    record = json.loads(json.dumps(dataclasses.asdict(run)))
    for key in NOT_COMPARED:
        record.pop(key, None)
    return record


def config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``differing_keys`` less the ``NEUTRAL_KEYS`` and ``BUDGET_KEYS`` ones (``budget_refusal`` rules on those)."""
    return [key for key in differing_keys(saved, current) if key not in (*NEUTRAL_KEYS, *BUDGET_KEYS)]


def differing_keys(saved: Any, current: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested dicts (a key on one side only counts)."""
    if not (isinstance(saved, dict) and isinstance(current, dict)):
        return [] if saved == current else [prefix.rstrip(".")]
    keys: list[str] = []
    for key in sorted(set(saved) | set(current), key=str):
        if key in saved and key in current:
            keys += differing_keys(saved[key], current[key], f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def describe_differences(saved: dict[str, Any], current: dict[str, Any], keys: list[str]) -> str:
    def value(record: dict[str, Any], key: str) -> str:
        for part in key.split("."):
            if not isinstance(record, dict) or part not in record:
                return "(absent)"
            record = record[part]
        return json.dumps(record)

    return "; ".join(f"{key}: saved {value(saved, key)}, now {value(current, key)}" for key in keys)


def resume_config(cfg: DictConfig, task_overrides: list[str], validate) -> DictConfig:
    """The config to resume ``cfg.resume`` with, or SystemExit with one line saying why not.

    ``task_overrides`` are the command line's overrides: when ``resume=``, ``NEUTRAL_KEYS`` and
    ``BUDGET_KEYS`` are the only keys, the saved config is used with those keys set; otherwise the
    composed ``cfg`` must equal the saved one (``NEUTRAL_KEYS`` and ``BUDGET_KEYS`` aside). A larger
    budget extends the run (``experiments/budget_extension.py``): the folder is rewound to the newest
    checkpoint the old budget did not shape, and the ``.hydra/`` record takes the new budget.
    """
    run_dir = Path(cfg.resume)
    if not run_dir.is_dir():
        raise SystemExit(f"resume={run_dir}: no such run folder")
    try:
        checkpoint = load_latest(run_dir / CHECKPOINTS)
    except CheckpointError as err:
        raise SystemExit(f"resume={run_dir}: {err}") from None
    saved = upgrade_record(checkpoint.config)  # a checkpoint from before the nested sections
    keys_given = [o.lstrip("+~").split("=", 1)[0] for o in task_overrides]
    if any(key not in (*NOT_COMPARED, *NEUTRAL_KEYS, *BUDGET_KEYS) for key in keys_given):
        current = config_record(validate(cfg))
        keys = config_differences(saved, current)
        if keys:
            raise SystemExit(
                f"resume={run_dir}: the command line's config differs from the saved one in "
                f"{len(keys)} key(s): {describe_differences(saved, current, keys)}"
            )
        resumed = cfg
    else:
        resumed = saved_config(cfg, saved, [key for key in keys_given if key in (*NEUTRAL_KEYS, *BUDGET_KEYS)])
    run = validate(resumed)
    extended = extended_keys(saved, config_record(run))
    if (run_dir / "done").exists() and not extended:
        raise SystemExit(f"resume={run_dir}: that run has finished (it has a done marker); nothing to resume "
                         f"(a larger {' / '.join(BUDGET_KEYS)} extends it)")
    try:
        start = extension_start(run_dir, saved, run) if extended else checkpoint
        check_rewindable(run_dir, start.loop, run_dir / STORE)
    except CheckpointError as err:
        raise SystemExit(f"resume={run_dir}: {err}") from None
    if extended:
        start_extension(run_dir, start.loop.iteration, {key: OmegaConf.select(resumed, key) for key in extended})
    return resumed


def saved_config(cfg: DictConfig, saved: dict[str, Any], keys_set: list[str]) -> DictConfig:
    """The saved config as a ``DictConfig`` of ``cfg``'s schema, with ``keys_set`` taken from ``cfg``."""
    resumed = cfg.copy()
    for key, value in saved.items():
        node = cfg.get(key)
        if (
            OmegaConf.is_config(node)
            and OmegaConf.get_type(node) is not None
            and dataclasses.is_dataclass(OmegaConf.get_type(node))
        ):  # a config group: rebuild its schema with the saved values (kwargs dicts replaced whole)
            resumed[key] = OmegaConf.merge(OmegaConf.structured(OmegaConf.get_type(node)), value)
        else:
            resumed[key] = value
    for key in keys_set:
        OmegaConf.update(resumed, key, OmegaConf.select(cfg, key))
    return resumed


def extension_start(run_dir: Path, saved: dict[str, Any], run: Any) -> Checkpoint:
    """The checkpoint a budget extension goes on from: the newest the saved budget did not shape.
    CheckpointError (one line) when the new budget is refused or no such checkpoint is left."""
    refusal = budget_refusal(saved, config_record(run))
    if refusal is not None:
        raise CheckpointError(refusal)
    most_steps = most_iteration_steps(run)  # the keys it reads are the saved ones (only budgets differ)
    for folder in reversed(list_checkpoints(run_dir / CHECKPOINTS)):
        checkpoint = load_checkpoint(folder)
        trainer = upgrade_record(checkpoint.config)["trainer"]  # the budget that wrote it (an older extension's)
        if usable_for_extension(checkpoint.loop, trainer["iterations"], trainer["max_env_steps"], most_steps):
            return checkpoint
    raise CheckpointError(
        f"{' / '.join(extended_keys(saved, config_record(run)))} can not be extended: every checkpoint left "
        "was written after the old budget shaped the run (its last or budget-reaching iterations)"
    )


def start_extension(run_dir: Path, iteration: int, budget: dict[str, Any]) -> None:
    """Make ``iteration``'s checkpoint the newest and the run unfinished, and record the new budget in
    ``.hydra/`` (the original overrides stay in ``overrides.original.yaml``); ``config.yaml`` is
    rewritten by the run itself."""
    for folder in list_checkpoints(run_dir / CHECKPOINTS):
        if checkpoint_iteration(folder) > iteration:  # states of the old budget's run, never resumed
            shutil.rmtree(folder)
    for name in ("done", "summary.json"):
        (run_dir / name).unlink(missing_ok=True)
    hydra = run_dir / ".hydra"
    overrides = hydra / "overrides.yaml"
    if overrides.is_file():
        original = hydra / "overrides.original.yaml"
        if not original.exists():
            shutil.copyfile(overrides, original)
        items = [item for item in OmegaConf.load(overrides) if item.lstrip("+~").split("=", 1)[0] not in budget]
        shown = {key: "null" if value is None else value for key, value in budget.items()}
        OmegaConf.save(OmegaConf.create([*items, *(f"{key}={value}" for key, value in shown.items())]), overrides)
    if (hydra / "config.yaml").is_file():
        composed = OmegaConf.load(hydra / "config.yaml")
        for key, value in budget.items():
            OmegaConf.update(composed, key, value)
        OmegaConf.save(composed, hydra / "config.yaml")


def check_config(saved: dict[str, Any], run: Any, run_dir: Path) -> None:
    """Refuse (CheckpointError) a run whose config is not the checkpoint's, bar an extended budget."""
    current = config_record(run)
    refusal = budget_refusal(saved, current)
    if refusal is not None:
        raise CheckpointError(f"the checkpoint in {run_dir} can not go on: {refusal}")
    keys = config_differences(saved, current)
    if keys:
        raise CheckpointError(
            f"the checkpoint in {run_dir} was written by a run with another config: "
            f"{describe_differences(saved, current, keys)}"
        )


def resume_from(run: Any, run_dir: Path, store_path: Path) -> Checkpoint:
    """The newest checkpoint of ``run_dir``, checked against ``run``'s config, with the folder rewound to it."""
    checkpoint = load_latest(run_dir / CHECKPOINTS)
    check_config(upgrade_record(checkpoint.config), run, run_dir)
    rewind_run_folder(run_dir, checkpoint.loop, store_path)
    return checkpoint


def trajectories_by_id(store: TrajectoryStore, ids: list[int]) -> list[Trajectory]:
    """The stored trajectories with these ids, in the order given (their token samples are not stored)."""
    by_id = {t.trajectory_id: t for t in store.load()}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise CheckpointError(
            f"the store {store.path} lacks trajectories {missing[:5]} the checkpoint branches from"
        )
    return [by_id[i] for i in ids]


def count_lines(path: Path) -> int:
    """Complete lines of a text file (0 when it does not exist)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


# -- RNG states ---------------------------------------------------------------------------------------


def capture_rng(generators: dict[str, torch.Generator], randoms: dict[str, random.Random]) -> dict[str, Any]:
    """Every RNG state the loop draws from: the global Python, NumPy and torch (CUDA too) ones, and
    the loop's own ``generators`` and ``randoms`` by name."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [
            kind,
            torch.from_numpy(keys.astype(np.int64)),
            int(position),
            int(has_gauss),
            float(cached),
        ],
        "torch": torch.get_rng_state(),
        "generators": {name: g.get_state() for name, g in generators.items()},
        "randoms": {name: r.getstate() for name, r in randoms.items()},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(
    state: dict[str, Any], generators: dict[str, torch.Generator], randoms: dict[str, random.Random]
) -> None:
    random.setstate(state["python"])
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if set(state["generators"]) != set(generators) or set(state["randoms"]) != set(randoms):
        raise CheckpointError(
            f"the checkpoint holds RNGs {sorted(state['generators'])} + {sorted(state['randoms'])}, "
            f"this run has {sorted(generators)} + {sorted(randoms)}"
        )
    for name, generator in generators.items():
        generator.set_state(state["generators"][name])
    for name, rng in randoms.items():
        rng.setstate(state["randoms"][name])


# -- the run folder -----------------------------------------------------------------------------------


def check_rewindable(run_dir: Path, loop: LoopState, store_path: Path) -> None:
    """Refuse (CheckpointError), before anything is changed, a run folder that holds less than the
    checkpoint recorded: fewer ``metrics.jsonl`` lines or stored trajectories (it lost data)."""
    metrics = run_dir / "metrics.jsonl"
    lines = count_lines(metrics)
    if lines < loop.metrics_lines:
        raise CheckpointError(
            f"{metrics} holds {lines} lines, fewer than the {loop.metrics_lines} the checkpoint "
            "recorded: it lost data, so this run cannot be resumed exactly"
        )
    staging = store_path.with_name(store_path.name + ".rollback")
    if not store_path.exists() and staging.exists():  # a rollback killed between its renames: its new store
        store_path = staging
    try:
        held = len(TrajectoryStore(store_path))
    except StoreError as err:
        raise CheckpointError(str(err)) from err
    if held < loop.store_trajectories:
        raise CheckpointError(
            f"the store {store_path} holds {held} trajectories, fewer than the "
            f"{loop.store_trajectories} the checkpoint recorded: it lost data, so this run "
            "cannot be resumed exactly"
        )


def rewind_run_folder(run_dir: Path, loop: LoopState, store_path: Path) -> None:
    """Undo what was written after the checkpoint: later ``metrics.jsonl`` lines and store appends."""
    check_rewindable(run_dir, loop, store_path)
    metrics = run_dir / "metrics.jsonl"
    if metrics.exists():
        lines = metrics.read_bytes().split(b"\n")
        _replace_file(metrics, b"".join(line + b"\n" for line in lines[: loop.metrics_lines]))
    rollback_store(store_path, loop.store_trajectories)
    (run_dir / "failed").unlink(missing_ok=True)  # a marker of the crashed attempt, not of this one


def rollback_store(path: Path, keep: int) -> None:
    """Keep only the first ``keep`` trajectories of the store at ``path``, through its public API.

    The kept ones are written as a new store beside it (``<name>.rollback``), which then replaces
    the old one by two renames. Killed in between, the next call finds the store folder gone and
    the complete ``.rollback`` one, and finishes the swap.
    """
    staging, discard = path.with_name(path.name + ".rollback"), path.with_name(path.name + ".discard")
    if not path.exists() and staging.exists():  # a rollback killed between its renames
        os.rename(staging, path)
    shutil.rmtree(discard, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    store = TrajectoryStore(path)
    held = len(store)
    if held == keep:
        return
    if held < keep:
        raise CheckpointError(
            f"the store {path} holds {held} trajectories, fewer than the {keep} the checkpoint "
            "recorded: it lost data, so this run cannot be resumed exactly"
        )
    kept = store.load()[:keep]
    if kept:
        TrajectoryStore(staging).append(kept)
    else:
        staging.mkdir()
    os.rename(path, discard)
    os.rename(staging, path)
    shutil.rmtree(discard)


def _replace_file(path: Path, content: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
