"""Evaluate an agent on held-out env seeds: success, return, length, invalid actions; which seeds; transcripts.

Held-out seeds come from ``envs.split_seeds(..., "eval")``: a range disjoint from every training
seed, and (for envs with observable tasks) only tasks that training never draws. A run evaluates on
``training_eval_seeds`` while it trains; ``fresh_eval_seeds`` draws other held-out seeds for
judging a saved run afterwards.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envs.agent import Agent
from envs.collect import collect
from envs.seeding import derive_seed
from envs.splits import split_seeds
from envs.trajectory import Trajectory


@dataclass
class Evaluation:
    success_rate: float
    episodic_return: float
    episode_length: float
    invalid_action_rate: float
    env_steps: int

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {
            f"{prefix}/success_rate": self.success_rate,
            f"{prefix}/episodic_return": self.episodic_return,
            f"{prefix}/episode_length": self.episode_length,
            f"{prefix}/invalid_action_rate": self.invalid_action_rate,
        }


def summarise(trajectories: list[Trajectory]) -> Evaluation:
    """Success, mean return, mean length and invalid-action rate of a set of episodes."""
    n = max(len(trajectories), 1)
    turns = [turn for traj in trajectories for turn in traj.turns]
    return Evaluation(
        success_rate=sum(t.success for t in trajectories) / n,
        episodic_return=sum(t.episode_return for t in trajectories) / n,
        episode_length=len(turns) / n,
        invalid_action_rate=sum(not turn.valid for turn in turns) / max(len(turns), 1),
        env_steps=len(turns),
    )


def play(
    agent: Agent,
    env_name: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    seeds: Sequence[int],
    max_turns: int | None = None,
    progress: bool = False,
) -> list[Trajectory]:
    """One independent episode (a group of one) per env seed in ``seeds``, in the order of ``seeds``."""
    return collect(
        agent,
        env_name,
        env_kwargs=env_kwargs,
        group_size=1,
        group_seeds=list(seeds),
        max_turns=max_turns,
        progress=progress,
    )


def evaluate(
    agent: Agent,
    env_name: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    seeds: Sequence[int],
    max_turns: int | None = None,
    progress: bool = False,
) -> Evaluation:
    """``summarise`` of one episode per env seed in ``seeds``."""
    return summarise(play(agent, env_name, env_kwargs, seeds=seeds, max_turns=max_turns, progress=progress))


def training_eval_seeds(
    env_name: str, env_kwargs: Mapping[str, Any] | None, run_seed: int, count: int
) -> list[int]:
    """The held-out env seeds a training run with seed ``run_seed`` evaluates on, the same every time."""
    return split_seeds(env_name, env_kwargs, "eval", seed=derive_seed(run_seed, "eval"), count=count)


def fresh_eval_seeds(
    env_name: str,
    env_kwargs: Mapping[str, Any] | None,
    seed: int,
    count: int,
    exclude: Collection[int] = (),
) -> list[int]:
    """``count`` held-out env seeds drawn from ``seed``'s own stream, none of them in ``exclude``
    (e.g. the seeds a run evaluated on while training, so a final check is not made on the tasks
    that picked its checkpoints). Deterministic in the arguments."""
    excluded = set(exclude)
    # Drawing len(excluded) extra candidates leaves at least ``count`` after removing them.
    candidates = split_seeds(
        env_name, env_kwargs, "eval", seed=derive_seed(seed, "fresh-eval"), count=count + len(excluded)
    )
    return [s for s in candidates if s not in excluded][:count]


def render_transcript(trajectory: Trajectory) -> str:
    """An episode as text: a header (seed, return, success), then each observation and ``> action``
    (marked when the env refused it as malformed), then the last observation."""
    lines = [f"seed {trajectory.seed} return {trajectory.episode_return:.2f} success {trajectory.success}"]
    for turn in trajectory.turns:
        lines += [turn.observation, f"> {turn.action}" + ("" if turn.valid else "   [invalid action]")]
    if trajectory.turns:
        lines.append(trajectory.turns[-1].next_observation)
    return "\n".join(lines)
