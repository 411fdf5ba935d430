"""One Hydra job's outcome on disk: its resolved config, then a ``done`` or a ``failed`` marker."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from envs.strict_json import strict_dumps

DONE, FAILED = "done", "failed"


def run_job(
    cfg: DictConfig, validate: Callable[[DictConfig], Any], work: Callable[[Any, Path], dict]
) -> dict | None:
    """Validate ``cfg`` (naming a bad key before any work), write ``config.yaml``, run ``work(run,
    run_dir)`` in Hydra's run directory and leave ``done`` (the summary) or ``failed`` (the
    traceback), so a multirun shows which jobs failed and why.

    A single run re-raises the error (the command exits non-zero). A job of a multirun returns None
    instead: Hydra's launcher would otherwise stop the sweep at the first failed job and hide the
    others; ``experiments.sweep.SweepEnd`` lists the failed jobs when the sweep ends."""
    hydra_config = HydraConfig.get()
    run_dir = Path(hydra_config.runtime.output_dir)
    try:
        run = validate(cfg)
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        summary = work(run, run_dir)
    except BaseException as error:
        (run_dir / FAILED).write_text(traceback.format_exc())
        if hydra_config.mode != RunMode.MULTIRUN or not isinstance(error, Exception):
            raise  # a single run exits non-zero; Ctrl-C stops the whole sweep
        traceback.print_exc()
        print(f"job failed, traceback in {run_dir / FAILED}; the sweep goes on", file=sys.stderr, flush=True)
        return None
    (run_dir / DONE).write_text(strict_dumps(summary))
    print(strict_dumps(summary, indent=2))
    return summary
