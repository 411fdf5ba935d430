"""One run at a success threshold: its real steps to it, its CPU time to it and its steps counted with
its warm start's; and two arms' values paired seed by seed.

A run reaches a threshold as the report reads it (``table.run_steps_to_target``: on the shared mark
grid, the first mark from which success stays at or above it for the next two marks). At that mark:

- CPU seconds: a run's record keeps its process CPU time only in total (``summary.json``'s
  ``cpu_seconds``, RL only: the warm start is not in it) and the wall clock per record, whose CPU
  share swings with the load of a shared machine (0.34 to 0.99 over the runs of the headline's three envs), so the wall
  clock is no guide to the CPU. The CPU at the evaluation the mark is read at is the total scaled
  linearly in real steps: ``cpu_seconds * eval_steps / real_env_steps`` (a constant CPU cost per
  real step over the run).
- Counted steps: the steps to the threshold plus the run's warm start, the expert steps it cloned
  and the steps of the success checks that decided when cloning stopped (its ledger), so that a
  ratio of counted steps charges both arms for every env step they took before RL too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from experiments.reporting.runs import Run
from experiments.reporting.table import run_steps_to_target

WARM_START_KEYS = ("warm_start_expert_steps", "warm_start_check_steps")  # the ledger's steps before RL


@dataclass(frozen=True)
class AtThreshold:
    steps: float | None  # real steps to the threshold; None: never held
    cpu_s: float | None  # process CPU seconds at the evaluation read for that mark; None: not held or not recorded
    counted: float | None  # steps + warm-start expert and check steps; None: not held or the ledger lacks them


def eval_steps_at(curve: Sequence[tuple[float, float]], mark: float) -> float | None:
    """The real steps of the evaluation a mark is read at (as ``curves.mark_curve`` reads it): the first
    at or after ``mark``; None when the run was not evaluated that far."""
    for steps, _ in curve:
        if steps >= mark:
            return steps
    return None


def cpu_at_steps(cpu_s: float | None, real_env_steps: int | None, steps: float | None) -> float | None:
    """The run's CPU seconds after ``steps`` of its ``real_env_steps``, linear in real steps from its
    total ``cpu_s``; None when any is unknown or the run took no real step. Raises ValueError for
    ``steps`` beyond the run's last real step (no extrapolation)."""
    if cpu_s is None or not real_env_steps or steps is None:
        return None
    if not 0 <= steps <= real_env_steps:
        raise ValueError(f"{steps} real steps lie outside the run's 0 .. {real_env_steps}")
    return cpu_s * steps / real_env_steps


def counted_steps(steps: float | None, ledger: Mapping[str, int | None]) -> float | None:
    """``steps`` plus the ledger's warm-start expert and check steps; None when ``steps`` is None or the
    ledger lacks either (an older run, or a cached warm start whose checks were not counted)."""
    before = [ledger.get(key) for key in WARM_START_KEYS]
    if steps is None or any(value is None for value in before):
        return None
    return steps + sum(before)


def at_threshold(run: Run, threshold: float, marks: float | None) -> AtThreshold:
    """``run``'s real steps, CPU seconds and counted steps to ``threshold`` on the grid ``marks`` apart."""
    steps = run_steps_to_target(run, threshold, marks)
    if steps is None:
        return AtThreshold(None, None, None)
    cpu = cpu_at_steps(run.cpu_s, run.real_env_steps, eval_steps_at(run.curve, steps))
    return AtThreshold(steps, cpu, counted_steps(steps, run.ledger))


@dataclass(frozen=True)
class SeedPairs:
    seeds: list[int]  # the seeds both arms ran and held it on, ascending
    a: list[float]  # arm a's values on those seeds
    b: list[float]  # arm b's values on the same seeds
    total: int  # the seeds both arms ran

    @property
    def ratios(self) -> list[float]:
        """b / a seed by seed."""
        return [y / x for x, y in zip(self.a, self.b, strict=True)]


def seed_pairs(a: Mapping[int | None, float | None], b: Mapping[int | None, float | None]) -> SeedPairs:
    """Two arms' values keyed by seed, paired on the seeds both ran (both arms start from one warm
    start per seed). ``total`` counts those seeds; the pairs keep the ones where both values are > 0
    (None: the arm did not hold it; 0: no ratio). A run whose seed is unknown pairs with nothing."""
    common = sorted(seed for seed in a if seed is not None and seed in b)
    kept = [seed for seed in common if (a[seed] or 0) > 0 and (b[seed] or 0) > 0]
    return SeedPairs(kept, [a[seed] for seed in kept], [b[seed] for seed in kept], len(common))
