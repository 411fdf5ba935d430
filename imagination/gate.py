"""The imagination gate: imagined data is used only while the world model predicts real data well.

The score is the world model's one-step exact match on the newest real turns, read before it is
refitted on them. The gate opens when the score reaches the threshold and closes when it falls
below, and says which happened so the loop can log it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class ImaginationGate:
    threshold: float
    """Open at a score >= threshold; a threshold of 0 opens at the first score."""
    is_open: bool = False

    def update(self, score: float) -> str | None:
        """Take a new score; return ``"opened"`` or ``"closed"`` when the state changed, else None.

        A NaN score (nothing was scored) leaves the gate as it is.
        """
        if math.isnan(score):
            return None
        now_open = score >= self.threshold
        changed = now_open != self.is_open
        self.is_open = now_open
        if not changed:
            return None
        return "opened" if now_open else "closed"
