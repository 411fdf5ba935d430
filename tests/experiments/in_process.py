"""Training runs inside the test process: the config composed by Hydra as on the command line, then
``experiments.train.train`` called directly, which saves a subprocess's imports (most of a tiny run's
wall time)."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from experiments.config import Resolved, validate
from experiments.resume import resume_config
from experiments.train import train

CONF = Path(__file__).resolve().parents[2] / "experiments" / "conf"


def compose_config(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="train", overrides=list(overrides))


def train_in_process(overrides: list[str], run_dir: Path) -> dict:
    """One run of ``python -m experiments.train *overrides`` into ``run_dir`` (``resume=`` included)."""
    cfg = compose_config(overrides)
    if cfg.resume is not None:
        cfg = resume_config(cfg, overrides, validate)
    run: Resolved = validate(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    return train(run, run_dir)
