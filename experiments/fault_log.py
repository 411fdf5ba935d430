"""Faults a training run survived (an env that raised, a skipped non-finite step), where a person sees them."""

from __future__ import annotations

import sys
from pathlib import Path

from tqdm.auto import tqdm

from experiments.distributed import NullLogger
from experiments.metrics_logger import MetricsLogger


def log_fault(logger: MetricsLogger | NullLogger, run_dir: Path, tag: str, text: str, *, real_env_steps: int) -> None:
    """A fault the run survived: on stderr now, in TensorBoard, and a line of the run's ``faults.log``."""
    tqdm.write(text, file=sys.stderr)
    logger.log_text(tag, text, real_env_steps=real_env_steps)
    with open(run_dir / "faults.log", "a", encoding="utf-8") as handle:
        handle.write(f"{tag}\t{text}\n")
