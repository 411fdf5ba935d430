"""One Lightning ``Trainer.fit`` for either world model: the checks of the step and epoch budgets,
the Trainer's options, a fit seeded apart from the caller's random state, and the metrics every fit
returns. The two models differ only in their module, their loaders and how a loss pass scores them."""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from torch.utils.data import DataLoader


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Silence Lightning's per-Trainer banners (accelerators, logger tips) and its advice warnings,
    which a training loop refitting every iteration would otherwise print every iteration."""
    lightning_log = logging.getLogger("lightning.pytorch")
    level = lightning_log.level
    lightning_log.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"lightning\.pytorch.*")
            yield
    finally:
        lightning_log.setLevel(level)


def check_budget(max_steps: int | None, max_epochs: int | None, val_every_steps: int | None) -> None:
    """At least one of the step and epoch budgets, each an integer >= 1 where given."""
    if max_steps is None and max_epochs is None:
        raise ValueError("give max_steps or max_epochs")
    for name, value in (("max_steps", max_steps), ("max_epochs", max_epochs), ("val_every_steps", val_every_steps)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")


def run_fit(
    module: L.LightningModule,
    train_loader: DataLoader,
    val_loader: DataLoader | None,
    *,
    max_steps: int | None,
    max_epochs: int | None,
    seed: int,
    progress: bool,
    val_every_steps: int | None,
    log_dir: str | Path | None,
    checkpoints: bool,
    device: torch.device | None = None,
) -> tuple[L.Trainer, float]:
    """Fit ``module`` under ``torch.manual_seed(seed)`` with the caller's random state restored after;
    the fitted Trainer and the fit's wall seconds. With ``checkpoints`` and a ``log_dir`` the fit also
    writes TensorBoard events and its last checkpoint there; otherwise ``log_dir`` is only
    Lightning's root folder. ``device``: where the module lives (the CPU when None)."""
    device = torch.device("cpu") if device is None else device
    callbacks, logger = [], False
    if checkpoints and log_dir is not None:
        log_dir = Path(log_dir)
        logger = TensorBoardLogger(save_dir=str(log_dir), name="tensorboard", version=0, default_hp_metric=False)
        callbacks.append(
            ModelCheckpoint(dirpath=log_dir / "checkpoints", filename="last", save_top_k=1, enable_version_counter=False)
        )
    val_interval = None
    if val_every_steps is not None and val_loader is not None:
        val_interval = min(val_every_steps, len(train_loader))
    with quiet_lightning() if not progress else contextlib.nullcontext():  # banners only with a progress bar
        trainer = L.Trainer(
            accelerator="cpu" if device.type == "cpu" else "gpu",
            devices=1 if device.type == "cpu" else [device.index or 0],
            max_steps=-1 if max_steps is None else max_steps,
            max_epochs=-1 if max_epochs is None else max_epochs,
            logger=logger,
            callbacks=callbacks,
            enable_checkpointing=bool(callbacks),
            enable_progress_bar=progress,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            log_every_n_steps=1,
            limit_val_batches=1.0 if val_loader is not None else 0,
            val_check_interval=val_interval,
            default_root_dir=str(log_dir) if log_dir is not None else None,
        )
        start = time.monotonic()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader)
    return trainer, time.monotonic() - start


def fit_metrics(trainer: L.Trainer, fit_s: float) -> dict[str, float]:
    """The last logged ``wm/*`` values and the fit's ``steps``, ``epochs`` and ``fit_s``."""
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("wm/")}
    metrics.update({"steps": trainer.global_step, "epochs": trainer.current_epoch, "fit_s": fit_s})
    return metrics
