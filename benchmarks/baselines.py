"""Model-free baselines: does each method lift real-environment success from the warm start?

    python -m benchmarks.baselines --minutes 10 --jobs 2
    python -m benchmarks.baselines --envs hidden_number --algos grpo gigpo --minutes 3

Runs ``experiments.train`` once per (env, algo) in a subprocess with a wall-clock budget (one torch
thread each, ``--jobs`` at a time), then reports these runs with ``experiments.report``: the table
(real env steps to ``--target`` held-out success, final success, wall time) printed and written to
``<out>/baselines.md``, the curves to ``<out>/baselines.png``, and per-run warm-start and final
success to ``<out>/summary.json``. A figure, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from envs.strict_json import strict_dumps
from experiments.report import DEFAULT_TARGET, write_report
from experiments.reporting import Run, load_run

ENVS = ("hidden_number", "frozen_lake")
ALGOS = ("ppo_turn", "grpo", "gigpo", "hgpo")


def run_one(env: str, algo: str, args: argparse.Namespace) -> Path:
    run_dir = args.out / f"{env}_{algo}_s{args.seed}"
    command = [
        sys.executable, "-m", "experiments.train", f"experiment={env}", f"algo={algo}", f"seed={args.seed}",
        f"trainer.time_budget_s={args.minutes * 60}", "trainer.iterations=100000", "trainer.progress=false",
        *([f"trainer.max_env_steps={args.env_steps}"] if args.env_steps else []),
        *([f"trainer.eval_every_steps={args.eval_every_steps}"] if args.eval_every_steps else []),
        f"hydra.run.dir={run_dir}", *args.overrides,
    ]
    env_vars = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    log = run_dir.with_suffix(".log")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env_vars)
    status = "ok" if code == 0 else f"FAILED (exit {code}, see {log})"
    print(f"  finished {env}/{algo}: {status}", flush=True)
    return run_dir


def run_summaries(runs: list[Run]) -> list[dict]:
    """Per run: warm-start (first evaluation) and final held-out success, the best, real env steps, status."""
    rows = []
    for run in runs:
        if not run.curve:
            continue
        rows.append({"env": run.env, "algo": run.overrides.get("algo"), "seed": run.seed,
                     "initial": run.curve[0][1], "final": run.final_success,
                     "best": max(success for _, success in run.curve), "real_env_steps": run.real_env_steps,
                     "done": run.status == "done", "status": run.status})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--algos", nargs="+", default=list(ALGOS))
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock RL budget per run")
    parser.add_argument("--env-steps", type=int, default=None,
                        help="real env step budget per run (the same on a busy or idle machine)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one core each)")
    parser.add_argument("--eval-every-steps", type=int, default=None,
                        help="real env steps between held-out evaluations (default: the preset's marks)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=DEFAULT_TARGET,
                        help="held-out success whose first crossing the table reports in real env steps")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/baselines"))
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args()

    pairs = [(env, algo) for env in args.envs for algo in args.algos]
    print(f"{len(pairs)} runs, {args.minutes} min of RL each, {args.jobs} at a time -> {args.out}", flush=True)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        run_dirs = list(pool.map(lambda pair: run_one(*pair, args), pairs))
    print(f"all runs done in {(time.monotonic() - start) / 60:.1f} min\n")

    runs = []
    for (env, algo), run_dir in zip(pairs, run_dirs, strict=True):
        if (run_dir / "metrics.jsonl").exists():
            runs.append(load_run(run_dir))
        else:
            print(f"  {env}/{algo}: no metrics.jsonl in {run_dir}, left out of the report")
    if not runs:
        print("no run logged any metrics: nothing to report")
        sys.exit(1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(strict_dumps(run_summaries(runs), indent=2))
    write_report(runs, args.out, args.target, name="baselines", echo=True)


if __name__ == "__main__":
    main()
