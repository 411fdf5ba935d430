"""`make run`'s table in the README and docs/make_run.md, written from the run's records, not by hand.

    make run                                                  # ends with: table: multirun/<date>/<time>/report.md
    python -m benchmarks.make_run_table multirun/<date>/<time> --note "a quiet 2-core machine"
    python -m benchmarks.make_run_table                       # the two tables again from docs/make_run.json

Given the sweep folder of a finished ``make run``, it copies every finished run's record (overrides,
config, summary, evaluations: ``experiments/reporting/archive.py``) into ``docs/make_run/``, replacing
the records there, reads them back as the report does (``experiments.report``: the same target, the
same marks, success at 1k, 2k and 3k real steps), writes the figures and the printed table to
``docs/make_run.json`` and the sweep's ``report.png`` to ``docs/make_run.png``. Then, and on its own
without a folder, it writes the table of ``docs/make_run.json`` between the
``<!-- make-run-table:start -->`` and ``<!-- make-run-table:end -->`` lines of ``README.md`` and of
``docs/make_run.md``, with the sentence that says which commit printed it. ``tests/benchmarks/test_make_run_table.py``
checks the two tables against each other, against the summary's figures and those against the records.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from envs.strict_json import strict_dumps
from experiments.reporting.archive import archive_finished
from experiments.reporting.runs import configurations, load_runs
from experiments.reporting.table import common_marks, format_table, summary_rows

REPO = Path(__file__).resolve().parents[1]
SUMMARY = Path("docs/make_run.json")
RECORDS = Path("docs/make_run")
PLOT = Path("docs/make_run.png")
PAGES = (Path("README.md"), Path("docs/make_run.md"))
START, END = "<!-- make-run-table:start -->", "<!-- make-run-table:end -->"
COMMAND = "OMP_NUM_THREADS=1 .venv/bin/python -m experiments.train -m experiment=quick"
TARGET = 0.8  # the sweep_end callback's default, as make run prints it
AT = (1000.0, 2000.0, 3000.0)  # experiment=quick's hydra.callbacks.sweep_end.at


def build_summary(records: Path, *, commit: str, date: str, note: str, root: Path = REPO) -> dict:
    """The figures of the runs under ``records`` (one configuration per arm) and the table the report
    prints for them: per configuration its runs' folders (relative to ``root``), steps to the target,
    success at each of ``AT``, final success, wall and CPU seconds, one value per seed."""
    runs = load_runs(records)
    if not runs:
        raise ValueError(f"no finished run under {records}")
    configs = configurations(runs)
    rows = summary_rows(configs, TARGET, AT, marks=common_marks(runs))
    arms = []
    for row in rows:
        counted = [run for run in configs[row.label] if run.status != "failed"]
        arms.append({
            "label": row.label,
            "runs": [run.path.resolve().relative_to(root.resolve()).as_posix() for run in counted],
            "steps_to_target": row.steps,
            "success_at": {f"{budget:.0f}": list(values) for budget, values in row.at_budget},
            "final_success": [run.final_success for run in counted],
            "wall_s": [run.wall_s for run in counted],
            "cpu_s": [run.cpu_s for run in counted],
        })
    return {"command": COMMAND, "commit": commit, "date": date, "note": note, "target": TARGET,
            "at": list(AT), "marks": common_marks(runs), "configurations": arms,
            "table": format_table(rows, TARGET)}


def provenance(summary: dict, page: Path) -> str:
    """The sentence above the table: which commit printed it, when, where, and where its figures are."""
    link = "make_run.json" if page.parent.name == "docs" else "docs/make_run.json"
    note = f", {summary['note']}" if summary["note"] else ""
    return (f"What `make run` printed on commit `{summary['commit']}`, {summary['date']}{note} "
            f"([{Path(link).name}]({link}), from the records in `docs/make_run/`; "
            "`python -m benchmarks.make_run_table` writes this table):")


def replace_block(text: str, block: str, page: Path) -> str:
    """``text`` with the lines between the start and end markers replaced by ``block``."""
    pattern = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.DOTALL)
    if len(pattern.findall(text)) != 1:
        raise ValueError(f"{page}: needs exactly one {START} ... {END} block")
    return pattern.sub(lambda _: f"{START}\n{block}\n{END}", text)


def write_tables(summary: dict, root: Path = REPO) -> list[Path]:
    """Write ``summary``'s table, with its provenance, into each of ``PAGES`` under ``root``."""
    written = []
    for page in PAGES:
        path = root / page
        block = f"{provenance(summary, page)}\n\n{summary['table']}"
        path.write_text(replace_block(path.read_text(encoding="utf-8"), block, page), encoding="utf-8")
        written.append(path)
    return written


def record_sweep(sweep: Path, *, commit: str, date: str, note: str, root: Path = REPO) -> dict:
    """Copy ``sweep``'s finished runs to ``RECORDS`` and its plot to ``PLOT``, and write ``SUMMARY``."""
    records = root / RECORDS
    if records.exists() and records.resolve() != sweep.resolve():  # the committed records again: kept as they are
        shutil.rmtree(records)  # the records of one make run, never a mix of two
    if not archive_finished(sweep, records):
        raise ValueError(f"no finished run (a folder with metrics.jsonl and a done marker) under {sweep}")
    summary = build_summary(records, commit=commit, date=date, note=note, root=root)
    if (sweep / "report.png").is_file():
        shutil.copyfile(sweep / "report.png", root / PLOT)
    (root / SUMMARY).write_text(strict_dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def head_commit(root: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def sweep_date(sweep: Path) -> str:
    """``multirun/<date>/<time>``'s date, else today's."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", sweep.resolve().parent.name):
        return sweep.resolve().parent.name
    return datetime.date.today().isoformat()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.make_run_table", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, nargs="?", default=None,
                        help="the sweep folder make run printed (multirun/<date>/<time>); without it, only "
                             "the tables are written again from docs/make_run.json")
    parser.add_argument("--commit", default=None, help="the commit that ran (default: this checkout's HEAD)")
    parser.add_argument("--date", default=None, help="when it ran (default: the sweep folder's date)")
    parser.add_argument("--note", default="", help="how it ran, e.g. 'seed 0, a quiet 2-core machine'")
    parser.add_argument("--root", type=Path, default=REPO, help=argparse.SUPPRESS)  # tests write elsewhere
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = args.root
    if args.sweep is not None:
        summary = record_sweep(args.sweep, commit=args.commit or head_commit(root),
                               date=args.date or sweep_date(args.sweep), note=args.note, root=root)
    else:
        summary = json.loads((root / SUMMARY).read_text(encoding="utf-8"))
    for path in write_tables(summary, root):
        print(f"wrote the table into {path}")
    print(summary["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
