"""The refit rules against today's refits: what each costs and buys on a small model-based run.

    python -m benchmarks.refit_rules                                  # hidden_number_10, 6 iterations of 8 x 8
    python -m benchmarks.refit_rules --arms today holdout --iterations 4

Each arm is one ``experiments.train`` run of the headline's model-based method at ratio 0.9
(``benchmarks.profile_iteration``'s ``mb_r0.9``: grpo, a 40-step refit every other iteration, the
small latent world model), one torch thread, in a subprocess of its own (``profile_iteration``'s
child), all from one behaviour-cloned warm start (``<out>/warm_starts``). Every arm uses the plain
fit loop (the same weights as Lightning's, and early stopping needs it); ``today`` sets no rule.
``replay``: ``imagination.fit_replay``; ``refit_below``: ``imagination.refit_below``; ``holdout``:
``imagination.fit_holdout`` (early stop); ``all``: the three together.

Printed per arm: real env steps, the loop's CPU and wall seconds per real step (every phase of every
iteration, evaluations and the first fit included; not imports or the warm start), the world model's fit CPU seconds (``time/phase/wm_fit_cpu_s`` summed; then
those of iterations 2 on, without the first fit),
fits run (the first included) and refits skipped, the steps the early-stopped refits took ("-": no
early stop, so ``fit_steps`` each), and the last evaluation's success rate.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks import profile_iteration
from benchmarks.sample_efficiency import MODEL_BASED
from experiments.reporting.runs import read_records

ARMS: dict[str, list[str]] = {
    "today": [],
    "replay": ["imagination.fit_replay=0.25"],
    "refit_below": ["imagination.refit_below=0.8"],
    "holdout": ["imagination.fit_holdout=0.25", "imagination.fit_eval_every=5", "imagination.fit_patience=2"],
}
ARMS["all"] = [*ARMS["replay"], *ARMS["refit_below"], *ARMS["holdout"]]
BASE = [*MODEL_BASED, "imagination.ratio=0.9", "imagination.fit_loop=plain"]


def arm_summary(result: dict) -> dict[str, float]:
    """One arm's row from ``profile_iteration.run_arm``'s result (its iteration records and process figures)."""
    records = result["records"]
    steps = records[-1]["charts/real_env_steps"] if records else 0
    evaluated = [r["eval/success_rate"] for r in result["all_records"] if "eval/success_rate" in r]
    refits = [r for r in records if "wm/fit_trajectories" in r]
    return {
        "real_steps": steps,
        "cpu_per_step": loop_seconds(records, "cpu") / steps if steps else math.nan,
        "wall_per_step": loop_seconds(records, "wall") / steps if steps else math.nan,
        "fit_cpu_s": sum(r.get("time/phase/wm_fit_cpu_s", 0.0) for r in records),
        "refit_cpu_s": sum(r.get("time/phase/wm_fit_cpu_s", 0.0) for r in records[1:]),  # iteration 1: the first fit
        "refits": len(refits),
        "skipped": sum(r.get("wm/refit_skipped", 0.0) for r in records),
        "fit_steps": sum(used) if (used := [r["wm/fit_steps_used"] for r in refits if "wm/fit_steps_used" in r])
        else math.nan,
        "success": evaluated[-1] if evaluated else math.nan,
    }


def loop_seconds(records: Sequence[dict], clock: str) -> float:
    """Every phase's seconds (``cpu`` or ``wall``) over the loop's iterations: not the process's, whose
    first arm also clones the shared warm start."""
    return sum(profile_iteration.phase_totals(records, clock).values())


def table(rows: dict[str, dict[str, float]]) -> str:
    lines = ["| arm | real steps | CPU s / real step | wall s / real step | fit CPU s | refit CPU s | fits (refits skipped) "
             "| early-stopped refit steps | success |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm, row in rows.items():
        fit_steps = "-" if math.isnan(row["fit_steps"]) else f"{row['fit_steps']:.0f}"
        lines.append(f"| {arm} | {row['real_steps']:.0f} | {row['cpu_per_step']:.3f} | {row['wall_per_step']:.3f} "
                     f"| {row['fit_cpu_s']:.1f} | {row['refit_cpu_s']:.1f} | {row['refits']} ({row['skipped']:.0f}) | {fit_steps} "
                     f"| {row['success']:.3f} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.refit_rules", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="hidden_number_10", choices=profile_iteration.ENVS, help="experiment preset")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--iterations", type=int, default=6, help="RL iterations of each run")
    parser.add_argument("--groups", type=int, default=8, help="groups per iteration")
    parser.add_argument("--group-size", type=int, default=8, help="episodes per group")
    parser.add_argument("--eval-episodes", type=int, default=32, help="held-out episodes per evaluation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/refit_rules"), help="output folder")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    return parser


def run_arm(arm: str, args: argparse.Namespace) -> dict:
    """One arm's run as ``profile_iteration``'s child process: its iteration records and process figures."""
    run_dir = args.out / args.env / arm
    overrides = [
        f"experiment={args.env}", "algo=grpo", f"seed={args.seed}", *BASE, *ARMS[arm],
        f"trainer.iterations={args.iterations}", f"trainer.groups_per_iteration={args.groups}",
        f"trainer.group_size={args.group_size}", f"trainer.eval_episodes={args.eval_episodes}",
        "trainer.progress=false", "trainer.checkpoint_every=0", f"trainer.warm_start.cache_dir={args.out / 'warm_starts'}",
        *args.overrides,
    ]
    command = [sys.executable, "-m", "benchmarks.profile_iteration", "--child", str(run_dir), *overrides]
    env_vars = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    log = args.out / args.env / f"{arm}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  {args.env}/{arm}: running ({log})", flush=True)
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env_vars)
    if code != 0:
        raise RuntimeError(f"{args.env}/{arm} failed with exit {code}; see {log}")
    process = json.loads((run_dir / profile_iteration.CHILD_RESULT).read_text())
    every = read_records(run_dir / "metrics.jsonl")
    return {"records": profile_iteration.iteration_records(every), "all_records": every, **process}


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    args = build_parser().parse_args(argv)
    args.out = args.out.resolve()
    rows = {arm: arm_summary(run_arm(arm, args)) for arm in args.arms}
    report = table(rows)
    print("\n" + report, flush=True)
    (args.out / "refit_rules.md").write_text(report + "\n")
    return rows


if __name__ == "__main__":
    main()
