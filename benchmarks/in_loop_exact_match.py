"""How soon a run's own world model gets the next observation right: its one-step exact match on each
iteration's new real turns (``wm/one_step_exact_match``, the gate's score, taken before the model is
fitted on those turns), averaged over bins of real env steps, with the loop's CPU over the same window.

    python -m benchmarks.in_loop_exact_match RUN_DIR [RUN_DIR ...] --bin 1000 --until 3000 --target 0.9

Per run, one row: the mean exact match of the iterations whose real steps (after their collection) fall
in each bin ``(lo, hi]``, the first real-step mark from which every bin's mean is at least ``--target``
(the issue-style "right from 2k on"), and the loop's CPU per real step up to ``--until``: the phases'
CPU (``time/phase/*_cpu_s``, the warm start left out) of the iterations within the window over the real
steps they reached. Only the window is read, so a run longer than ``--until`` is cut there.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.refit_schedule import phase_cpu_seconds
from experiments.reporting.runs import load_run, read_records

EXACT_MATCH = "wm/one_step_exact_match"
STEPS = "charts/real_env_steps"


def binned_means(series: Sequence[tuple[int, float]], width: int, until: int) -> list[float | None]:
    """The mean of ``series``' values over each bin ``(k * width, (k + 1) * width]`` up to ``until``;
    None for a bin with no value. ``series``: ``(real steps, value)`` pairs."""
    if width < 1 or until < width:
        raise ValueError(f"binned_means: need 1 <= width <= until, got width={width}, until={until}")
    bins: list[list[float]] = [[] for _ in range(math.ceil(until / width))]
    for steps, value in series:
        if 0 < steps <= until:
            bins[(steps - 1) // width].append(value)
    return [sum(b) / len(b) if b else None for b in bins]


def held_from(means: Sequence[float | None], width: int, target: float) -> int | None:
    """The real-step mark ``k * width`` from which every bin's mean is at least ``target`` (an empty bin
    breaks the run); None when the last bin is not."""
    start = None
    for index, mean in enumerate(means):
        if mean is None or mean < target:
            start = None
        elif start is None:
            start = index
    return None if start is None else start * width


def window_cpu_ms_per_step(records: Sequence[Mapping[str, object]], until: int) -> float | None:
    """The loop's CPU milliseconds per real step over the iterations whose real steps are at most
    ``until``: their phases' CPU over the largest real-step count among them; None without any, or
    without phase times (an archived record keeps only the evaluations and ``SERIES``)."""
    inside = [r for r in records if isinstance(r.get(STEPS), (int, float)) and 0 < r[STEPS] <= until]
    steps, cpu_s = max((r[STEPS] for r in inside), default=0), phase_cpu_seconds(inside)
    return 1000 * cpu_s / steps if steps and cpu_s else None


def row(run_dir: Path, width: int, until: int, target: float) -> list[str]:
    run = load_run(run_dir)
    means = binned_means(run.series.get(EXACT_MATCH, []), width, until)
    cpu = window_cpu_ms_per_step(read_records(run_dir / "metrics.jsonl"), until)
    mark = held_from(means, width, target)
    return [run_dir.name, *("-" if m is None else f"{m:.2f}" for m in means),
            "-" if mark is None else f"{mark:,}", "-" if cpu is None else f"{cpu:.0f}"]


def table(run_dirs: Sequence[Path], width: int, until: int, target: float) -> str:
    bins = [f"{k * width / 1000:g}-{min((k + 1) * width, until) / 1000:g}k" for k in range(math.ceil(until / width))]
    header = ["run", *bins, f">= {target:g} from", "loop CPU ms / real step"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(row(d, width, until, target)) + " |" for d in run_dirs]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (each with metrics.jsonl)")
    parser.add_argument("--bin", type=int, default=1000, help="bin width in real env steps")
    parser.add_argument("--until", type=int, default=3000, help="the window's end in real env steps")
    parser.add_argument("--target", type=float, default=0.9)
    args = parser.parse_args(argv)
    missing = [str(d) for d in args.runs if not (d / "metrics.jsonl").is_file()]
    if missing:
        parser.error(f"no metrics.jsonl in: {', '.join(missing)}")
    print(f"mean one-step exact match on each iteration's new real turns, per {args.bin:,} real steps")
    print(table(args.runs, args.bin, args.until, args.target))


if __name__ == "__main__":
    main()
