"""What the real-branch oracle's step groups cost: real steps to a target, with and without its own steps.

    python -m benchmarks.sample_efficiency --envs learning_check --methods real_branch_gigpo \
        --seeds 0 1 2 --eval-every 2 --env-steps 40000      # runs into benchmarks/sample_efficiency/
    python -m benchmarks.oracle_cost benchmarks/sample_efficiency/learning_check --target 0.8

For every run folder at or below DIR that logged ``oracle/env_steps`` (``algo=real_branch_gigpo``,
e.g. from ``benchmarks.sample_efficiency --methods real_branch_gigpo``), at the first
held-out evaluation at or above ``--target`` success (the convention of ``experiments.report``):

- ``real steps``: ``charts/real_env_steps``, the x-axis, the oracle's branch and replay steps included;
- ``collected``: the same count without the oracle's steps, i.e. only the policy's own rollouts (what
  the run would have paid had clones of the real env been free, and the figure to hold against a
  model-free method's real steps for the quality of the oracle's advantages);
- the iteration; and over the whole run: the oracle's extra steps per collected step, its share of
  replay steps, final success and wall time.

Then the mean and standard deviation over runs. A run that never reached the target is shown with
``-`` and left out of the means of its steps to target.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from experiments.reporting.runs import find_run_dirs


def oracle_cost(records: Sequence[dict], target: float) -> dict[str, float | None]:
    """The figures above from one run's ``metrics.jsonl`` records, in order (None: target not reached)."""
    oracle, replay, collected, reached = 0.0, 0.0, 0.0, None
    previous = 0.0
    for record in records:
        steps = float(record.get("charts/real_env_steps", previous))
        extra = float(record.get("oracle/env_steps", 0.0))
        oracle += extra
        replay += float(record.get("oracle/replay_env_steps", 0.0))
        collected += steps - previous - extra
        previous = steps
        if reached is None and record.get("eval/success_rate", -1.0) >= target:
            reached = {"real_steps": steps, "collected": collected, "iteration": float(record["iteration"])}
    last_eval = next((r["eval/success_rate"] for r in reversed(records) if "eval/success_rate" in r), None)
    return {
        "real_steps": reached and reached["real_steps"],
        "collected": reached and reached["collected"],
        "iteration": reached and reached["iteration"],
        "extra_per_step": oracle / collected if collected else None,
        "replay_share": replay / oracle if oracle else None,
        "final_success": last_eval,
    }


def _cell(values: Sequence[float | None], digits: int = 0) -> str:
    """``mean ± std`` over the values given (``-`` for none)."""
    kept = [v for v in values if v is not None]
    if not kept:
        return "-"
    spread = f" ± {statistics.stdev(kept):,.{digits}f}" if len(kept) > 1 else ""
    return f"{statistics.mean(kept):,.{digits}f}{spread}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="a run folder, or a folder holding several")
    parser.add_argument("--target", type=float, default=0.8, help="held-out success rate to reach")
    args = parser.parse_args(argv)
    rows = []
    for run_dir in find_run_dirs(args.root):
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
        if not any("oracle/env_steps" in r for r in records):
            continue
        summary = run_dir / "summary.json"
        wall = json.loads(summary.read_text()).get("wall_s") if summary.exists() else None
        rows.append((run_dir.name, {**oracle_cost(records, args.target), "wall_s": wall}))
    if not rows:
        raise SystemExit(f"no run below {args.root} logged oracle/env_steps (algo=real_branch_gigpo)")
    columns = (
        "real_steps",
        "collected",
        "iteration",
        "extra_per_step",
        "replay_share",
        "final_success",
        "wall_s",
    )
    digits = {"extra_per_step": 2, "replay_share": 2, "final_success": 2}
    print(f"Real-branch oracle, target {args.target:g}: steps at the first evaluation at or above it")
    print(f"{'run':34s} " + " ".join(f"{c:>16s}" for c in columns))
    for name, figures in rows:
        print(f"{name:34s} " + " ".join(f"{_cell([figures[c]], digits.get(c, 0)):>16s}" for c in columns))
    print(
        f"{'mean ± std':34s} "
        + " ".join(f"{_cell([f[c] for _, f in rows], digits.get(c, 0)):>16s}" for c in columns)
    )


if __name__ == "__main__":
    main()
