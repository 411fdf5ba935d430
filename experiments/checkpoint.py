"""Training checkpoints on disk: one folder per checkpoint, written atomically, no pickle.

Layout of ``RUN/checkpoints/``::

    iteration_00010/
      state.json            format, iteration, the run's config, the loop's counters, the layout of
                            ``state`` (nested dicts and lists, with tensors replaced by their names),
                            and the sha256 of every other file
      state.safetensors     every tensor of ``state``: weights, optimiser moments, RNG states
      config.json ...       extra files the caller adds (the policy as a Hugging Face folder)
    iteration_00020/

Why nothing is ever half-written: a checkpoint is written into ``.tmp-<uuid>/`` beside the others,
every file is fsynced, and one ``os.rename`` publishes it under its final name (atomic on POSIX);
then the folder is fsynced. A process killed before the rename leaves only a ``.tmp-*`` folder,
which is never read and which the next save deletes. Only the newest ``keep`` checkpoints stay.

Why nothing is unpickled: tensors go through safetensors, everything else through JSON. A state
dict's structure (optimiser ``state`` keyed by int, ``betas`` tuples, ``None``) is kept by encoding
containers as tagged JSON objects, see ``flatten_state``. Reading checks the format, the layout
and the checksums, and fails with one ``CheckpointError`` naming the folder and what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from envs.durable import fsync_dir, fsync_tree
from policy.model_source import file_sha256

FORMAT = "reverie-checkpoint"
VERSION = 1
STATE_JSON = "state.json"
STATE_TENSORS = "state.safetensors"
_NAME = re.compile(r"iteration_(\d{5,})")
# Testing hook: the process kills itself (SIGKILL) after writing this iteration's checkpoint files and
# before publishing them, as a crash in the middle of a checkpoint write would.
KILL_BEFORE_PUBLISH_ENV = "REVERIE_CHECKPOINT_KILL_BEFORE_PUBLISH"


class CheckpointError(RuntimeError):
    """A checkpoint folder is missing, damaged or does not belong to this run; the message says which."""


@dataclass
class LoopState:
    """The training loop's counters and bookkeeping after ``iteration``: all plain JSON."""

    iteration: int
    """The last finished iteration (0: none yet)."""
    real_env_steps: int
    warm_start_env_steps: int
    next_ids: dict[str, int]
    """The next group and trajectory ids, unique across the run."""
    history: list[dict[str, Any]]
    """One record per logged iteration (what ``metrics.jsonl`` holds, NaNs kept)."""
    metrics_lines: int
    """Lines of ``metrics.jsonl`` written so far; later lines belong to iterations to be redone."""
    store_trajectories: int
    """Trajectories committed to the run's store so far; later ones are rolled back on resume."""
    elapsed_s: float
    """Seconds of RL so far (a time budget keeps counting across a resume)."""
    stopped: bool = False
    """The run stopped early (time or step budget) at ``iteration``: resuming only finishes it."""
    imagination: dict[str, Any] = field(default_factory=dict)
    """The model-based loop's bookkeeping: gate, credit, warm-up, totals, branch-point trajectory ids."""
    ledger: dict[str, int] = field(default_factory=dict)
    """The env-step ledger's counters (``experiments/ledger.py``); empty in older checkpoints."""
    warm_start_check_steps: int | None = None
    """Env steps of the warm start's success checks; None: unknown (older checkpoints, or a warm start
    loaded from a cache folder that predates the count)."""
    cpu_s: float | None = None
    """Process CPU seconds of RL so far, over the span of ``elapsed_s``; None in older checkpoints."""


@dataclass
class Checkpoint:
    config: dict[str, Any]
    """The run's resolved config; a resume must match it."""
    loop: LoopState
    state: dict[str, Any]
    """Module and optimiser state dicts and RNG states: nested dicts / lists / tuples of tensors and scalars."""


def checkpoint_name(iteration: int) -> str:
    return f"iteration_{iteration:05d}"


def checkpoint_iteration(folder: Path) -> int:
    """The iteration a published checkpoint folder (``checkpoint_name``) holds."""
    match = _NAME.fullmatch(folder.name)
    if match is None:
        raise ValueError(f"{folder} is not a checkpoint folder (iteration_NNNNN)")
    return int(match.group(1))


def list_checkpoints(root: str | os.PathLike[str]) -> list[Path]:
    """Published checkpoint folders under ``root``, oldest first (temp folders are not listed)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), root / name) for name in os.listdir(root) if (m := _NAME.fullmatch(name))]
    return [path for _, path in sorted(found)]


def save_checkpoint(
    root: str | os.PathLike[str],
    checkpoint: Checkpoint,
    *,
    keep: int = 2,
    write_extra: Callable[[Path], None] | None = None,
    pinned: Path | None = None,
) -> Path:
    """Write ``checkpoint`` as ``root/iteration_NNNNN`` atomically, keep the newest ``keep``; return its folder.

    ``write_extra(folder)`` may add files (e.g. a Hugging Face policy folder's) before it is published.
    ``pinned``: an older checkpoint folder kept as well (the one a budget extension goes on from).
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    _remove_temp_folders(root)
    tensors, layout = flatten_state(checkpoint.state)
    tmp = root / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    save_file(tensors, str(tmp / STATE_TENSORS))
    if write_extra is not None:
        write_extra(tmp)
    hashes = {
        path.relative_to(tmp).as_posix(): file_sha256(path) for path in sorted(tmp.rglob("*")) if path.is_file()
    }
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "iteration": checkpoint.loop.iteration,
        "config": checkpoint.config,
        "loop": asdict(checkpoint.loop),
        "layout": layout,
        "sha256": hashes,
    }
    meta["self_sha256"] = _text_sha256(json.dumps(meta, sort_keys=True))  # state.json checks itself too
    (tmp / STATE_JSON).write_text(json.dumps(meta), encoding="utf-8")
    fsync_tree(tmp)
    if os.environ.get(KILL_BEFORE_PUBLISH_ENV) == str(checkpoint.loop.iteration):
        os.kill(os.getpid(), 9)  # SIGKILL: no cleanup, exactly as a crash
    final = root / checkpoint_name(checkpoint.loop.iteration)
    if final.exists():  # a stale one of the same iteration (never the one a resume started from)
        shutil.rmtree(final)
    os.rename(tmp, final)  # the commit point
    fsync_dir(root)
    for old in list_checkpoints(root)[:-keep]:
        if old != pinned:
            shutil.rmtree(old)
    return final


def load_checkpoint(folder: str | os.PathLike[str]) -> Checkpoint:
    """Read and verify one checkpoint folder. Raises CheckpointError naming the folder and the fault."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / STATE_JSON).read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise ValueError(f"{STATE_JSON} is not a {FORMAT} version {VERSION} record")
        claimed = meta.pop("self_sha256", None)
        if claimed != _text_sha256(json.dumps(meta, sort_keys=True)):
            raise ValueError(f"{STATE_JSON} does not match its checksum (changed after it was written)")
        for name, digest in meta["sha256"].items():
            if file_sha256(folder / name) != digest:
                raise ValueError(
                    f"{name} does not match its checksum (truncated or changed after it was written)"
                )
        tensors = load_file(str(folder / STATE_TENSORS))
        state = unflatten_state(meta["layout"], tensors)
        loop = LoopState(**meta["loop"])
        if loop.iteration != meta["iteration"] or folder.name != checkpoint_name(loop.iteration):
            raise ValueError(f"it records iteration {meta['iteration']}, its name says otherwise")
        return Checkpoint(config=meta["config"], loop=loop, state=state)
    except Exception as err:  # noqa: BLE001 - json, safetensors and the checks raise many types; one message
        raise CheckpointError(
            f"checkpoint {folder} is damaged and cannot be resumed from: {_one_line(err)}"
        ) from err


def load_latest(root: str | os.PathLike[str]) -> Checkpoint:
    """The newest published checkpoint under ``root``. A damaged newest one is refused, not skipped:
    resuming from an older one silently would hide the damage (delete it to resume from the previous)."""
    found = list_checkpoints(root)
    if not found:
        raise CheckpointError(f"no checkpoint in {root} (set trainer.checkpoint_every to write them)")
    return load_checkpoint(found[-1])


# -- state dicts <-> safetensors + JSON ------------------------------------------------------------


def flatten_state(state: Any) -> tuple[dict[str, torch.Tensor], Any]:
    """``(tensors, layout)``: every tensor of a nested structure under a path name, and a JSON layout.

    The layout encodes dicts as ``{"dict": [[key, value], ...]}`` (keys stay ``int`` or ``str``),
    lists as ``{"list": [...]}``, tuples as ``{"tuple": [...]}``, tensors as ``{"tensor": name}``;
    ``None``, bools, ints, floats and strings stay as they are. Tensors are copied to contiguous CPU
    memory of their own (safetensors refuses tied weights that share storage).
    """
    tensors: dict[str, torch.Tensor] = {}

    def encode(value: Any, path: str) -> Any:
        if isinstance(value, torch.Tensor):
            tensors[path] = value.detach().cpu().contiguous().clone()
            return {"tensor": path}
        if isinstance(value, dict):
            for key in value:
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise TypeError(f"{path}: dict key {key!r} is neither str nor int")
            return {"dict": [[key, encode(item, f"{path}/{key}")] for key, item in value.items()]}
        if isinstance(value, (list, tuple)):
            items = [encode(item, f"{path}/{i}") for i, item in enumerate(value)]
            return {"tuple" if isinstance(value, tuple) else "list": items}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(f"{path}: cannot store a {type(value).__name__} in a checkpoint")

    return tensors, encode(state, "state")


def unflatten_state(layout: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The structure ``flatten_state`` took apart. Raises ValueError on a layout it did not write."""
    if layout is None or isinstance(layout, (bool, int, float, str)):
        return layout
    if isinstance(layout, dict) and len(layout) == 1:
        ((tag, body),) = layout.items()
        if tag == "tensor":
            if body not in tensors:
                raise ValueError(f"tensor {body!r} is missing from {STATE_TENSORS}")
            return tensors[body]
        if tag == "dict":
            return {key: unflatten_state(item, tensors) for key, item in body}
        if tag == "list":
            return [unflatten_state(item, tensors) for item in body]
        if tag == "tuple":
            return tuple(unflatten_state(item, tensors) for item in body)
    raise ValueError(f"unknown layout entry {str(layout)[:80]}")


# -- files ------------------------------------------------------------------------------------------


def _remove_temp_folders(root: Path) -> None:
    """What a killed save left behind (one process trains in a run folder, so none is live)."""
    for name in os.listdir(root):
        if name.startswith(".tmp-"):
            shutil.rmtree(root / name, ignore_errors=True)


def _text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"
