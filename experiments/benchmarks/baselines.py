"""Model-free baselines: does each method lift real-environment success from the warm start?

    python -m experiments.benchmarks.baselines --minutes 10 --jobs 2
    python -m experiments.benchmarks.baselines --envs hidden_number --algos grpo gigpo --minutes 3

Runs ``experiments.train`` once per (env, algo) in a subprocess with a wall-clock budget (one torch
thread each, ``--jobs`` at a time), then prints evaluated success against real env steps for every
run, a summary table (warm-start success -> final success), and plots the curves to
``<out>/baselines.png``. A figure, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from experiments.metrics_logger import read_metrics

ENVS = ("hidden_number", "frozen_lake")
ALGOS = ("ppo_turn", "grpo", "gigpo", "hgpo")


def run_one(env: str, algo: str, args: argparse.Namespace) -> Path:
    run_dir = args.out / f"{env}_{algo}_s{args.seed}"
    command = [
        sys.executable, "-m", "experiments.train", f"experiment={env}", f"algo={algo}", f"seed={args.seed}",
        f"trainer.time_budget_s={args.minutes * 60}", "trainer.iterations=100000", "trainer.progress=false",
        *([f"trainer.max_env_steps={args.env_steps}"] if args.env_steps else []),
        f"trainer.eval_every={args.eval_every}", f"hydra.run.dir={run_dir}", *args.overrides,
    ]
    env_vars = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    log = run_dir.with_suffix(".log")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env_vars)
    status = "ok" if code == 0 else f"FAILED (exit {code}, see {log})"
    print(f"  finished {env}/{algo}: {status}", flush=True)
    return run_dir


def eval_curve(run_dir: Path) -> list[tuple[int, float]]:
    records = read_metrics(run_dir / "metrics.jsonl")
    return [(r["charts/real_env_steps"], r["eval/success_rate"]) for r in records if r.get("eval/success_rate") is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--algos", nargs="+", default=list(ALGOS))
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock RL budget per run")
    parser.add_argument("--env-steps", type=int, default=None,
                        help="real env step budget per run (the same on a busy or idle machine)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one core each)")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/baselines"))
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args()

    pairs = [(env, algo) for env in args.envs for algo in args.algos]
    print(f"{len(pairs)} runs, {args.minutes} min of RL each, {args.jobs} at a time -> {args.out}", flush=True)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        run_dirs = list(pool.map(lambda pair: run_one(*pair, args), pairs))
    print(f"all runs done in {(time.monotonic() - start) / 60:.1f} min\n")

    curves = {}
    for (env, algo), run_dir in zip(pairs, run_dirs, strict=True):
        if (run_dir / "metrics.jsonl").exists():
            curves[(env, algo)] = eval_curve(run_dir)

    print("Evaluated success (held-out seeds) against real env steps:")
    for (env, algo), curve in curves.items():
        points = "  ".join(f"{steps}:{success:.2f}" for steps, success in curve)
        print(f"  {env:<14} {algo:<9} {points}")

    print(f"\n{'env':<14} {'algo':<9} {'warm start':>10} {'final':>6} {'best':>6} {'real steps':>10} {'done':>5}")
    summary = []
    for (env, algo), run_dir in zip(pairs, run_dirs, strict=True):
        curve = curves.get((env, algo), [])
        done = (run_dir / "done").exists()
        if not curve:
            print(f"{env:<14} {algo:<9} {'-':>10} {'-':>6} {'-':>6} {'-':>10} {str(done):>5}")
            continue
        row = {"env": env, "algo": algo, "initial": curve[0][1], "final": curve[-1][1],
               "best": max(s for _, s in curve), "real_env_steps": curve[-1][0], "done": done}
        summary.append(row)
        print(f"{env:<14} {algo:<9} {row['initial']:>10.2f} {row['final']:>6.2f} {row['best']:>6.2f} "
              f"{row['real_env_steps']:>10} {str(done):>5}")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(curves, args.out / "baselines.png")
    print(f"\nplot: {args.out / 'baselines.png'}")


def plot(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({env for env, _ in curves})
    fig, axes = plt.subplots(1, max(len(envs), 1), figsize=(5 * max(len(envs), 1), 3.6), squeeze=False)
    for ax, env in zip(axes[0], envs, strict=False):
        for (curve_env, algo), curve in sorted(curves.items()):
            if curve_env == env and curve:
                steps, success = zip(*curve, strict=True)
                ax.plot(steps, success, marker="o", markersize=3, label=algo)
        ax.set_title(env)
        ax.set_xlabel("real env steps")
        ax.set_ylabel("eval success rate")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
