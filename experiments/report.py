"""Summarise one training run or a whole sweep: a figure and a table, best configuration first.

    python -m experiments.report multirun/2026-12-01/10-00-00
    python -m experiments.report outputs/2026-12-01/10-00-00_hidden_number_grpo_s0 --target 0.5
    python -m experiments.report benchmarks/baselines --out /tmp/report --ignore trainer.time_budget_s

Every folder at or below DIR holding ``metrics.jsonl`` is a run. Runs whose overrides differ only in
``seed`` are seeds of one configuration, labelled by the overrides that differ between
configurations. Writes ``report.png`` (held-out success against real env steps, mean over seeds with
a band of one standard deviation, plus world-model exact-match and imagined-minus-real return-gap
panels when any run logged them) and ``report.md`` (the summary table, every run with its status, its
ledger of env steps and each configuration's overrides), prints the table and the two paths. Real
steps to the target: every run is read on one grid of real-step marks (``--marks``, by default the
runs' ``trainer.eval_every_steps``), and a run reaches the target at the first mark from which its
success stays at or above it for the next two marks (``docs/reading_the_report.md`` says why);
with several seeds, their geometric mean and its 95% interval (a t interval of the mean log steps,
exponentiated: never negative). Failed runs are listed but left out of the statistics.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from experiments.reporting.intervals import TOO_FEW
from experiments.reporting.plot import plot_report
from experiments.reporting.runs import SEED_KEY, Run, configurations, load_runs
from experiments.reporting.table import (
    common_marks,
    format_table,
    ledger_table,
    overrides_table,
    run_table,
    summary_rows,
)

DEFAULT_TARGET = 0.8


class NoRunsError(ValueError):
    """The folder (or list) holds no run: nothing to report."""


def write_report(source: str | Path | Sequence[Run], out_dir: str | Path | None = None,
                 target: float = DEFAULT_TARGET, *, name: str = "report",
                 ignore: Iterable[str] = (SEED_KEY,), echo: bool = False, at: Sequence[float] = (),
                 max_steps: float | None = None, marks: float | None = None,
                 names: Callable[[Run], str | None] | None = None) -> tuple[Path, Path]:
    """Write ``<out_dir>/<name>.png`` and ``<out_dir>/<name>.md`` and return their paths.

    ``source`` is a folder (every run at or below it) or runs from ``load_runs``; ``out_dir`` defaults
    to the folder and is required with a list. ``ignore`` are the override keys that do not make a
    configuration (the seed, plus e.g. a time budget). ``echo`` prints the summary table and the two
    paths. ``at``: budgets of real env steps, each a column of the seeds' success after it (for runs of
    different lengths, compared at equal cost); ``max_steps`` ends the figure's x-axis. ``marks``: the
    real-step grid of the steps to target (default ``common_marks``). ``names``: a run's configuration
    name (e.g. a benchmark's method), used instead of the differing overrides when it gives one. Raises
    NoRunsError when there is no run."""
    if isinstance(source, (str, Path)):
        root = Path(source)
        runs = load_runs(root)
        if not runs:
            if not root.is_dir():
                raise NoRunsError(f"{root} is not a folder")
            raise NoRunsError(f"no run folder (a folder with metrics.jsonl) at or below {root}")
        out = Path(out_dir) if out_dir is not None else root
    else:
        runs = list(source)
        if not runs:
            raise NoRunsError("no runs to report")
        if out_dir is None:
            raise ValueError("write_report needs out_dir when given a list of runs")
        out = Path(out_dir)
    if not 0.0 <= target <= 1.0:
        raise ValueError(f"target is a success rate in [0, 1], got {target}")
    if any(not budget > 0 for budget in at) or (max_steps is not None and not max_steps > 0):
        raise ValueError(f"--at budgets and --max-steps are real env steps > 0, got {list(at)} and {max_steps}")

    configs = configurations(runs, ignore, names=names)
    marks = marks if marks is not None else common_marks(runs)
    if marks is not None and not marks > 0:
        raise ValueError(f"--marks is a spacing of real env steps > 0, got {marks}")
    rows = summary_rows(configs, target, at, marks=marks)
    order = [row.label for row in rows]
    out.mkdir(parents=True, exist_ok=True)
    png = plot_report(configs, out / f"{name}.png", target, order=order, max_steps=max_steps)
    table = format_table(rows, target)
    md = out / f"{name}.md"
    md.write_text("\n".join([
        f"# Run report: {len(runs)} run{'s' if len(runs) != 1 else ''}, {len(configs)} "
        f"configuration{'s' if len(configs) != 1 else ''}", "",
        f"Best first. Real env steps to reach held-out success {target:g}: "
        + (f"on the grid of marks every {marks:,.0f} real env steps (each mark read at the first evaluation at "
           "or after it), " if marks else "on each run's own evaluations (no common mark grid: no run set "
           "trainer.eval_every_steps), ")
        + "the first mark from which success stays at or above the target for the next two marks; geometric mean "
        "over seeds with its 95% interval in brackets (a t interval of the mean log steps, exponentiated); "
        f"`{TOO_FEW}` with one seed; `not reached (k/n)` when only k of n seeds did. Final success, wall time and CPU time (the "
        "run process's, over the same span as its wall time) per run: mean ± sample standard deviation. Success at a budget: each seed's last evaluation at or before that many "
        "real env steps, over the seeds that spent it (`(k/n)` when only k of n did). Seeds: runs in the "
        "statistics; failed runs are left out of them, counted in brackets, and listed below.", "",
        table, "", f"![success against real env steps]({png.name})", "", "## Runs", "",
        run_table({label: configs[label] for label in order}, target, relative_to=out, marks=marks), "",
        "## Ledger of env steps", "",
        "Per run: real env steps (the x-axis), the warm start's expert steps (behaviour cloning) and the "
        "steps of its success checks (episodes that decide when cloning stops; `-` when unknown), the real "
        "steps the world model was fitted on (RL steps; expert steps when it was also fitted on the warm "
        "start's episodes), the real steps in the critic's updates, and the held-out evaluations' steps, "
        "which train nothing and are counted apart.", "",
        ledger_table({label: configs[label] for label in order}), "",
        "## Overrides", "", overrides_table({label: configs[label] for label in order}, ignore), "",
    ]), encoding="utf-8")
    if echo:
        print(table)
        print(f"\nplot: {png}\ntable: {md}")
    return png, md


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path, metavar="DIR",
                        help="one run folder, or a sweep / benchmark folder holding run folders at any depth")
    parser.add_argument("--target", type=float, default=DEFAULT_TARGET,
                        help="held-out success rate whose first crossing is reported in real env steps "
                             f"(default {DEFAULT_TARGET})")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for report.png and report.md (default: DIR itself)")
    parser.add_argument("--ignore", nargs="+", default=[], metavar="KEY",
                        help="override keys that, like seed, do not make a configuration of their own "
                             "(e.g. trainer.time_budget_s)")
    parser.add_argument("--at", nargs="+", type=float, default=[], metavar="STEPS",
                        help="budgets of real env steps: a column per budget with each configuration's "
                             "success after it (e.g. --at 10000 20000)")
    parser.add_argument("--marks", type=float, default=None, metavar="STEPS",
                        help="spacing of the real-step marks the steps to target are read on (default: the "
                             "runs' trainer.eval_every_steps, the largest if they differ)")
    parser.add_argument("--max-steps", type=float, default=None, metavar="STEPS",
                        help="end the figure's x-axis at this many real env steps")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        write_report(args.dir, args.out, args.target, ignore=(SEED_KEY, *args.ignore), echo=True, at=args.at,
                     max_steps=args.max_steps, marks=args.marks)
    except NoRunsError as error:
        print(f"experiments.report: {error}", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"experiments.report: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
