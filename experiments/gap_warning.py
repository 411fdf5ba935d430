"""A warning when imagined returns stay away from real ones: the world model is likely biased.

Each iteration logs ``imagination/return_gap`` (imagined minus real return, NaN when nothing was
imagined). One iteration beyond the bound is noise; ``imagination.gap_warning_iterations`` in a row
is a model that keeps promising (or denying) returns the env does not give. The run then says so
once, on the console (``logging.warning``, also in Hydra's ``train.log``) and in TensorBoard. It
only reads the figures, so no trained number changes.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from experiments.distributed import NullLogger
from experiments.metrics_logger import MetricsLogger

log = logging.getLogger(__name__)


def gap_streak(streak: int, gap: float, bound: float) -> int:
    """Consecutive iterations with ``|gap| > bound`` after this one; a NaN gap (no imagination) breaks it."""
    return streak + 1 if not math.isnan(gap) and abs(gap) > bound else 0


@dataclass
class GapWatch:
    """The streak of iterations beyond ``bound`` (None: never warn) and whether the run has warned."""

    bound: float | None
    iterations: int
    streak: int = 0
    warned: bool = False

    def observe(self, gap: float) -> bool:
        """Count this iteration's gap; True the one time the streak first reaches ``iterations``."""
        if self.bound is None or self.warned:
            return False
        self.streak = gap_streak(self.streak, gap, self.bound)
        self.warned = self.streak >= self.iterations
        return self.warned


def warn_gap(logger: MetricsLogger | NullLogger, watch: GapWatch, gap: float, *, real_env_steps: int) -> None:
    """The console line and the TensorBoard text of a streak of large gaps."""
    text = (f"imagined returns differ from real ones by more than {watch.bound} (imagination.gap_warning) for "
            f"{watch.iterations} iterations in a row (imagination.gap_warning_iterations), now {gap:+.3f}: "
            "the world model is likely biased; see imagination/return_gap")
    log.warning(text)
    logger.log_text("imagination/gap_warning", text, real_env_steps=real_env_steps)
