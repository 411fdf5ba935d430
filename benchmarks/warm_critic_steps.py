"""A critic saved by an earlier run against a fresh one, measured in real env steps to 0.8 success.

    python -m benchmarks.warm_critic_steps [--seeds 0 1 2] [--earlier-seed 10] [--earlier-steps 50000]
                                           [--env-steps 100000] [--jobs 2] [--out benchmarks/warm_critic_steps]
    python -m benchmarks.warm_critic_steps --report-only --out DIR     # the figures of runs (or records) in DIR
    python -m benchmarks.warm_critic_steps --keep docs/warm_critic_steps  # also copy the records there

On ``experiment=hidden_number_10`` with the headline's ``ppo_turn`` arm (``sample_efficiency.run_overrides``:
its overrides, critic and held-out evaluations every 1,000 real steps): an earlier run (seed
``--earlier-seed``, not among the compared ones, ``--earlier-steps`` real steps) saves its critic; then
per seed of ``--seeds`` a ``fresh`` run (the critic initialised from the seed, as every run is) and a
``warm`` one (``critic.init=<the earlier run>``), ``--env-steps`` real steps each. Both arms of a seed
share the warm start (cloned once), so they differ only in the critic they start with. Runs are
subprocesses of one torch thread, ``--jobs`` at a time, in ``<out>/hidden_number_10/arm=<arm>,seed=<seed>``;
a finished one is kept when started again.

Printed: per seed and arm the real steps to 0.8 (``experiments.reporting``'s held rule on the common
mark grid), the critic steps imported on the ledger (``imported_critic_real_steps``: the earlier run's
real steps) and the steps counting them, final success, CPU minutes and the mean explained variance of
the first ``FIRST_ITERATIONS`` iterations (``losses/explained_variance``: the critic before its update);
then per arm the geometric mean with its 95% interval, the paired per-seed ratio fresh / warm without
and with the imported steps, and the earlier run itself. A figure, not a timed test (about 4 CPU
minutes per 100k-step run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from benchmarks.sample_efficiency import run_overrides
from benchmarks.warm_critic import explained_variances
from experiments.report import write_report
from experiments.reporting import Run, load_run, load_runs, mark_curve, steps_to_held_target
from experiments.reporting.archive import archive_run
from experiments.reporting.intervals import (
    TOO_FEW,
    geometric_mean,
    interval_text,
    log_t_interval,
    paired_log_ratio,
)
from experiments.reporting.runs import read_records, run_status
from experiments.reporting.table import common_marks, run_steps_to_target

ENV, METHOD, TARGET = "hidden_number_10", "ppo_turn", 0.8
ARMS = ("fresh", "warm")
EARLIER = "earlier"
FIRST_ITERATIONS = 5  # iterations whose explained variance is kept: the start, where a saved critic could help
FIRST_EV = "first_explained_variance.json"  # beside each run's metrics, and kept with its record
IMPORTED = "imported_critic_real_steps"


def run_dir(out: Path, arm: str, seed: int) -> Path:
    return out / ENV / f"arm={arm},seed={seed}"


def arm_and_seed(path: Path) -> tuple[str | None, int | None]:
    """``(arm, seed)`` from a run folder named ``arm=<arm>,seed=<seed>``; ``(None, None)`` for another name."""
    fields = dict(part.partition("=")[::2] for part in path.name.split(","))
    if "arm" not in fields or not fields.get("seed", "").isdigit():
        return None, None
    return fields["arm"], int(fields["seed"])


def with_imported(steps: float | None, imported: int | None) -> float | None:
    """Real steps to the target counting the real steps the run's saved critic was fitted on before it
    started: None when the run never held the target or its ledger does not say."""
    return None if steps is None or imported is None else steps + imported


def steps_text(values: list[float | None]) -> str:
    """The geometric mean over seeds of real steps to the target with its 95% interval (as the report
    writes it), or ``not reached (k/n)`` when only k of n seeds held it."""
    reached = [v for v in values if v is not None]
    if len(reached) < len(values) or not values:
        return f"not reached ({len(reached)}/{len(values)})"
    if any(v <= 0 for v in values):
        return f"{statistics.mean(values):,.0f} (a seed at 0: no interval)"
    interval = log_t_interval(values)
    return f"{geometric_mean(values):,.0f} " + (interval_text(interval) if interval else f"({TOO_FEW})")


def ratio_text(fresh: dict[int, float | None], warm: dict[int, float | None]) -> str:
    """fresh / warm seed by seed (above 1: the warm critic needed fewer real steps) over the seeds where
    both arms held the target after more than 0 steps: the geometric mean of the per-seed ratios, its 95%
    interval, and the ratios themselves."""
    seeds = sorted(s for s in fresh if s in warm and fresh[s] and warm[s])
    if not seeds:
        return "no seed where both arms held it: no paired ratio"
    paired = paired_log_ratio([warm[s] for s in seeds], [fresh[s] for s in seeds])
    interval = interval_text(paired.interval, "{:.2f}") if paired.interval else f"({TOO_FEW})"
    each = ", ".join(f"seed {s} {fresh[s] / warm[s]:.2f}" for s in seeds)
    return f"{paired.ratio:.2f} {interval} over {paired.pairs} paired seeds ({each})"


def first_ev(path: Path) -> list[float] | None:
    """The first iterations' explained variances of a run, from its ``FIRST_EV`` file (None without one)."""
    file = path / FIRST_EV
    return json.loads(file.read_text()) if file.is_file() else None


def decided(folder: Path) -> bool:
    """Whether a finished run's held crossing of ``TARGET`` is already decided: found among its marks
    before the last one (the last is the budget's own evaluation, which a longer run plays otherwise;
    no later mark can move a crossing found before it)."""
    run = load_run(folder)
    points = mark_curve(run.curve, run.eval_every_steps) if run.eval_every_steps else run.curve
    return steps_to_held_target(points[:-1], TARGET) is not None


def budget_of(folder: Path) -> int:
    """A run's real-step budget (``trainer.max_env_steps`` of its saved config)."""
    return int(yaml.safe_load((folder / "config.yaml").read_text())["trainer"]["max_env_steps"])


def train(command: list[str], log: Path) -> int:
    """``python -m experiments.train *command`` in a subprocess of one thread, its output appended to ``log``."""
    env_vars = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with log.open("a") as handle:
        return subprocess.call([sys.executable, "-m", "experiments.train", *command], stdout=handle,
                               stderr=subprocess.STDOUT, env=env_vars)


def run_one(out: Path, arm: str, seed: int, steps: int, extra: list[str], rerun: bool, stage: int | None) -> Path:
    """One headline ppo_turn run into ``run_dir(out, arm, seed)`` in a subprocess (kept when done). With
    ``stage``: first to ``stage`` real steps, then extended by ``stage`` at a time (``resume=`` with a
    larger budget, which ends as a run launched with it would) until its held crossing is decided or it
    has spent ``steps``. Then its first iterations' explained variances beside its metrics."""
    folder = run_dir(out, arm, seed)
    log = folder.parent / f"{folder.name}.log"
    if rerun or run_status(folder) != "done":
        if folder.exists():
            shutil.rmtree(folder)  # a run stopped midway starts again
        folder.parent.mkdir(parents=True, exist_ok=True)
        log.unlink(missing_ok=True)
        bench = argparse.Namespace(eval_every_steps=None, overrides=[], env_steps=min(stage or steps, steps),
                                   iterations=100_000, out=out, checkpoint_every=10)  # the headline's settings
        train([*run_overrides(ENV, METHOD, seed, bench, folder), *extra], log)
    while stage and run_status(folder) == "done" and budget_of(folder) < steps and not decided(folder):
        budget = min(budget_of(folder) + stage, steps)
        if train([f"resume='{folder}'", f"trainer.max_env_steps={budget}", "trainer.progress=false"], log):
            # refused (e.g. no checkpoint yet: a stage shorter than 10 iterations) or failed: it stays as it is
            print(f"  {folder.name}: extending to {budget:,} real steps failed, see {log}", flush=True)
            break
    status = run_status(folder)
    if status == "done":
        values = explained_variances(read_records(folder / "metrics.jsonl"))[:FIRST_ITERATIONS]
        (folder / FIRST_EV).write_text(json.dumps(values))
    print(f"  {folder.name}: {status}, {budget_of(folder):,} real steps", flush=True)
    return folder


def run_all(args: argparse.Namespace) -> None:
    """The earlier run and every fresh run first (each fresh run clones its seed's warm start), then the
    warm runs, which wait for the earlier run's critic; only the arms of ``--arms`` (and the earlier run
    only for the warm arm)."""
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        earlier = pool.submit(run_one, args.out, EARLIER, args.earlier_seed, args.earlier_steps, [], False, None) \
            if "warm" in args.arms else None
        fresh = [pool.submit(run_one, args.out, "fresh", s, args.env_steps, [], args.rerun, args.stage)
                 for s in args.seeds if "fresh" in args.arms]

        def warm(seed: int) -> Path:
            init = earlier.result()  # the critic it starts from; quoted: the folder name holds '=' and ','
            return run_one(args.out, "warm", seed, args.env_steps, [f"critic.init='{init}'"], args.rerun, args.stage)

        warm_runs = [pool.submit(warm, s) for s in args.seeds if "warm" in args.arms]
        for future in [*([earlier] if earlier else []), *fresh, *warm_runs]:
            future.result()


def report(root: Path, seeds: list[int]) -> None:
    """The figures of the runs (or their records) below ``root``."""
    every = {arm_and_seed(run.path): run for run in load_runs(root) if arm_and_seed(run.path)[0]}
    runs = {key: run for key, run in every.items() if run.status == "done"}  # a run still going counts nowhere
    for run in every.values():
        if run.status != "done":
            print(f"left out: {run.path.name} ({run.status})")
    compared: list[Run] = [runs[(arm, s)] for arm in ARMS for s in seeds if (arm, s) in runs]
    marks = common_marks(compared)
    steps = {arm: {s: run_steps_to_target(runs[(arm, s)], TARGET, marks) for s in seeds if (arm, s) in runs}
             for arm in ARMS}
    counted = {s: with_imported(steps["warm"][s], runs[("warm", s)].ledger.get(IMPORTED)) for s in steps["warm"]}
    print(f"{ENV}, {METHOD} (the headline's arm), real steps to {TARGET:g} (held rule, marks every {marks:,} "
          f"real steps)")
    print(f"{'arm':<6}{'seed':>5}{'to 0.8':>9}{'imported critic':>17}{'incl. imported':>16}{'final':>7}"
          f"{'CPU min':>9}  explained variance, first iterations")
    for arm in ARMS:
        for s in sorted(steps[arm]):
            run = runs[(arm, s)]
            ev = first_ev(run.path)
            incl = counted[s] if arm == "warm" else steps[arm][s]
            print(f"{arm:<6}{s:>5}{_num(steps[arm][s]):>9}{_num(run.ledger.get(IMPORTED)):>17}{_num(incl):>16}"
                  f"{_num(run.final_success, '{:.2f}'):>7}{_num(run.cpu_s and run.cpu_s / 60, '{:.1f}'):>9}  "
                  + ("-" if ev is None else f"mean {statistics.mean(ev):+.3f}: " + " ".join(f"{v:+.3f}" for v in ev)))
    print(f"geometric mean: fresh {steps_text(list(steps['fresh'].values()))}; warm "
          f"{steps_text(list(steps['warm'].values()))}; warm counting the earlier run's real steps "
          f"{steps_text(list(counted.values()))}")
    print(f"paired ratio fresh / warm (above 1: warm needed fewer): {ratio_text(steps['fresh'], steps['warm'])}")
    print(f"  counting the earlier run's real steps: {ratio_text(steps['fresh'], counted)}")
    for arm in ARMS:
        cpu = [runs[(arm, s)].cpu_s / 60 for s in steps[arm] if runs[(arm, s)].cpu_s]
        evs = [statistics.mean(ev) for s in steps[arm] if (ev := first_ev(runs[(arm, s)].path))]
        print(f"{arm}: CPU {statistics.mean(cpu):.1f} min per run" if cpu else f"{arm}: CPU -", end="")
        print(f", explained variance over the first {FIRST_ITERATIONS} iterations {statistics.mean(evs):+.3f} "
              "(mean over seeds)" if evs else "")
    earlier = [run for (arm, _), run in runs.items() if arm == EARLIER]
    for run in earlier:
        print(f"earlier run (seed {run.seed}): {_num(run.real_env_steps)} real steps, critic fitted on "
              f"{_num(run.ledger.get('critic_real_steps'))}, to {TARGET:g} {_num(run_steps_to_target(run, TARGET, marks))},"
              f" final success {_num(run.final_success, '{:.2f}')}, CPU {_num(run.cpu_s and run.cpu_s / 60, '{:.1f}')} min")
    if compared:
        write_report(compared, root, TARGET, name="warm_critic_steps", marks=marks,
                     names=lambda run: arm_and_seed(run.path)[0])
        print(f"every run, its ledger and overrides: {root / 'warm_critic_steps.md'}")


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def keep(out: Path, dest: Path) -> None:
    """Copy every finished run's record (``archive_run``) and its ``FIRST_EV`` file below ``dest``."""
    for folder in sorted((out / ENV).glob("arm=*,seed=*")):
        if run_status(folder) != "done":
            continue
        kept = archive_run(folder, dest / ENV / folder.name)
        if (folder / FIRST_EV).is_file():
            (kept / FIRST_EV).write_text((folder / FIRST_EV).read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.warm_critic_steps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the compared runs")
    parser.add_argument("--earlier-seed", type=int, default=10, help="seed of the run that saves the critic")
    parser.add_argument("--earlier-steps", type=int, default=50_000, help="real env steps of the earlier run")
    parser.add_argument("--env-steps", type=int, default=100_000, help="real env steps of each compared run")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one CPU thread each)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/warm_critic_steps"))
    parser.add_argument("--stage", type=int, default=None,
                        help="stop a compared run once its held crossing is decided, looking every STAGE real steps "
                             "(over 10 iterations, where an extension goes on from; default: every run spends --env-steps)")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS,
                        help="the compared arms to run (the earlier run is run or kept either way)")
    parser.add_argument("--rerun", action="store_true", help="repeat the compared runs, also finished ones")
    parser.add_argument("--report-only", action="store_true", help="print the figures of what is in --out")
    parser.add_argument("--keep", type=Path, default=None, help="copy the finished runs' records to this folder")
    args = parser.parse_args(argv)
    if args.earlier_seed in args.seeds:
        parser.error(f"--earlier-seed {args.earlier_seed} must not be among --seeds")
    if not args.report_only:
        print(f"earlier run seed {args.earlier_seed} ({args.earlier_steps:,} real steps), then fresh and warm runs of "
              f"seeds {args.seeds} ({args.env_steps:,} each), {args.jobs} at a time -> {args.out}", flush=True)
        run_all(args)
    if args.keep is not None:
        keep(args.out, args.keep)
    report(args.out, args.seeds)


if __name__ == "__main__":
    main()
