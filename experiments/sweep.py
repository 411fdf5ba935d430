"""A sweep's job folders and how a sweep ends.

Job folders are named by the job's overrides (``job_dirname``, the ``reverie_job_dir`` resolver of
``conf/train.yaml``): ``experiment=ablate_ratio,imagination.ratio=0.9,seed=1``. ``conf/train.yaml``
also registers ``SweepEnd`` as a Hydra callback, so every ``python -m experiments.train -m ...``
finishes with:

1. the report's table (``experiments.report``; with ``hydra.callbacks.sweep_end.at``, a column of
   success after each of those budgets of real env steps), written as ``report.png`` and
   ``report.md`` in the sweep folder;
2. the TensorBoard command for the whole sweep;
3. one line per job that did not finish, with the file holding its traceback; the command then
   exits with status 1.

Jobs catch their own errors in a multirun (``experiments.markers.run_job``), so Hydra's launcher
runs every job; the verdicts are read back from the ``done`` / ``failed`` markers on disk, which
works for any launcher, local or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from experiments.markers import DONE, FAILED

NO_MARKER = "no marker"  # killed, or still running elsewhere, before it could leave a verdict
MAX_DIRNAME = 160  # file names stop at 255 bytes; a dozen fixed overrides would pass that
RESOLVER = "reverie_job_dir"


def job_dirname(override_dirname: str, job_num: int, max_length: int = MAX_DIRNAME) -> str:
    """Hydra's ``override_dirname`` (``key=value`` pairs, sorted by key, joined by commas) when it
    fits in ``max_length`` characters; otherwise the whole pairs that fit (or as much of the first
    pair as fits, if none does), then ``...,job=<num>`` to keep the folder unique (the full
    overrides stay in the job's ``.hydra/overrides.yaml``)."""
    if len(override_dirname) <= max_length:
        return override_dirname
    suffix = f"...,job={job_num}"
    kept = override_dirname[: max_length - len(suffix)]
    kept = kept[: kept.rfind(",") + 1] if "," in kept else kept  # cut between pairs, not inside one
    return kept + suffix


def register_resolvers() -> None:
    """Make ``${reverie_job_dir:${hydra.job.override_dirname},${hydra.job.num}}`` resolvable."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, lambda name, num: job_dirname(str(name), int(num)))


# Hydra imports this module to build the SweepEnd callback of conf/train.yaml, before it names any
# job folder.
register_resolvers()


@dataclass(frozen=True)
class JobOutcome:
    path: Path
    status: str  # DONE | FAILED | NO_MARKER


def job_outcomes(sweep_dir: str | Path) -> list[JobOutcome]:
    """Every job folder at or below ``sweep_dir`` (one holding Hydra's ``.hydra/``), sorted by path,
    with its verdict: the newer marker if both are there (a job rerun in its folder)."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        return []
    outcomes = []
    for hydra_dir in sorted(sweep_dir.rglob(".hydra")):
        job = hydra_dir.parent
        markers = [(path.stat().st_mtime, name) for name in (DONE, FAILED) if (path := job / name).is_file()]
        outcomes.append(JobOutcome(job, max(markers)[1] if markers else NO_MARKER))
    return outcomes


def format_outcomes(outcomes: list[JobOutcome]) -> str:
    """``N jobs: k done, m failed`` and, for each job that is not done, its folder and traceback."""
    failed = [o for o in outcomes if o.status == FAILED]
    unmarked = [o for o in outcomes if o.status == NO_MARKER]
    head = f"{len(outcomes)} job{'s' if len(outcomes) != 1 else ''}: {len(outcomes) - len(failed) - len(unmarked)} done"
    head += f", {len(failed)} failed" + (f", {len(unmarked)} without a marker" if unmarked else "")
    lines = [head]
    lines += [f"  FAILED {o.path}\n         traceback: {o.path / FAILED}" for o in failed]
    lines += [f"  NO MARKER {o.path} (killed before it finished?)" for o in unmarked]
    return "\n".join(lines)


class SweepEnd(Callback):
    """Hydra callback: report, TensorBoard path and failed jobs once every job of a sweep ran."""

    def __init__(self, target: float = 0.8, report: bool = True, at: list[float] | None = None) -> None:
        self.target = target
        self.report = report
        self.at = [float(budget) for budget in at or []]  # budgets of real env steps: success after each

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        outcomes = job_outcomes(sweep_dir)
        print(f"\n=== sweep finished: {sweep_dir} ===", flush=True)
        if self.report:
            from experiments.report import write_report  # matplotlib only when a sweep ends

            try:
                write_report(sweep_dir, target=self.target, echo=True, at=self.at)
            except Exception as error:  # a report problem must not hide the jobs' verdicts
                print(f"no report: {error}")
        print(f"TensorBoard: tensorboard --logdir {sweep_dir}")
        print(format_outcomes(outcomes), flush=True)
        if any(o.status != DONE for o in outcomes):
            raise SystemExit(1)
