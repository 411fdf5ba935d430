"""One Hydra job's outcome on disk: its resolved config, then a ``done`` or a ``failed`` marker."""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf


def run_job(cfg: DictConfig, validate: Callable[[DictConfig], Any], work: Callable[[Any, Path], dict]) -> dict:
    """Validate ``cfg`` (naming a bad key before any work), write ``config.yaml``, run ``work(run,
    run_dir)`` in Hydra's run directory and leave ``done`` (the summary) or ``failed`` (the
    traceback), so a multirun shows which jobs failed and why."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        run = validate(cfg)
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        summary = work(run, run_dir)
    except BaseException:
        (run_dir / "failed").write_text(traceback.format_exc())
        raise
    (run_dir / "done").write_text(json.dumps(summary))
    print(json.dumps(summary, indent=2))
    return summary
