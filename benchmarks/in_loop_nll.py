"""A finished model-based hidden_number run's world model against the exact answer, on new real turns.

    python -m benchmarks.in_loop_nll RUN_DIR [RUN_DIR ...] --episodes 128 --seed 0

The run's final policy (sampling at the run's temperature, as in training) plays ``--episodes`` fresh
training-split episodes whose seeds are not in the run's trajectory store. The run's final world
model was fitted on the run's real data and has seen none of these turns: they stand for the turns
the next iteration's gate would score. Per turn, teacher-forced on the real history:

- ``nll model``: the world model's NLL of the real next observation, every token and the end token,
  under the distribution it samples from (``benchmarks.world_model.models.teacher_forced``);
- ``nll exact``: the NLL of the same text under the env's exact Bayes predictive
  (``benchmarks.world_model.exact``: only the answer word is uncertain, a refused action's error text
  is certain);
- ``ratio`` = mean model NLL / mean exact NLL: 1 is the best any model can do;
- ``answer ratio``: the same over the answer word alone, on the turns with a valid guess;
- ``nll certain``: the model's NLL of the tokens the exact predictive is sure of (all but a valid
  guess's answer word: the earlier results, the guess, the end), per turn; the exact answer's is 0.

The episodes are a measurement after training, on no run's x-axis. Nothing is trained.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.world_model.exact import exact_distributions
from benchmarks.world_model.models import teacher_forced
from envs import TrajectoryStore, collect
from envs.seeding import derive_seed
from envs.splits import split_seeds
from envs.trajectory import Trajectory
from experiments.reporting import load_run
from experiments.run_layout import saved_model_dir
from experiments.saved_run import find_saved_run, load_policy
from world_model.loading import load_world_model
from world_model.protocol import WorldModelLike

ENV = "hidden_number"


@dataclass(frozen=True)
class NllFigures:
    turns: int
    model_nll: float  # mean over turns of the model's NLL of the real next observation
    exact_nll: float  # mean over turns of the exact predictive's NLL of it
    answer_turns: int  # turns with a valid guess
    model_answer_nll: float  # mean over those of the model's NLL of the answer word
    exact_answer_nll: float
    model_certain_nll: float  # mean over turns of the model's NLL of every other token

    @property
    def ratio(self) -> float:
        return self.model_nll / self.exact_nll if self.exact_nll > 0 else math.nan

    @property
    def answer_ratio(self) -> float:
        return self.model_answer_nll / self.exact_answer_nll if self.exact_answer_nll > 0 else math.nan


def nll_figures(model_nll: Sequence[float], exact_nll: Sequence[float], answer_turn: Sequence[bool],
                model_answer_nll: Sequence[float]) -> NllFigures:
    """The means above from per-turn NLLs. ``answer_turn[i]``: turn ``i`` was a valid guess, whose
    uncertainty is all in its answer word, so its exact NLL is the answer word's too;
    ``model_answer_nll[i]`` is read only on those turns."""
    if not (len(model_nll) == len(exact_nll) == len(answer_turn) == len(model_answer_nll)) or not model_nll:
        raise ValueError("need one model NLL, exact NLL, answer flag and answer NLL per turn, and at least one turn")
    answers = [i for i, valid in enumerate(answer_turn) if valid]
    return NllFigures(
        turns=len(model_nll), model_nll=statistics.fmean(model_nll), exact_nll=statistics.fmean(exact_nll),
        answer_turns=len(answers),
        model_answer_nll=statistics.fmean([model_answer_nll[i] for i in answers]) if answers else math.nan,
        exact_answer_nll=statistics.fmean([exact_nll[i] for i in answers]) if answers else math.nan,
        model_certain_nll=statistics.fmean([total - (answer if valid else 0.0) for total, answer, valid
                                            in zip(model_nll, model_answer_nll, answer_turn, strict=True)]),
    )


def fresh_seeds(env_kwargs: dict, stored: set[int], count: int, seed: int) -> list[int]:
    """``count`` training-split seeds that no stored trajectory started from."""
    drawn = split_seeds(ENV, env_kwargs, "train", seed=derive_seed(seed, "in-loop-nll"), count=count + len(stored))
    fresh = [s for s in drawn if s not in stored][:count]
    if len(fresh) < count:  # cannot happen: at most len(stored) of the distinct draws are stored
        raise RuntimeError(f"found {len(fresh)} fresh seeds of {count}")
    return fresh


def measure_run(run_dir: Path, *, episodes: int, seed: int) -> tuple[int, NllFigures]:
    """The run's real env steps and its world model's figures on ``episodes`` fresh episodes."""
    saved = find_saved_run(run_dir)
    if saved.env.name != ENV:
        raise ValueError(f"{run_dir}: a {saved.env.name} run; the exact answer is known for {ENV} only")
    env_kwargs = saved.env_kwargs
    stored = {t.seed for t in TrajectoryStore(run_dir / "trajectories").load()}
    policy = load_policy(saved, greedy=False, seed=seed)
    world_model = load_world_model(saved_model_dir(run_dir, "world_model")).eval()
    fresh = collect(policy, ENV, env_kwargs=env_kwargs, group_size=1,
                    group_seeds=fresh_seeds(env_kwargs, stored, episodes, seed), max_turns=saved.max_turns,
                    progress=False)
    return load_run(run_dir).real_env_steps or 0, figures_of(world_model, fresh, env_kwargs)


def figures_of(world_model: WorldModelLike, trajectories: list[Trajectory], env_kwargs: dict) -> NllFigures:
    """Teacher-forced NLLs of ``world_model`` on ``trajectories`` against the exact predictive."""
    trajectories = [t for t in trajectories if t.turns]
    turns = [turn for t in trajectories for turn in t.turns]
    _, logps, _, _ = teacher_forced(world_model, trajectories)  # per turn (tokens,) log-probs
    exact = exact_distributions(ENV, env_kwargs, trajectories)
    answered = [len(d) > 1 for d in exact]  # a refused action's one certain text; a guess's three answers
    return nll_figures([-float(lp.sum()) for lp in logps],
                       [-math.log(d[turn.next_observation]) for d, turn in zip(exact, turns, strict=True)],
                       answered, [-float(lp[-2]) for lp in logps])  # the answer word, before the end token


def table(rows: dict[str, tuple[int, NllFigures]]) -> str:
    lines = ["| run | real steps | turns | nll model | nll exact | ratio | answer turns | answer ratio | nll certain |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, (steps, f) in rows.items():
        lines.append(f"| {name} | {steps:,} | {f.turns} | {f.model_nll:.4f} | {f.exact_nll:.4f} | {f.ratio:.3f} | "
                     f"{f.answer_turns} | {f.answer_ratio:.3f} | {f.model_certain_nll:.4f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished model-based hidden_number run folders")
    parser.add_argument("--episodes", type=int, default=128, help="fresh episodes per run")
    parser.add_argument("--seed", type=int, default=0, help="draws the fresh seeds and the policy's samples")
    args = parser.parse_args(argv)
    rows = {run.name: measure_run(run, episodes=args.episodes, seed=args.seed) for run in args.runs}
    print(table(rows))


if __name__ == "__main__":
    main()
