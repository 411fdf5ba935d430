"""Read finished (or running) training runs and summarise them: ``runs`` finds and loads run folders
and groups seeds into configurations, ``curves`` holds the pure statistics, ``table`` the summary
rows and their text, ``plot`` the figure. ``experiments/report.py`` is the command line."""

from experiments.reporting.curves import (
    MeanCurve,
    mark_curve,
    mean_and_std,
    mean_curve,
    steps_to_held_target,
    steps_to_target,
    t_interval,
    value_at,
    value_at_budget,
)
from experiments.reporting.runs import (
    Run,
    configuration_labels,
    configurations,
    find_run_dirs,
    load_run,
    load_runs,
)
from experiments.reporting.table import SummaryRow, format_table, run_table, summary_rows

__all__ = [
    "MeanCurve", "Run", "SummaryRow", "configuration_labels", "configurations", "find_run_dirs", "format_table",
    "load_run", "load_runs", "mark_curve", "mean_and_std", "mean_curve", "run_table", "steps_to_held_target",
    "steps_to_target", "summary_rows", "t_interval", "value_at", "value_at_budget",
]
