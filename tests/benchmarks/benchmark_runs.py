"""A finished benchmark run folder, as ``sample_efficiency.run_one`` leaves it, for tests of the
benchmark's headline and tables."""

from __future__ import annotations

import json
from pathlib import Path


def write_benchmark_run(root: Path, method: str, values: list[float], *, seed: int = 0, every: int = 100,
                        wall_s: float | None = None, cpu_s: float | None = None, done: bool = True,
                        ledger: dict | None = None) -> Path:
    """``<root>/method=<method>,seed=<seed>``, evaluated every ``every`` real env steps from step 0 with
    success ``values``, each method its own configuration. ``wall_s``: the elapsed time logged over
    the run; ``cpu_s``: a summary.json whose wall and CPU seconds are both ``cpu_s``; ``done=False``: a run
    still in progress (no ``done`` marker); ``ledger``: the summary's ledger of env steps (with ``cpu_s``)."""
    folder = root / f"method={method},seed={seed}"
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n- marker={method}\n")
    (folder / "config.yaml").write_text(f"trainer:\n  eval_every_steps: {every}\n")
    last = len(values) - 1
    records = [{"iteration": i, "charts/real_env_steps": every * i, "eval/success_rate": v,
                **({} if wall_s is None else {"charts/elapsed_s": wall_s * i / last})} for i, v in enumerate(values)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    if cpu_s is not None:
        (folder / "summary.json").write_text(json.dumps({"real_env_steps": every * last, "final_success": values[-1],
                                                         "wall_s": cpu_s, "cpu_seconds": cpu_s,
                                                         **({} if ledger is None else {"ledger": ledger})}))
    if done:
        (folder / "done").write_text("")
    return folder
