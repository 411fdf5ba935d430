"""Model bias of a finished model-based run: imagined against real return, same policy, same branch states.

    python -m benchmarks.imagination_gap RUN_DIR [RUN_DIR ...] --branches 64 --rollouts 16

The gap a run logs while it trains (``imagination/return_gap``) holds each imagined continuation
against the one real continuation recorded in the store, which an older policy played (branch
points come from the last ``imagination.recent_trajectories`` real episodes). As the policy
improves, that gap grows even with a perfect world model. This script separates the two: from
``--branches`` branch points of the run's newest real episodes (drawn as the run drew them), the
run's final policy plays ``--rollouts`` episodes in the real env (its state rebuilt by replaying the
prefix, as ``envs.collect`` does for branches) and as many in the run's final world model (the
run's imagination settings). Per branch ``b``, with mean imagined return ``I_b``, mean real return
``R_b`` and recorded return ``r_b`` after the branch point:

- ``model gap`` = mean of ``I_b - R_b``: the world model's bias for this policy, with a 95% interval
  over branches (normal approximation);
- ``logged-style gap`` = mean of ``I_b - r_b``: what the run's own metric measures;
- ``policy lag`` = mean of ``R_b - r_b``: how much better the final policy does than the recorded
  one; the logged-style gap is exactly the sum of the other two.

The real rollouts are a measurement after training: they are not counted on any run's x-axis.
Writes ``imagination_gap.png`` (the three, per run) and ``.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from envs import TrajectoryStore, collect
from experiments.run_layout import saved_model_dir
from experiments.saved_run import RUN_CONFIG, SavedRunError, find_saved_run, load_policy
from imagination.bias import return_after
from imagination.branching import sample_branch_points
from imagination.config import ImaginationConfig
from imagination.imagine import imagine_groups
from world_model.loading import load_world_model

Z_95 = 1.96


@dataclass(frozen=True)
class GapStatistics:
    branches: int
    real_return: float  # mean over branches of R_b
    imagined_return: float  # mean of I_b
    recorded_return: float  # mean of r_b
    model_gap: float  # mean of I_b - R_b
    model_gap_half_width: float  # 95% interval half-width of model_gap over branches
    logged_gap: float  # mean of I_b - r_b
    policy_lag: float  # mean of R_b - r_b


def gap_statistics(
    real: Sequence[Sequence[float]], imagined: Sequence[Sequence[float]], recorded: Sequence[float]
) -> GapStatistics:
    """The figures above from per-branch returns: ``real[b]`` and ``imagined[b]`` are the returns
    after branch ``b`` of its real and imagined rollouts, ``recorded[b]`` the stored episode's."""
    if not (len(real) == len(imagined) == len(recorded)) or not real:
        raise ValueError(f"need one entry per branch on each side, got {len(real)}, {len(imagined)}, {len(recorded)}")
    if any(not rollouts for rollouts in (*real, *imagined)):
        raise ValueError("every branch needs at least one real and one imagined rollout")
    real_means = [statistics.fmean(r) for r in real]
    imagined_means = [statistics.fmean(i) for i in imagined]
    gaps = [i - r for i, r in zip(imagined_means, real_means, strict=True)]
    spread = statistics.stdev(gaps) if len(gaps) > 1 else float("nan")
    return GapStatistics(
        branches=len(real),
        real_return=statistics.fmean(real_means),
        imagined_return=statistics.fmean(imagined_means),
        recorded_return=statistics.fmean(recorded),
        model_gap=statistics.fmean(gaps),
        model_gap_half_width=Z_95 * spread / math.sqrt(len(gaps)),
        logged_gap=statistics.fmean(i - r for i, r in zip(imagined_means, recorded, strict=True)),
        policy_lag=statistics.fmean(r - old for r, old in zip(real_means, recorded, strict=True)),
    )


def run_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` cannot be measured, or None: a finished model-based run folder holds a saved
    policy, its config, its final world model and its trajectory store."""
    try:
        find_saved_run(run_dir)
    except SavedRunError as error:
        return str(error)
    world_model = saved_model_dir(run_dir, "world_model")
    for folder, what in ((world_model, "a saved world model (only model-based runs have one)"),
                         (run_dir / "trajectories", "a trajectory store")):
        if not folder.is_dir():
            name = folder.relative_to(run_dir).as_posix()
            return f"no {name}/ folder: not a finished model-based run folder, which holds {what}"
    return None


def measure_run(run_dir: Path, *, branches: int, rollouts: int, seed: int) -> GapStatistics:
    """Roll the run's final policy from branch points of its newest real episodes, real and imagined."""
    saved = find_saved_run(run_dir)
    run_config = OmegaConf.load(run_dir / RUN_CONFIG)
    imagination = ImaginationConfig(**OmegaConf.to_container(run_config.imagination, resolve=True))
    policy = load_policy(saved, greedy=False, seed=seed)  # sampling at the run's temperature, as in training
    world_model = load_world_model(saved_model_dir(run_dir, "world_model")).eval()
    recent = TrajectoryStore(run_dir / "trajectories").newest(imagination.recent_trajectories, source="real")
    points = sample_branch_points(recent, branches, start_share=imagination.start_share, rng=random.Random(seed))
    env_name, env_kwargs = saved.env.name, saved.env_kwargs
    real = collect(policy, env_name, env_kwargs=env_kwargs, group_size=rollouts, branches=points,
                   max_turns=saved.max_turns, progress=False)
    dreamed = imagine_groups(policy, world_model, env_name, env_kwargs, points, group_size=rollouts,
                             config=imagination, seed=seed, max_turns=saved.max_turns)
    return gap_statistics(
        [[return_after(t, k) for t in real[b * rollouts:(b + 1) * rollouts]] for b, (_, k) in enumerate(points)],
        [[return_after(t, k) for t in group] for group, (_, k) in zip(dreamed.groups, points, strict=True)],
        [return_after(trajectory, k) for trajectory, k in points],
    )


def table(rows: dict[str, GapStatistics]) -> str:
    lines = ["| run | branches | real (final policy) | imagined | model gap (95% CI) | recorded | logged-style gap "
             "| policy lag |", "|---|---|---|---|---|---|---|---|"]
    for name, s in rows.items():
        lines.append(f"| {name} | {s.branches} | {s.real_return:.3f} | {s.imagined_return:.3f} | "
                     f"{s.model_gap:+.3f} ± {s.model_gap_half_width:.3f} | {s.recorded_return:.3f} | "
                     f"{s.logged_gap:+.3f} | {s.policy_lag:+.3f} |")
    return "\n".join(lines)


def plot(rows: dict[str, GapStatistics], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    x = range(len(names))
    width = 0.27
    figure, axes = plt.subplots(figsize=(max(5.0, 1.6 * len(names) + 2), 3.8))
    axes.bar([i - width for i in x], [rows[n].model_gap for n in names], width,
             yerr=[rows[n].model_gap_half_width for n in names], capsize=3, label="model gap (same policy)")
    axes.bar(list(x), [rows[n].logged_gap for n in names], width, label="logged-style gap (recorded episode)")
    axes.bar([i + width for i in x], [rows[n].policy_lag for n in names], width, label="policy lag")
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.set_xticks(list(x), names, rotation=15, ha="right", fontsize=8)
    axes.set_ylabel("return difference after the branch point")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.imagination_gap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="finished model-based run folders")
    parser.add_argument("--branches", type=int, default=64, help="branch points per run")
    parser.add_argument("--rollouts", type=int, default=16, help="real and imagined rollouts per branch point")
    parser.add_argument("--seed", type=int, default=0, help="seeds the branch draw, the policy and the world model")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/imagination_gap"), help="output folder")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.branches < 2 or args.rollouts < 1:
        raise SystemExit("--branches must be >= 2 (for an interval) and --rollouts >= 1")
    for run_dir in args.runs:  # every folder checked before the first one is measured
        problem = run_problem(run_dir)
        if problem:
            raise SystemExit(f"{run_dir}: {problem}")
    rows = {}
    for run_dir in args.runs:
        name = run_dir.name if run_dir.parent.name in ("", ".") else f"{run_dir.parent.name}/{run_dir.name}"
        print(f"  {name}: {args.branches} branch points x {args.rollouts} rollouts, real and imagined", flush=True)
        rows[name] = measure_run(run_dir, branches=args.branches, rollouts=args.rollouts, seed=args.seed)
    text = table(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "imagination_gap.md").write_text(text + "\n")
    plot(rows, args.out / "imagination_gap.png")
    print(text)
    print(f"\ntable: {args.out / 'imagination_gap.md'}\nplot: {args.out / 'imagination_gap.png'}")


if __name__ == "__main__":
    main()
