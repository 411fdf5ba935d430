"""Scalars to ``metrics.jsonl`` and TensorBoard (Lightning Fabric's logger), text samples to TensorBoard.

Every scalar is logged against ``charts/real_env_steps`` (the x-axis that matters in this field) and
also carries the iteration, so ``metrics.jsonl`` can be plotted either way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from lightning.fabric.loggers import TensorBoardLogger

from envs.strict_json import strict_dumps


class MetricsLogger:
    def __init__(self, run_dir: str | Path, *, purge_step: int | None = None) -> None:
        """``purge_step``: a resumed run hides TensorBoard events from that step on, which the crashed
        attempt logged after its checkpoint (``metrics.jsonl`` is rewound by the resume itself)."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = self.run_dir / "metrics.jsonl"
        self._jsonl = self.jsonl_path.open("a", encoding="utf-8")
        # name="" and version="": the events go straight into <run_dir>/tensorboard.
        self._tb = TensorBoardLogger(root_dir=self.run_dir / "tensorboard", name="", version="", purge_step=purge_step)

    def log(self, metrics: dict[str, float], *, real_env_steps: int, iteration: int) -> None:
        record = {"iteration": iteration, "charts/real_env_steps": real_env_steps}
        for name, value in metrics.items():
            value = float(value)
            record[name] = value if math.isfinite(value) else None
        finite = {name: value for name, value in record.items() if name in metrics and value is not None}
        self._tb.log_metrics(finite, step=real_env_steps)
        self._jsonl.write(strict_dumps(record) + "\n")
        self._jsonl.flush()

    def log_text(self, tag: str, text: str, *, real_env_steps: int) -> None:
        # TensorBoard renders text as markdown: indent by four spaces to keep it verbatim.
        self._tb.experiment.add_text(tag, "    " + text.replace("\n", "\n    "), global_step=real_env_steps)

    def close(self) -> None:
        self._jsonl.close()
        self._tb.finalize("success")


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a ``metrics.jsonl`` file, in order."""
    with Path(path).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
