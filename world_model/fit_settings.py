"""``FitSettings``: the settings of one world-model fit, the one home of them for every entry point.

``experiments/fit_world_model.py`` reads them as its ``fit.*`` group; the training loop builds them
from its flat ``imagination.fit_*`` keys (``ImaginationConfig.world_model_fit``), kept flat so that
recorded runs, presets and sweeps keep their keys. Both pass ``keywords()`` to the fit of the model's
kind (``world_model.kinds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envs.checks import check_int


@dataclass
class FitSettings:
    """Optimiser steps, batches and AdamW settings of one fit (``fit.*`` in ``fit_world_model``)."""

    steps: int = 2000
    """Optimiser steps (AdamW)."""
    max_epochs: int | None = None
    """Also stop after this many passes over the training episodes (None: steps alone)."""
    batch_size: int = 32
    """Episodes per batch (one row per episode, every turn scored)."""
    lr: float = 1e-3
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    val_every_steps: int | None = None
    """Steps between validation passes (None: at the end of every epoch)."""
    progress: bool = True
    """Show progress bars."""

    def __post_init__(self) -> None:
        check_int("fit.steps", self.steps, 1)
        check_int("fit.batch_size", self.batch_size, 1)
        check_int("fit.max_epochs", self.max_epochs, 1, optional=True)
        check_int("fit.val_every_steps", self.val_every_steps, 1, optional=True)
        if not self.lr > 0:
            raise ValueError(f"fit.lr must be > 0, got {self.lr}")
        if not self.weight_decay >= 0:
            raise ValueError(f"fit.weight_decay must be >= 0, got {self.weight_decay}")

    def keywords(self) -> dict[str, Any]:
        """These settings as the keywords of ``world_model.fitting.fit_any``."""
        return {"max_steps": self.steps, "max_epochs": self.max_epochs, "batch_size": self.batch_size,
                "lr": self.lr, "weight_decay": self.weight_decay, "val_every_steps": self.val_every_steps,
                "progress": self.progress}
