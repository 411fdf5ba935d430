"""One process against several: the same run's held-out success curve with ``trainer.devices=1`` and ``N``.

    python -m benchmarks.multi_process --processes 2 --iterations 20
    python -m benchmarks.multi_process --experiment learning_check --seed 1 algo=gigpo

Both runs start from the same seed, warm start and config (``experiment=learning_check`` by default:
16 groups of 8 per iteration, so 2 or 4 processes split them evenly); the multi-process one runs
``strategy=ddp_spawn`` on CPU (gloo). ``algo.ppo.minibatch_size`` counts rows per rank, so the
multi-process run gets ``--minibatch-size`` divided by the number of processes: both then take the
same optimizer steps on minibatches of the same total size (``--same-per-rank`` keeps the full size
per rank: fewer, larger steps). The iteration's groups and their tasks are the same; what differs is
that ranks other than 0 sample from streams of their own, and that the update averages per-rank
losses. So the curves should agree in level and trend, not point by point.
Prints the two curves (held-out success against real env steps, per evaluation), the final success
and wall time of each, and writes ``<out>/multi_process.png``.

A figure, not a timed test: two runs of tens of iterations take minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from experiments.metrics_logger import read_metrics


def run(processes: int, args: argparse.Namespace) -> tuple[list[dict], float]:
    """One ``experiments.train`` run in a subprocess; its metrics records and wall seconds."""
    run_dir = args.out / f"processes={processes}"
    overrides = [
        f"experiment={args.experiment}",
        f"seed={args.seed}",
        f"trainer.iterations={args.iterations}",
        f"trainer.eval_every={args.eval_every}",
        "trainer.progress=false",
        f"hydra.run.dir='{run_dir}'",
        f"algo.ppo.minibatch_size={args.minibatch_size if args.same_per_rank else args.minibatch_size // processes}",
        *(
            [f"trainer.devices={processes}", "trainer.strategy=ddp_spawn", "trainer.accelerator=cpu"]
            if processes > 1
            else []
        ),
        *args.overrides,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    log = args.out / f"processes={processes}.log"
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"running {processes} process(es) -> {run_dir} (log {log})", flush=True)
    start = time.monotonic()
    with log.open("w") as handle:
        code = subprocess.call(
            [sys.executable, "-m", "experiments.train", *overrides],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
        )
    wall = time.monotonic() - start
    if code != 0:
        raise SystemExit(f"the {processes}-process run failed (exit {code}): see {log}")
    return read_metrics(run_dir / "metrics.jsonl"), wall


def curve(records: list[dict]) -> list[tuple[int, int, float]]:
    """(iteration, real env steps, held-out success) of every evaluation."""
    return [
        (r["iteration"], r["charts/real_env_steps"], r["eval/success_rate"])
        for r in records
        if r.get("eval/success_rate") is not None
    ]


def print_curves(curves: dict[int, list[tuple[int, int, float]]], walls: dict[int, float]) -> None:
    names = sorted(curves)
    print("\n| iteration | " + " | ".join(f"{n} proc: real steps | {n} proc: success" for n in names) + " |")
    print("|---" * (1 + 2 * len(names)) + "|")
    by_iteration = {n: {it: (steps, success) for it, steps, success in curves[n]} for n in names}
    for iteration in sorted(set().union(*by_iteration.values())):
        cells = []
        for n in names:
            steps, success = by_iteration[n].get(iteration, (None, None))
            cells += ["" if steps is None else f"{steps:,}", "" if success is None else f"{success:.3f}"]
        print(f"| {iteration} | " + " | ".join(cells) + " |")
    print()
    for n in names:
        final = curves[n][-1]
        print(
            f"{n} process(es): final held-out success {final[2]:.3f} at {final[1]:,} real steps, "
            f"wall {walls[n]:.0f} s"
        )


def plot(curves: dict[int, list[tuple[int, int, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for n, points in sorted(curves.items()):
        axis.plot([p[1] for p in points], [p[2] for p in points], marker="o", label=f"{n} process(es)")
    axis.set_xlabel("real env steps")
    axis.set_ylabel("held-out success")
    axis.set_ylim(0, 1)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.multi_process",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--processes", type=int, default=2, help="processes of the multi-process run")
    parser.add_argument("--experiment", default="learning_check", help="experiment preset of both runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument(
        "--minibatch-size", type=int, default=64, help="rows per optimizer step, over all ranks"
    )
    parser.add_argument(
        "--same-per-rank", action="store_true", help="give each rank --minibatch-size rows instead"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/multi_process"), help="output folder")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for both runs")
    args = parser.parse_args(argv)

    curves, walls = {}, {}
    for processes in (1, args.processes):
        records, walls[processes] = run(processes, args)
        curves[processes] = curve(records)
    print_curves(curves, walls)
    plot(curves, args.out / "multi_process.png")
    print(f"\nfigure: {args.out / 'multi_process.png'}")


if __name__ == "__main__":
    main()
