"""A shared folder of behaviour-cloned warm starts, so a sweep clones each (env, policy, seed) once.

Cloning is the same for every algorithm of a sweep: it reads only the env and its options, the
policy's config, the warm-start options, the turn cap and the seed. On ``minishop`` it is the slowest
part of a short run (about 17 minutes on one CPU core), repeated by every method. With
``trainer.warm_start.cache_dir=DIR`` the first run of a key saves the cloned weights under
``DIR/<key>/`` and later runs load them instead of cloning: the weights are the same tensors, and
cloning moves no random stream the loop reads afterwards (it draws from its own seeded generators),
so a run that loads its warm start gives the numbers of one that clones.

The key is a hash of exactly those inputs plus the torch version; ``inputs.json`` beside the weights
says what they were. ``checks.json`` holds the env steps cloning spent on its success checks (the
ledger's ``warm_start_check_steps``), so a run that loads the warm start reports the steps of the
run that cloned it; a folder saved before that file existed reports them as unknown (None), never 0.
Weights are safetensors and the count JSON, never a pickle; both are written to a temporary name
then renamed, so a run that loads never sees half a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from envs.strict_json import strict_dumps

CACHE_FORMAT = 1  # raise when what a cached folder holds changes
WEIGHTS = "model.safetensors"
INPUTS = "inputs.json"
CHECKS = "checks.json"


# Policy options that only a pretrained policy reads: left out of a tiny policy's key, so adding them kept
# the tiny policies' cached folders valid; a pretrained policy's key holds them all.
PRETRAINED_ONLY_KEYS = ("model_cache_dir", "lora", "scored_logits", "system_prompt", "few_shot")


def warm_start_inputs(env_name: str, env_kwargs: dict[str, Any], policy_config: Any, warm_start_config: Any,
                      max_turns: int | None, seed: int) -> dict[str, Any]:
    """Everything cloning depends on, as plain JSON values (the cache folder's own option left out)."""
    warm_start = {k: v for k, v in dataclasses.asdict(warm_start_config).items() if k not in ("cache_dir", "enabled")}
    return {
        "format": CACHE_FORMAT, "torch": torch.__version__, "env": env_name, "env_kwargs": env_kwargs,
        "policy": {k: v for k, v in dataclasses.asdict(policy_config).items()
                   if policy_config.pretrained is not None or k not in PRETRAINED_ONLY_KEYS},
        "warm_start": warm_start, "max_turns": max_turns, "seed": seed,
    }


def warm_start_key(inputs: dict[str, Any]) -> str:
    """A short hex digest of the inputs, stable across processes (sorted keys, no Python hash)."""
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_warm_start(cache_dir: str | Path, inputs: dict[str, Any], model: torch.nn.Module) -> Path | None:
    """Load the cached weights of ``inputs`` into ``model`` and return their folder, or None when none
    are cached. A folder whose weights cannot be read or do not fit the model is refused with an
    error naming it (delete it to clone again), never silently replaced."""
    folder = Path(cache_dir) / warm_start_key(inputs)
    if not (folder / WEIGHTS).exists():
        return None
    try:
        load_model(model, folder / WEIGHTS, strict=True)  # strict: missing or unexpected names raise
    except (SafetensorError, OSError, RuntimeError, ValueError) as error:
        raise ValueError(f"cached warm start {folder / WEIGHTS} cannot be loaded ({error}); "
                         f"delete {folder} to clone again") from error
    return folder


def load_check_steps(folder: str | Path) -> int | None:
    """The env steps of the success checks that cloned the warm start in ``folder``; None for a folder
    saved before they were recorded (unknown, not 0). A file that does not hold them is refused."""
    path = Path(folder) / CHECKS
    if not path.exists():
        return None
    try:
        steps = json.loads(path.read_text(encoding="utf-8"))["check_steps"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"cached warm start {path} cannot be read ({error!r}); "
                         f"delete {folder} to clone again") from error
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"cached warm start {path}: check_steps must be an int >= 0, got {steps!r}")
    return steps


def save_warm_start(cache_dir: str | Path, inputs: dict[str, Any], model: torch.nn.Module, *,
                    check_steps: int) -> Path:
    """Save ``model``'s weights and the env steps of cloning's success checks under their key,
    atomically; returns the folder. The count goes first: a folder whose weights can be read has it."""
    folder = Path(cache_dir) / warm_start_key(inputs)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / INPUTS).write_text(strict_dumps(inputs, indent=2, sort_keys=True, default=str) + "\n")
    record = strict_dumps({"check_steps": int(check_steps)}) + "\n"
    write_atomically(folder / CHECKS, lambda temporary: Path(temporary).write_text(record, encoding="utf-8"))
    write_atomically(folder / WEIGHTS, lambda temporary: save_model(model, temporary))
    return folder


def write_atomically(path: Path, write: Callable[[str], None]) -> None:
    """``write(temporary)`` beside ``path``, then one rename: readers see the old file or the whole new one.
    Two runs racing on one key write equal files."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(descriptor)
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
