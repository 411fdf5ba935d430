"""The headline at several success thresholds: one table per env, a row per threshold, with each
arm's real steps and CPU time to it, the paired per-seed ratio of real steps with its 95% interval,
and the same ratio with each run's warm-start steps counted (``experiments/reporting/thresholds.py``).

At each threshold the two arms are the best model-based one and the best model-free method or
control by the report's order at that threshold (``sample_efficiency.best``), so the model-free arm
may differ from row to row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from benchmarks.sample_efficiency import REPORT_IGNORE, best, method_name
from experiments.reporting import Run, configurations, summary_rows
from experiments.reporting.intervals import (
    TOO_FEW,
    geometric_mean,
    interval_text,
    log_t_interval,
    paired_log_ratio,
)
from experiments.reporting.table import common_marks, duration_unit
from experiments.reporting.thresholds import AtThreshold, at_threshold, seed_pairs

THRESHOLDS = (0.6, 0.7, 0.8, 0.9)

BySeed = Mapping[int | None, AtThreshold]


@dataclass(frozen=True)
class ThresholdRow:
    threshold: float
    mb_label: str
    mf_label: str
    mb: BySeed  # the model-based arm's runs (that did not fail) at the threshold, by seed
    mf: BySeed


def threshold_rows(runs: Sequence[Run], thresholds: Sequence[float] = THRESHOLDS) -> list[ThresholdRow]:
    """A row per threshold with the best arm of each side at it, read on the runs' common mark grid;
    thresholds where either side has no run are left out."""
    configs = configurations(runs, REPORT_IGNORE, names=method_name)
    marks = common_marks(runs)
    found = []
    for threshold in thresholds:
        rows = summary_rows(configs, threshold, marks=marks)
        mb, mf = best(rows, True), best(rows, False)
        if mb is None or mf is None:
            continue
        found.append(ThresholdRow(threshold, mb.label, mf.label, *(
            {run.seed: at_threshold(run, threshold, marks) for run in configs[row.label] if run.status != "failed"}
            for row in (mb, mf))))
    return found


def steps_text(value: float) -> str:
    return f"{value:,.0f}"


def duration_text(value: float) -> str:
    unit, scale, fmt = duration_unit(value)
    return f"{fmt.format(value / scale)} {unit}"


def duration_interval_text(mean: float, interval: tuple[float, float] | None) -> str:
    """``12.3 min [5.1, 29.6]``: the bounds in the mean's unit."""
    unit, scale, fmt = duration_unit(mean)
    bounds = None if interval is None else (interval[0] / scale, interval[1] / scale)
    return f"{fmt.format(mean / scale)} {unit} {interval_text(bounds, fmt)}"


def arm_text(values: Sequence[float | None], fmt: Callable[[float], str] = steps_text,
             interval: Callable[[float, tuple[float, float] | None], str] | None = None) -> str:
    """One arm's values over its seeds (None: a seed that did not hold the threshold): the geometric
    mean and its 95% interval when every seed held it; otherwise ``k/n seeds held`` and the values of
    those that did, in seed order."""
    held = [value for value in values if value is not None]
    if not values:
        return "-"
    if len(held) < len(values):
        return f"{len(held)}/{len(values)} seeds held" + (f": {' and '.join(fmt(v) for v in held)}" if held else "")
    if len(held) < 2 or any(not v > 0 for v in held):
        return f"{fmt(held[0])} ({TOO_FEW})" if len(held) == 1 else " and ".join(fmt(v) for v in held)
    mean, bounds = geometric_mean(held), log_t_interval(held)
    return interval(mean, bounds) if interval else f"{fmt(mean)} {interval_text(bounds)}"


def ratio_text(mb: Mapping[int | None, float | None], mf: Mapping[int | None, float | None]) -> str:
    """How many times fewer the model-based values are, seed by seed: the geometric mean of mf / mb
    over the seeds both arms held and its 95% interval (``log_t_interval`` of the per-seed ratios),
    with ``(k/n seeds held)`` when only k of the n seeds both arms ran are in it."""
    pairs = seed_pairs(mb, mf)
    if not pairs.seeds:
        return f"0/{pairs.total} seeds held" if pairs.total else "-"
    paired = paired_log_ratio(pairs.a, pairs.b)  # seed_pairs keeps only values > 0
    notes = [f"{paired.pairs}/{pairs.total} seeds held"] if paired.pairs < pairs.total else []
    bounds = paired.interval
    if bounds is None:
        notes.append(TOO_FEW)
    text = f"{paired.ratio:.1f}x" + (f" {interval_text(bounds, '{:.1f}')}" if bounds else "")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def per_seed_text(mb: Mapping[int | None, float | None], mf: Mapping[int | None, float | None]) -> str:
    """mf / mb on each seed both arms ran, ascending, ``-`` where either did not hold it."""
    pairs = seed_pairs(mb, mf)
    by_seed = dict(zip(pairs.seeds, pairs.ratios, strict=True))
    common = sorted(seed for seed in mb if seed is not None and seed in mf)
    return ", ".join(f"{by_seed[seed]:.1f}" if seed in by_seed else "-" for seed in common) or "-"


def field(arm: BySeed, name: str) -> dict[int | None, float | None]:
    return {seed: getattr(value, name) for seed, value in arm.items()}


def arm_cells(arm: BySeed) -> tuple[str, str]:
    """An arm's real steps and CPU time to the threshold; ``CPU not recorded`` when a seed that held it
    has no CPU time."""
    steps = [value.steps for value in arm.values()]
    if any(value.steps is not None and value.cpu_s is None for value in arm.values()):
        return arm_text(steps), "CPU not recorded"
    return arm_text(steps), arm_text([value.cpu_s for value in arm.values()], duration_text, duration_interval_text)


def thresholds_table(rows: Sequence[ThresholdRow]) -> str:
    """The rows as Markdown."""
    header = ["threshold", "model-based arm", "best model-free arm", "model-based: real steps", "model-based: CPU",
              "model-free: real steps", "model-free: CPU", "ratio [95%]", "per seed", "ratio, warm start counted [95%]"]
    lines = [header, ["---"] * len(header)]
    for row in rows:
        arms = [cell for arm in (row.mb, row.mf) for cell in arm_cells(arm)]
        steps = field(row.mb, "steps"), field(row.mf, "steps")
        counted = field(row.mb, "counted"), field(row.mf, "counted")
        lines.append([f"{row.threshold:g}", row.mb_label, row.mf_label, *arms, ratio_text(*steps),
                      per_seed_text(*steps), ratio_text(*counted)])
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


THRESHOLDS_NOTE = (
    "At each threshold the arms are the best model-based one and the best model-free method or control by the "
    "report's order at that threshold (every seed held it, fewest real steps; then the share of seeds that held it; "
    "then final success), so the model-free arm can change from row to row. Real steps: the held rule on the same "
    "marks as above, the geometric mean over seeds and its 95% interval (`k/n seeds held` and their steps when not "
    "every seed held it). CPU: the run's process CPU time at the evaluation read for that mark, interpolated "
    "linearly in real steps from the run's total (the records keep the CPU time only in total; the warm start is "
    "not in it). Ratio: model-free over model-based real steps, seed by seed on the seeds both arms held it on, "
    "the geometric mean of the per-seed ratios and its 95% t interval on their logs (`k/n seeds held` when some "
    "seed is left out: its ratio is censored, larger when the model-free arm missed, smaller when the model-based "
    "one did). Per seed: that ratio on seeds 0, 1, 2, ..., `-` where either arm did not hold it. Warm start counted: "
    "the same ratio with each run's warm-start expert steps and success-check steps (its ledger) added to its "
    "steps to the threshold. Code: `benchmarks/headline_thresholds.py`, `experiments/reporting/thresholds.py`.")
