"""Where a model-based iteration's compute goes, phase by phase, against its model-free twin.

    python -m benchmarks.profile_iteration                      # hidden_number_10, ratio 0.9, 4 iterations of 8 x 4
    python -m benchmarks.profile_iteration --arms dyna          # the default dyna (its 300-step fit on experts: minutes)
    python -m benchmarks.profile_iteration --envs hidden_number_10 frozen_lake --iterations 4
    python -m benchmarks.profile_iteration --arms mb_r0.9 --groups 8 --group-size 8 imagination.first_fit_steps=100

Each arm is one ``experiments.train`` run (grpo, one torch thread, in a subprocess of its own so its
peak memory is its own) on the env's ``experiment=`` preset, sharing one behaviour-cloned warm start
per env (``<out>/warm_starts``): ``mf`` is the model-free twin; ``mb_r0.9`` the headline's model-based
method (``benchmarks.sample_efficiency``: ``MODEL_BASED`` = ``IMAGINATION`` + ``LATENT_MODEL``, ratio
0.9); ``dyna`` plain ``imagination=dyna`` at its defaults (gate at 0.5, a first fit of 300 steps,
a refit every iteration, the default latent world model). The loop charges every iteration's time to
its phases (``experiments/phase_timer.py``, logged as ``time/phase/*``: self time, so the phases of an
iteration add up to it): ``wm_fit`` world-model fitting, ``wm_score`` its one-step score on the new
real episodes (the gate), ``imagine_model`` the world model's folding and stepping (decoding the
imagined observations), ``imagine_policy`` the policy sampling inside imagination, ``imagine_other``
the rest of imagination, ``collect_policy`` the policy sampling of real collection, ``collect_env`` the
env and the rest of real collection, ``advantages``, ``update``, ``eval`` (held-out evaluations),
``other`` (planning, bookkeeping, logging).

Printed per env and arm, for the first iteration (which holds the first fit, and also the fit on the
warm start's experts and the evaluation before the loop where a run has them) and for the later ones
(steady state): per phase, process CPU seconds per iteration, share of the total and CPU seconds per
real env step; then every arm's CPU and wall per real step and their ratio to the model-free twin
(with and without evaluation), its process's CPU seconds (imports and warm start
included) and wall seconds (from after the imports) and its peak resident memory (``ru_maxrss``). Process CPU time (``time.process_time``) is
the main figure: on a shared machine wall time also counts the waits for a core.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.sample_efficiency import MODEL_BASED
from experiments.phase_timer import METRIC_PREFIX
from experiments.reporting.runs import read_records

ARMS: dict[str, list[str]] = {
    "mf": ["imagination=model_free"],
    "mb_r0.9": [*MODEL_BASED, "imagination.ratio=0.9"],
    "dyna": ["imagination=dyna"],
}
"""Arm -> its overrides on ``experiment=<env> algo=grpo``; ``mf`` is every other arm's twin."""
TWIN = "mf"
PHASES = ("wm_fit", "wm_score", "imagine_model", "imagine_policy", "imagine_other", "collect_policy", "collect_env",
          "advantages", "update", "eval", "other")
ENVS = ("hidden_number_10", "frozen_lake", "hidden_number", "learning_check")
CHILD_RESULT = "profile_process.json"


def arm_overrides(env: str, arm: str, args: argparse.Namespace) -> list[str]:
    """The Hydra overrides of one arm's run."""
    return [
        f"experiment={env}", "algo=grpo", f"seed={args.seed}", *ARMS[arm], f"trainer.iterations={args.iterations}",
        f"trainer.groups_per_iteration={args.groups}", f"trainer.group_size={args.group_size}",
        f"trainer.eval_episodes={args.eval_episodes}", "trainer.progress=false", "trainer.checkpoint_every=0",
        f"trainer.warm_start.cache_dir={args.out / 'warm_starts'}", *args.overrides,
    ]


def run_child(run_dir: Path, overrides: list[str]) -> None:
    """In the subprocess: one training run into ``run_dir``, then this process's CPU and wall seconds
    and peak memory into ``run_dir/profile_process.json``."""
    from benchmarks.sample_efficiency import compose_run
    from experiments.train import train

    run_dir.mkdir(parents=True, exist_ok=True)
    summary = train(compose_run(overrides), run_dir)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    (run_dir / CHILD_RESULT).write_text(json.dumps({
        "process_cpu_s": time.process_time(), "process_wall_s": time.monotonic() - START_WALL,
        "max_rss_mb": usage.ru_maxrss / 1024,  # kilobytes on Linux
        "summary": summary,
    }, indent=2))


START_WALL = time.monotonic()


def run_arm(env: str, arm: str, args: argparse.Namespace) -> dict:
    """One arm's run in a subprocess; its iteration records and its process figures."""
    run_dir = args.out / env / arm
    command = [sys.executable, "-m", "benchmarks.profile_iteration", "--child", str(run_dir),
               *arm_overrides(env, arm, args)]
    env_vars = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    log = args.out / env / f"{arm}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"  {env}/{arm}: running ({log})", flush=True)
    start = time.monotonic()
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env_vars)
    if code != 0:
        raise RuntimeError(f"{env}/{arm} failed with exit {code}; see {log}")
    process = json.loads((run_dir / CHILD_RESULT).read_text())
    print(f"  {env}/{arm}: done in {time.monotonic() - start:.0f} s wall, {process['process_cpu_s']:.0f} s CPU",
          flush=True)
    return {"records": iteration_records(read_records(run_dir / "metrics.jsonl")), **process}


def iteration_records(records: list[dict]) -> list[dict]:
    """The loop's per-iteration records (iteration >= 1, one per iteration: the last wins), in order,
    each with ``real_steps``: the real env steps that iteration took."""
    by_iteration = {r["iteration"]: r for r in records if r.get("iteration", 0) >= 1 and "time/collect_s" in r}
    steps_before, rows = 0, []
    for iteration in sorted(by_iteration):
        record = dict(by_iteration[iteration])
        record["real_steps"] = record["charts/real_env_steps"] - steps_before
        steps_before = record["charts/real_env_steps"]
        rows.append(record)
    return rows


def phase_totals(records: Sequence[dict], clock: str) -> dict[str, float]:
    """Each phase's seconds (``clock``: ``cpu`` or ``wall``) summed over ``records``."""
    return {phase: sum(r.get(f"{METRIC_PREFIX}{phase}_{clock}_s", 0.0) for r in records) for phase in PHASES}


def per_real_step(records: Sequence[dict], clock: str, *, with_eval: bool) -> float:
    """Seconds of every phase (less evaluation unless ``with_eval``) per real env step over ``records``."""
    totals = phase_totals(records, clock)
    seconds = sum(s for phase, s in totals.items() if with_eval or phase != "eval")
    steps = sum(r["real_steps"] for r in records)
    return seconds / steps if steps else float("nan")


def phase_table(records: Sequence[dict]) -> list[str]:
    """Markdown rows: per phase, CPU s per iteration, share of the total, CPU ms per real step."""
    totals = phase_totals(records, "cpu")
    total, steps, n = sum(totals.values()), sum(r["real_steps"] for r in records), len(records)
    lines = ["| phase | CPU s / iteration | share | CPU ms / real step |", "|---|---:|---:|---:|"]
    for phase, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        if seconds > 0:
            per_step = f"{1000 * seconds / steps:.1f}" if steps else "-"
            lines.append(f"| {phase} | {seconds / n:.3f} | {seconds / total:.1%} | {per_step} |")
    per_step = f"{1000 * total / steps:.1f}" if steps else "-"
    lines.append(f"| **total** | **{total / n:.3f}** | 100% | **{per_step}** |")
    lines.append(f"\n{n} iteration(s), {steps} real env steps ({steps / n:.1f} per iteration)")
    return lines


def ratio_table(results: dict[str, dict]) -> list[str]:
    """Markdown rows: every arm's CPU and wall per real step (iterations 2+) and their ratio to the twin."""
    twin = results.get(TWIN)
    lines = ["| arm | CPU ms / real step | x twin | wall ms / real step | x twin | CPU x twin (no eval) "
             "| process CPU s | process wall s | peak RSS MB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm, result in results.items():
        steady = result["records"][1:] or result["records"]
        cells = []
        for clock, with_eval in (("cpu", True), ("wall", True)):
            value = per_real_step(steady, clock, with_eval=with_eval)
            base = per_real_step(twin["records"][1:] or twin["records"], clock, with_eval=with_eval) if twin else None
            cells += [number(1000 * value, ".1f"), number(value / base if base else math.nan, ".1f")]
        base = per_real_step(twin["records"][1:] or twin["records"], "cpu", with_eval=False) if twin else None
        no_eval = per_real_step(steady, "cpu", with_eval=False)
        cells.append(number(no_eval / base if base else math.nan, ".1f"))
        cells += [f"{result['process_cpu_s']:.0f}", f"{result['process_wall_s']:.0f}", f"{result['max_rss_mb']:.0f}"]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines


def number(value: float, spec: str) -> str:
    """``value`` formatted, or "-" when it is NaN (no real env step in the iterations)."""
    return "-" if math.isnan(value) else format(value, spec)


def env_report(env: str, results: dict[str, dict]) -> str:
    """The printed report of one env: each arm's phase tables, then the ratio table."""
    lines = [f"## {env}"]
    for arm, result in results.items():
        records = result["records"]
        lines += [f"\n### {env} / {arm}: iteration 1", "", *phase_table(records[:1])]
        if len(records) > 1:
            lines += [f"\n### {env} / {arm}: iterations 2-{len(records)}", "", *phase_table(records[1:])]
    lines += [f"\n### {env}: per real step, iterations 2+ (whole run when it has one iteration)", "",
              *ratio_table(results)]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_iteration", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["hidden_number_10"], choices=ENVS, help="experiment presets")
    parser.add_argument("--arms", nargs="+", default=["mb_r0.9"], choices=[a for a in ARMS if a != TWIN],
                        help="model-based arms; the model-free twin always runs first")
    parser.add_argument("--iterations", type=int, default=4, help="RL iterations of each run")
    parser.add_argument("--groups", type=int, default=8,
                        help="groups per iteration (the presets: 8; at ratio 0.9, 0.8 of them real on average)")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per group (the presets: 8)")
    parser.add_argument("--eval-episodes", type=int, default=16, help="held-out episodes per evaluation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/profile_iteration"), help="output folder")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)  # the subprocess's run folder
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run, e.g. imagination.fit_steps=20")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, dict]]:
    args = build_parser().parse_args(argv)
    if args.child is not None:
        run_child(args.child, list(args.overrides))
        return {}
    args.out = args.out.resolve()
    arms = [TWIN, *args.arms]
    print(f"{len(args.envs) * len(arms)} runs of {args.iterations} iterations of {args.groups} x {args.group_size} "
          f"-> {args.out}", flush=True)
    reports, all_results = [], {}
    for env in args.envs:
        all_results[env] = {arm: run_arm(env, arm, args) for arm in arms}
        reports.append(env_report(env, all_results[env]))
        print("\n" + reports[-1] + "\n", flush=True)
    (args.out / "profile.md").write_text("\n\n".join(reports) + "\n")
    return all_results


if __name__ == "__main__":
    main()
