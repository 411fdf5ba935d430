"""How often the world model is refitted, and how much is imagined per real step, against real steps
and CPU: the headline's model-based arm on hidden_number_10 with its refits on a sparser clock or with
fewer imagined groups per update, beside the same arm as the headline ran it and the headline's
model-free arms.

    python -m benchmarks.refit_schedule          # the committed records: docs/refit_schedule, docs/headline
    python -m benchmarks.refit_schedule --records DIR --headline DIR --target 0.8
    python -m benchmarks.refit_schedule --commands --seeds 0 1 2   # the runs' commands, to run them again

The arms (``ARMS``) are the headline's ``mb_grpo_r0.9`` (``sample_efficiency.MODEL_BASED`` at ratio 0.9:
a 40-step refit every other iteration, about every 39 real steps at this ratio) with the plain fit loop,
and either a refit clock keyed to new real data or half as many imagined groups per update for the
same real ones (4 groups at ratio 0.8 against 8 at 0.9: 0.8 real groups per iteration either way, so
the refit clock and the real data per refit stay as they are). One run per arm and seed, ``experiments.train
experiment=hidden_number_10 seed=S algo=grpo <MODEL_BASED> imagination.ratio=0.9 <arm's overrides>
trainer.max_env_steps=15000 trainer.iterations=100000`` (``--commands`` prints them), stopped once its
held crossing of the target was decided (the hold needs the next two marks) or at 15k real steps.

Printed per arm: real steps to the target per seed (the report's held rule on 1,000-step marks) with
the geometric mean and its 95% interval, the RL loop's CPU per real step and per run to the target, and
each against the headline's model-free arms. CPU is the loop's: for the headline's records
``summary.json``'s ``cpu_seconds``, for a run stopped early the sum of its iterations' phase CPU
(``time/phase/*_cpu_s``, which add up to the iteration); both leave the warm start out. CPU to the target
is scaled linearly in real steps as ``experiments.reporting.thresholds`` does for every arm.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from benchmarks.sample_efficiency import MODEL_BASED
from experiments.reporting.intervals import geometric_mean, interval_text, log_t_interval
from experiments.reporting.runs import Run, load_run, read_records
from experiments.reporting.thresholds import at_threshold

ARMS: dict[str, tuple[str, list[str]]] = {
    "today": ("refit every other iteration (today's clock)", ["imagination.fit_loop=plain"]),
    "c100": ("refit every 100 real steps", ["imagination.fit_loop=plain", "imagination.refit_every_steps=100"]),
    "c100_holdout": ("refit every 100 real steps, early stop", [
        "imagination.fit_loop=plain", "imagination.refit_every_steps=100", "imagination.fit_holdout=0.25"]),
    "c200": ("refit every 200 real steps", ["imagination.fit_loop=plain", "imagination.refit_every_steps=200"]),
    "c400_holdout": ("refit every 400 real steps, early stop", [
        "imagination.fit_loop=plain", "imagination.refit_every_steps=400", "imagination.fit_holdout=0.25"]),
    # Later overrides win in Hydra, so this ratio replaces the arm's 0.9.
    "g4_r0.8": ("half the imagined groups (4 groups per update at ratio 0.8)", [
        "imagination.fit_loop=plain", "trainer.groups_per_iteration=4", "imagination.ratio=0.8"]),
}
"""Arm folder name -> its label and its overrides on the headline's ``mb_grpo_r0.9``; a run's record is
in ``<records>/arm=<folder name>,seed=<S>``. ``today`` is that arm rerun on the current code (the plain
fit loop gives the Lightning loop's weights bit for bit, for less CPU); the others change its clock or
its imagined groups per real one."""
TODAY = "mb_grpo_r0.9"  # the headline's model-based arm: a refit every other iteration
MODEL_FREE = ("grpo", "gigpo", "hgpo", "hgpo_base_group", "ppo_turn", "grpo_small_batch", "grpo_matched_updates",
              "grpo_reuse")
PLAIN_MODEL_FREE = ("grpo", "gigpo", "hgpo", "hgpo_base_group", "ppo_turn")  # the per-real-step CPU reference
MARKS = 1000.0
BUDGET = 15_000  # real steps: the headline's model-based budget on this env
PHASE_CPU = ("time/phase/", "_cpu_s")


def phase_cpu_seconds(records: Iterable[Mapping[str, object]]) -> float:
    """The loop's CPU seconds in ``records``: the sum of every ``time/phase/<phase>_cpu_s`` value."""
    return sum(float(value) for record in records for key, value in record.items()
               if key.startswith(PHASE_CPU[0]) and key.endswith(PHASE_CPU[1]))


def with_loop_cpu(run: Run) -> Run:
    """``run`` with its loop CPU: ``summary.json``'s when it has one, else its phases' sum."""
    if run.cpu_s is not None:
        return run
    return dataclasses.replace(run, cpu_s=phase_cpu_seconds(read_records(run.path / "metrics.jsonl")) or None)


@dataclasses.dataclass(frozen=True)
class ArmFigures:
    seeds: dict[int, float | None]  # seed -> real steps to the target (None: not held)
    cpu_to_target: dict[int, float | None]  # seed -> loop CPU seconds to the target
    cpu_per_step_s: float  # loop CPU over real steps, all seeds pooled

    @property
    def held_cpu(self) -> list[float]:
        """The loop CPU seconds to the target of the seeds that held it, in seed order."""
        return [v for v in self.cpu_to_target.values() if v is not None]

    @property
    def mean_cpu_to_target(self) -> float | None:
        """Their mean; None when no seed held it."""
        return sum(self.held_cpu) / len(self.held_cpu) if self.held_cpu else None


def arm_figures(runs: Sequence[Run], target: float) -> ArmFigures:
    seeds, cpu = {}, {}
    for run in sorted(runs, key=lambda r: r.seed if r.seed is not None else -1):
        reached = at_threshold(run, target, MARKS)
        seeds[run.seed], cpu[run.seed] = reached.steps, reached.cpu_s
    total_cpu = sum(r.cpu_s for r in runs if r.cpu_s is not None)
    total_steps = sum(r.real_env_steps or 0 for r in runs if r.cpu_s is not None)
    return ArmFigures(seeds, cpu, total_cpu / total_steps if total_steps else math.nan)


def steps_text(figures: ArmFigures) -> tuple[str, str]:
    per_seed = ", ".join("-" if s is None else f"{s:,.0f}" for s in figures.seeds.values())
    held = [s for s in figures.seeds.values() if s is not None]
    if len(held) < len(figures.seeds):
        return per_seed, f"not held on {len(figures.seeds) - len(held)} of {len(figures.seeds)}"
    return per_seed, f"{geometric_mean(held):,.0f} {interval_text(log_t_interval(held))}"


def cpu_to_target_text(figures: ArmFigures) -> str:
    mean = figures.mean_cpu_to_target
    return "-" if mean is None else f"{mean / 60:.1f} min ({len(figures.held_cpu)} held)"


def table(arms: Mapping[str, ArmFigures], model_free_ms: float, best_mf_cpu_s: float | None) -> str:
    lines = ["| arm | real steps to target, per seed | geometric mean [95%] | loop CPU ms / real step | "
             "x model-free | loop CPU to target, mean | x best model-free |",
             "|---|---|---|---:|---:|---|---:|"]
    for label, figures in arms.items():
        per_seed, mean = steps_text(figures)
        mean_cpu = figures.mean_cpu_to_target
        versus = "-" if mean_cpu is None or not best_mf_cpu_s else f"{mean_cpu / best_mf_cpu_s:.1f}x"
        lines.append(f"| {label} | {per_seed} | {mean} | {1000 * figures.cpu_per_step_s:.1f} | "
                     f"{1000 * figures.cpu_per_step_s / model_free_ms:.1f}x | {cpu_to_target_text(figures)} | {versus} |")
    return "\n".join(lines)


def runs_in(folder: Path, key: str) -> dict[str, list[Run]]:
    """``folder``'s run records grouped by the value of ``key`` in their folder names (``key=v,seed=s``)."""
    groups: dict[str, list[Run]] = {}
    for path in sorted(p.parent for p in folder.glob("*/metrics.jsonl")):
        named = dict(item.split("=", 1) for item in path.name.split(",") if "=" in item)
        if key in named:
            groups.setdefault(named[key], []).append(with_loop_cpu(load_run(path)))
    return groups


def best_by_cpu_to_target(arms: Mapping[str, ArmFigures]) -> tuple[float, str] | None:
    """The mean CPU seconds to the target and the name of the arm with the least, among the arms that
    held it on every seed; None when none did."""
    candidates = [(f.mean_cpu_to_target, name) for name, f in arms.items()
                  if f.held_cpu and len(f.held_cpu) == len(f.cpu_to_target)]
    return min(candidates) if candidates else None


def commands(seeds: Sequence[int], records: Path) -> list[str]:
    """The ``experiments.train`` command of every arm and seed, its record in ``records``."""
    return [" ".join(["python -m experiments.train experiment=hidden_number_10", f"seed={seed}", "algo=grpo",
                      *MODEL_BASED, "imagination.ratio=0.9", *overrides, f"trainer.max_env_steps={BUDGET}",
                      "trainer.iterations=100000", "trainer.progress=false",
                      f"'hydra.run.dir=\"{records}/arm={folder},seed={seed}\"'"])  # quoted: '=' and ','
            for folder, (_, overrides) in ARMS.items() for seed in seeds]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=Path("docs/refit_schedule"))
    parser.add_argument("--headline", type=Path, default=Path("docs/headline/hidden_number_10"))
    parser.add_argument("--target", type=float, default=0.8)
    parser.add_argument("--commands", action="store_true", help="print the runs' commands and stop")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="with --commands")
    args = parser.parse_args(argv)
    if args.commands:
        print("\n".join(commands(args.seeds, args.records)))
        return
    headline = runs_in(args.headline, "method")
    ours = runs_in(args.records, "arm")
    model_free = {m: arm_figures(headline[m], args.target) for m in MODEL_FREE if m in headline}
    pooled_mf = [r for m in PLAIN_MODEL_FREE if m in headline for r in headline[m]]
    model_free_ms = 1000 * sum(r.cpu_s for r in pooled_mf) / sum(r.real_env_steps for r in pooled_mf)
    best_mf = best_by_cpu_to_target(model_free)
    arms = {}
    if TODAY in headline:
        arms[f"{TODAY} (the headline's records, older code)"] = arm_figures(headline[TODAY], args.target)
    for folder, (label, _) in ARMS.items():
        if folder in ours:
            arms[label] = arm_figures(ours[folder], args.target)
    arms.update({f"{m} (model-free)": f for m, f in model_free.items()})
    print(f"hidden_number_10, target {args.target}, held on {MARKS:,.0f}-step marks; model-free loop CPU "
          f"{model_free_ms:.1f} ms per real step ({', '.join(PLAIN_MODEL_FREE)} pooled)")
    if best_mf is not None:
        print(f"best model-free arm by loop CPU to the target (every seed held): {best_mf[1]}, "
              f"{best_mf[0] / 60:.1f} min")
    print()
    print(table(arms, model_free_ms, best_mf[0] if best_mf else None))


if __name__ == "__main__":
    main()
