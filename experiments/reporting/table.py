"""One summary row per configuration, best first, and the Markdown tables of the report.

Statistics are over a configuration's runs that did not fail (``done`` and ``running``: a running
run counts with what it has logged so far); failed runs are counted apart and listed run by run.
Real steps to the target follow ``run_steps_to_target``: on the mark grid shared by every run
(``marks`` real env steps apart), the first mark from which success stays at or above the target
for the next two marks; with 2+ seeds that all reached it, their geometric mean with its 95% interval
(``intervals.log_t_interval``: never negative, where a t interval of the raw mean can run below 0).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.reporting.curves import (
    held_target_bound,
    mark_curve,
    mean_and_std,
    steps_to_held_target,
    value_at_budget,
)
from experiments.reporting.intervals import TOO_FEW, geometric_mean, interval_text, log_t_interval
from experiments.reporting.runs import Run, differing_overrides


@dataclass(frozen=True)
class SummaryRow:
    label: str
    env: str | None
    seeds: int  # runs that did not fail
    failed: int
    running: int
    steps: list[float | None]  # steps to target per counted seed (None: never reached)
    steps_mean: float | None  # over the seeds that reached the target
    steps_std: float | None
    steps_ci: tuple[float, float] | None  # 95% interval of the geometric mean, when 2+ seeds all reached it
    final_mean: float | None
    final_std: float | None
    wall_mean_s: float | None
    wall_std_s: float | None = None  # sample standard deviation over the seeds; None with one
    # Per budget of real env steps (``--at``): each counted seed's success after it, None for a seed
    # that stopped before spending it.
    at_budget: tuple[tuple[float, tuple[float | None, ...]], ...] = ()
    # Mean over the seeds of wall seconds per real env step (the run's own compute, the env included).
    step_seconds_mean: float | None = None
    # Process CPU seconds over the same span as the wall time, over the seeds that recorded them.
    cpu_mean_s: float | None = None
    cpu_std_s: float | None = None
    cpu_seeds: int = 0  # counted seeds with a CPU time

    @property
    def reached(self) -> int:
        return sum(s is not None for s in self.steps)

    def sort_key(self) -> tuple:
        """Best first: every seed reached the target, by fewest mean steps; then some seeds reached it,
        by the share that did; then none did; ties and the rest by higher final success."""
        final = -(self.final_mean if self.final_mean is not None else -1.0)
        if self.seeds and self.reached == self.seeds:
            return (0, self.steps_mean, final, self.label)
        if self.reached:
            return (1, -self.reached / self.seeds, final, self.label)
        return (2 if self.seeds else 3, 0.0, final, self.label)

    def steps_text(self) -> str:
        if not self.seeds:
            return "-"
        if self.reached < self.seeds:
            return f"not reached ({self.reached}/{self.seeds})"
        if self.steps_ci is None:  # one seed, or a seed at 0 steps (no log scale): the mean, no interval
            return f"{self.steps_mean:,.0f} ({TOO_FEW if len(self.steps) < 2 else 'a seed at 0: no interval'})"
        return f"{geometric_mean(self.steps):,.0f} {interval_text(self.steps_ci)}"

    def final_text(self) -> str:
        return "-" if self.final_mean is None else _pm(self.final_mean, self.final_std, "{:.2f}")

    def wall_text(self) -> str:
        return format_duration(self.wall_mean_s, self.wall_std_s)

    def cpu_text(self) -> str:
        """Like ``wall_text``; ``(k/n)`` when only k of the n counted seeds recorded their CPU time."""
        text = format_duration(self.cpu_mean_s, self.cpu_std_s)
        return text if text == "-" or self.cpu_seeds == self.seeds else f"{text} ({self.cpu_seeds}/{self.seeds})"

    def budget_text(self, values: Sequence[float | None]) -> str:
        """Mean ± spread over the seeds that spent the budget; ``(k/n)`` when only k of n did."""
        spent = [v for v in values if v is not None]
        if not spent:
            return "-"
        text = _pm(*mean_and_std(spent), "{:.2f}")
        return text if len(spent) == len(values) else f"{text} ({len(spent)}/{len(values)})"

    def seeds_text(self) -> str:
        notes = [f"{n} {what}" for n, what in ((self.running, "running"), (self.failed, "failed")) if n]
        return f"{self.seeds}" + (f" ({', '.join(notes)})" if notes else "")


def common_marks(runs: Sequence[Run]) -> int | None:
    """The mark spacing a report reads every run on: the largest ``trainer.eval_every_steps`` among the
    runs (a run evaluated more often is read at its first evaluation after each coarser mark); None
    when no run has one (each run is then read at its own evaluations)."""
    spacings = [r.eval_every_steps for r in runs if r.eval_every_steps]
    return max(spacings) if spacings else None


def run_steps_to_target(run: Run, target: float, marks: float | None) -> float | None:
    """A run's real steps to ``target``: the first mark (``marks`` apart; None: each of its own
    evaluations) from which success stays at or above ``target`` for the next two marks."""
    points = mark_curve(run.curve, marks) if marks else run.curve
    return steps_to_held_target(points, target)


def steps_lower_bound(runs: Sequence[Run], target: float, marks: float | None) -> float | None:
    """A lower bound on a configuration's mean real steps to ``target`` when some of its seeds never
    held it: each such seed counted at ``held_target_bound`` (the earliest mark from which it still
    could), the others at their steps. None when no run counts."""
    counted = [r for r in runs if r.status != "failed"]
    values = []
    for run in counted:
        points = mark_curve(run.curve, marks) if marks else run.curve
        steps = steps_to_held_target(points, target)
        values.append(steps if steps is not None else held_target_bound(points, target))
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summary_rows(configs: Mapping[str, Sequence[Run]], target: float,
                 at: Sequence[float] = (), marks: float | None = None) -> list[SummaryRow]:
    """One row per configuration of ``configurations(runs)``, best first (see ``SummaryRow.sort_key``);
    ``at``: budgets of real env steps at which each seed's success is also kept; ``marks``: the mark
    grid of ``run_steps_to_target``."""
    rows = []
    for label, runs in configs.items():
        counted = [r for r in runs if r.status != "failed"]
        steps = [run_steps_to_target(r, target, marks) for r in counted]
        reached = [s for s in steps if s is not None]
        finals = [r.final_success for r in counted if r.final_success is not None]
        walls = [r.wall_s for r in counted if r.wall_s is not None]
        step_seconds = [r.wall_s / r.real_env_steps for r in counted if r.wall_s is not None and r.real_env_steps]
        steps_mean, steps_std = mean_and_std(reached) if reached else (None, None)
        wall_mean, wall_std = mean_and_std(walls) if walls else (None, None)
        cpus = [r.cpu_s for r in counted if r.cpu_s is not None]
        cpu_mean, cpu_std = mean_and_std(cpus) if cpus else (None, None)
        final_mean, final_std = mean_and_std(finals) if finals else (None, None)
        envs = {r.env for r in runs}
        rows.append(SummaryRow(
            label=label, env=envs.pop() if len(envs) == 1 else None, seeds=len(counted),
            failed=len(runs) - len(counted), running=sum(r.status == "running" for r in counted), steps=steps,
            steps_mean=steps_mean, steps_std=steps_std, final_mean=final_mean,
            steps_ci=log_t_interval(reached) if len(reached) == len(counted) else None, final_std=final_std,
            wall_mean_s=wall_mean, wall_std_s=wall_std, cpu_mean_s=cpu_mean, cpu_std_s=cpu_std, cpu_seeds=len(cpus),
            step_seconds_mean=sum(step_seconds) / len(step_seconds) if step_seconds else None,
            at_budget=tuple((budget, tuple(value_at_budget(r.curve, budget) for r in counted)) for budget in at),
        ))
    return sorted(rows, key=SummaryRow.sort_key)


def format_table(rows: Sequence[SummaryRow], target: float) -> str:
    """The summary as a Markdown table (also readable as plain text), best first."""
    with_env = len({row.env for row in rows}) > 1
    budgets = [budget for budget, _ in rows[0].at_budget] if rows else []
    header = ["configuration", *(["env"] if with_env else []), f"real steps to {target:g}",
              *(f"success at {budget:,.0f}" for budget in budgets), "final success", "wall time", "CPU time",
              "seeds"]
    lines = [header]
    for row in rows:
        lines.append([row.label, *([row.env or "-"] if with_env else []), row.steps_text(),
                      *(row.budget_text(values) for _, values in row.at_budget), row.final_text(),
                      row.wall_text(), row.cpu_text(), row.seeds_text()])
    return _markdown(lines)


def run_table(configs: Mapping[str, Sequence[Run]], target: float, relative_to: Path | None = None,
              marks: float | None = None) -> str:
    """Every run, configuration by configuration: seed, status, steps to target, final success,
    real env steps, wall and CPU time and folder (relative to ``relative_to`` when given)."""
    lines = [["configuration", "seed", "status", f"steps to {target:g}", "final success", "real env steps",
              "wall time", "CPU time", "folder"]]
    for label, runs in configs.items():
        for run in runs:
            steps = run_steps_to_target(run, target, marks)
            folder = os.path.relpath(run.path, relative_to) if relative_to else str(run.path)
            lines.append([
                label, "-" if run.seed is None else str(run.seed), run.status,
                "not reached" if steps is None else f"{steps:,.0f}",
                "-" if run.final_success is None else f"{run.final_success:.2f}",
                "-" if run.real_env_steps is None else f"{run.real_env_steps:,}",
                format_duration(run.wall_s), format_duration(run.cpu_s), folder,
            ])
    return _markdown(lines)


def format_duration(seconds: float | None, spread: float | None = None) -> str:
    """``45 s``, ``2.5 min``, ``1.2 h``; with ``spread``, both in the unit of ``seconds``: ``2.5 ± 0.4 min``."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    unit, scale, fmt = duration_unit(seconds)
    if spread is None or not math.isfinite(spread):
        return f"{fmt.format(seconds / scale)} {unit}"
    return f"{fmt.format(seconds / scale)} ± {fmt.format(spread / scale)} {unit}"


def duration_unit(seconds: float) -> tuple[str, float, str]:
    """The unit ``format_duration`` writes ``seconds`` in: its name, its seconds and the number format."""
    return ("s", 1, "{:.0f}") if seconds < 120 else ("min", 60, "{:.1f}") if seconds < 7200 else ("h", 3600, "{:.1f}")


def _pm(mean: float, std: float | None, fmt: str) -> str:
    return fmt.format(mean) if std is None else f"{fmt.format(mean)} ± {fmt.format(std)}"


def _markdown(lines: list[list[str]]) -> str:
    cells = [[cell.replace("|", "\\|") for cell in line] for line in lines]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]

    def render(line: list[str]) -> str:
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([render(cells[0]), rule, *(render(line) for line in cells[1:])])


LEDGER_COLUMNS = (
    # (summary.json ledger key, column)
    ("real_env_steps", "real env steps (x-axis)"),
    ("warm_start_expert_steps", "warm-start expert steps"),
    ("warm_start_check_steps", "warm-start check steps"),
    ("world_model_real_steps", "world model fitted on: real"),
    ("world_model_expert_steps", "world model fitted on: expert"),
    ("critic_real_steps", "critic fitted on: real"),
    ("eval_env_steps", "evaluation steps (apart)"),
    ("evaluations", "evaluations"),
)


IMPORTED_COLUMNS = (
    # the steps of the saved models a run started from (world_model.init, critic.init)
    ("imported_world_model_real_steps", "imported world model: real"),
    ("imported_world_model_expert_steps", "imported world model: expert"),
    ("imported_critic_real_steps", "imported critic: real"),
    ("imported_critic_expert_steps", "imported critic: expert"),
)


def ledger_table(configs: Mapping[str, Sequence[Run]]) -> str:
    """Every run's ledger of env steps (``experiments/ledger.py``): the x-axis, the expert steps of its
    warm start and of the warm start's success checks, the real steps its world model and critic were
    fitted on, and its evaluation steps; when any run started from saved models, their steps too.
    ``-`` where a run has no such entry (an older run) or it is unknown (None: a warm start loaded
    from a cache folder that predates the count)."""
    every = [run for runs in configs.values() for run in runs]
    imported = any(run.ledger.get(key) for run in every for key, _ in IMPORTED_COLUMNS)
    columns = (*LEDGER_COLUMNS, *(IMPORTED_COLUMNS if imported else ()))
    lines = [["configuration", "seed", *(column for _, column in columns)]]
    for label, runs in configs.items():
        for run in runs:
            cells = [run.ledger.get(key) for key, _ in columns]
            lines.append([label, "-" if run.seed is None else str(run.seed),
                          *("-" if value is None else f"{value:,}" for value in cells)])
    return _markdown(lines)


def overrides_table(configs: Mapping[str, Sequence[Run]], ignore: Sequence[str]) -> str:
    """The key to the labels: the overrides every configuration shares, once, then each
    configuration's env and full overrides (a label shows only some of those that differ)."""
    keys = {label: runs[0].config_key(ignore) for label, runs in configs.items()}
    _, shared = differing_overrides([dict(key) for key in keys.values()])
    lines = [["configuration", "env", "overrides"]]
    for label, runs in configs.items():
        lines.append([label, runs[0].env or "-", " ".join(f"{k}={v}" for k, v in keys[label]) or "-"])
    common = " ".join(f"`{k}={v}`" for k, v in shared.items()) or "none"
    return f"Shared by every configuration: {common}.\n\n" + _markdown(lines)
