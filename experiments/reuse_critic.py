"""Reusing a saved latent critic outside Reverie's learner: best-of-N action choice by one-step lookahead.

    python -m experiments.reuse_critic --fit [--out outputs/reuse_critic] [--episodes 200]
    python -m experiments.reuse_critic --critic DIR --world-model DIR [--episodes 200]

The agent here is not Reverie's learner: a base agent proposes ``--candidates`` N actions per turn
(``RandomCandidates``: N uniformly random well-formed actions). Two agents use the same proposals:

- ``first``: takes the first candidate, i.e. plays the base agent alone;
- ``lookahead``: imagines each candidate's outcome ``--samples`` times with a saved ``WorldModel``
  (``step`` from the latent of the real history), values each imagined next state with a saved
  ``LatentCritic`` (``value`` on the chat history plus the candidate and its imagined result), and
  keeps the candidate with the highest mean of ``r + gamma * (1 - p_done) * V(s')`` (``r`` and
  ``p_done``: the world model's predicted reward and done probability; ties go to the earlier
  candidate). ``--gamma 0`` ranks by the predicted reward alone, without the critic.

Both are played on the same ``--episodes`` eval-split seeds (``envs.splits``, never used to fit) and
the success rates are printed with standard errors, plus the paired difference. With ``--ablation``
the world-model-only ranking (gamma 0) is played too, to show what the critic adds.

``--fit`` (or no folders given) first fits both models on train-split seeds and saves them with
``save_pretrained`` under ``--out`` (``models/world_model/`` and ``models/critic/``: no folder named like a
package where Python may be started), then loads them back:

- the world model (``fit_world_model``) on ``--train-episodes`` episodes of the agent mix of
  ``envs.mixed_agents`` (random, expert, noisy expert), for coverage;
- the latent critic (``critic.fit``, Monte-Carlo returns with ``--gamma``) on ``--critic-episodes``
  episodes of ``NoisyExpertAgent`` alone (expert or random, half and half, per turn). A critic of
  the mix reads from a history who is playing (an expert opens with ``guess(8)``) and values that,
  and the random base agent's own values hardly depend on what it has learned; the noisy
  expert's returns do depend on what the history pins down, which is what the lookahead ranks. The evaluation reads the models only
through ``LatentCritic.from_pretrained`` and ``WorldModel.from_pretrained``, as any outside program
would; no Hydra. The env options must be those the models were fitted with (``--env`` picks them).
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from critic import LatentCritic, LatentCriticConfig
from critic.config import LatentCriticSection
from critic.fit import fit_turn_critic, history_states, lambda_returns
from envs.agent import AgentView
from envs.collect import collect
from envs.mixed_agents import NoisyExpertAgent, collect_mix
from envs.splits import split_seeds
from envs.strict_json import strict_dumps
from envs.trajectory import Trajectory
from experiments.run_layout import model_dir
from world_model import WorldModel, WorldModelConfig
from world_model.lightning_module import fit_world_model
from world_model.loading import load_world_model
from world_model.protocol import WorldModelLike, WorldStateLike, concat_states
from world_model.turn_tokens import TurnTokenizer

ENVS: dict[str, dict[str, Any]] = {
    "hidden_number": {},  # n 16, 6 turns, the last tool result as observation
    "frozen_lake": {"size": 4, "is_slippery": False},
}


# --- the agents ----------------------------------------------------------------------------------
class RandomCandidates:
    """Proposes ``n`` uniformly random well-formed actions per view (``env.random_action``), from its own RNG."""

    def __init__(self, n: int, seed: int = 0) -> None:
        if n < 1:
            raise ValueError(f"need at least one candidate, got {n}")
        self.n = n
        self.rng = random.Random(seed)

    def propose(self, views: Sequence[AgentView]) -> list[list[str]]:
        return [[view.env.random_action(self.rng) for _ in range(self.n)] for view in views]


class Proposer(Protocol):
    def propose(self, views: Sequence[AgentView]) -> list[list[str]]: ...


class FirstCandidateAgent:
    """The base agent alone: the first of its proposals."""

    def __init__(self, proposer: Proposer) -> None:
        self.proposer = proposer

    def act(self, views: Sequence[AgentView]) -> list[str]:
        return [candidates[0] for candidates in self.proposer.propose(views)]


def messages(view: AgentView) -> list[dict[str, str]]:
    """The chat history the view's agent has seen: first observation, then action / result per turn."""
    first = view.turns[0].observation if view.turns else view.observation
    history = [{"role": "user", "content": first}]
    for turn in view.turns:
        history += [{"role": "assistant", "content": turn.action}, {"role": "tool", "content": turn.next_observation}]
    return history


def world_states(world_model: WorldModelLike, views: Sequence[AgentView]) -> WorldStateLike:
    """The world model's state after each view's real history (``initial_state``, then ``observe`` per turn)."""
    rows_of: list[tuple[int, int] | None] = [None] * len(views)  # view -> (length group, row in it)
    by_length: dict[int, list[int]] = {}
    for i, view in enumerate(views):
        by_length.setdefault(len(view.turns), []).append(i)
    folded = {}
    for length, rows in by_length.items():
        state = world_model.initial_state([messages(views[i])[0]["content"] for i in rows])
        for j in range(length):
            turns = [views[i].turns[j] for i in rows]
            state = world_model.observe(state, [t.action for t in turns], [t.next_observation for t in turns])
        folded[length] = state
        for r, i in enumerate(rows):
            rows_of[i] = (length, r)
    return concat_states([folded[length].select([r]) for length, r in rows_of])  # B rows, in view order


def lookahead_scores(
    rewards: torch.Tensor, done_probability: torch.Tensor, values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """``(B, N)`` mean over samples of ``r + gamma * (1 - p_done) * V(s')``, from ``(B, N, S)`` inputs."""
    if not rewards.shape == done_probability.shape == values.shape or rewards.dim() != 3:
        raise ValueError(f"expected equal (B, N, S) shapes, got {rewards.shape}, {done_probability.shape}, {values.shape}")
    return (rewards + gamma * (1.0 - done_probability) * values).mean(dim=-1)  # (B, N)


def choose(scores: torch.Tensor) -> list[int]:
    """Per row of ``(B, N)`` scores, the index of the highest; the earliest one on ties."""
    return scores.argmax(dim=-1).tolist()  # torch.argmax returns the first maximal index


class LookaheadAgent:
    """Best of the proposer's candidates by one imagined step in ``world_model``, valued by ``critic``.

    ``world_model`` needs ``initial_state`` / ``observe`` / ``step``; ``critic`` needs ``value`` on
    chat histories: a ``WorldModel`` and a ``LatentCritic``, or anything answering the same calls.
    Each candidate's outcome is drawn ``samples`` times from ``generator`` (seeded with ``seed``).
    """

    def __init__(self, proposer: Proposer, world_model, critic, *, gamma: float = 0.95, samples: int = 4,
                 seed: int = 0) -> None:
        if samples < 1:
            raise ValueError(f"need at least one sample per candidate, got {samples}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.proposer, self.world_model, self.critic = proposer, world_model, critic
        self.gamma, self.samples = gamma, samples
        self.generator = torch.Generator().manual_seed(seed)

    def scores(self, views: Sequence[AgentView], candidates: Sequence[Sequence[str]]) -> torch.Tensor:
        """``(B, N)`` lookahead scores of each view's candidates (all views must have N of them)."""
        n, s = len(candidates[0]), self.samples
        if any(len(c) != n for c in candidates):
            raise ValueError("every view needs the same number of candidates")
        states = world_states(self.world_model, views)
        rows = [b for b in range(len(views)) for _ in range(n * s)]  # (B * N * S,) the view of each row
        actions = [candidates[b][c] for b in range(len(views)) for c in range(n) for _ in range(s)]
        _, predicted = self.world_model.step(states.select(rows), actions, generator=self.generator)
        shape = (len(views), n, s)
        if self.gamma > 0:
            histories = [
                messages(views[b]) + [{"role": "assistant", "content": action}, {"role": "tool", "content": result}]
                for b, action, result in zip(rows, actions, predicted.observations, strict=True)
            ]
            values = self.critic.value(histories).float().reshape(shape)
        else:  # the critic would be multiplied by 0: skip it
            values = torch.zeros(shape)
        return lookahead_scores(predicted.reward.float().cpu().reshape(shape),
                                predicted.done_probability.float().cpu().reshape(shape), values, self.gamma)

    def act(self, views: Sequence[AgentView]) -> list[str]:
        candidates = self.proposer.propose(views)
        picks = choose(self.scores(views, candidates))
        return [c[i] for c, i in zip(candidates, picks, strict=True)]


# --- fitting and saving ----------------------------------------------------------------------------
def fit_and_save(
    out: Path,
    env: str = "hidden_number",
    *,
    train_episodes: int = 600,
    critic_episodes: int = 1000,
    wm_steps: int = 600,
    critic_steps: int = 1500,
    gamma: float = 0.95,
    latent_size: int = 128,
    members: int = 3,
    seed: int = 0,
    log=print,
) -> tuple[Path, Path]:
    """Fit a world model and a latent critic on train-split episodes (see the module docstring); save them
    under ``out``; return their folders."""
    kwargs = ENVS[env]
    train: list[Trajectory] = collect_mix(env, kwargs, "train", train_episodes, seed=seed)
    log(f"fitting on {len(train)} train-split episodes ({sum(t.num_turns for t in train)} turns) of {env} {kwargs}")
    tokenizer = TurnTokenizer.for_env(env, kwargs)
    world_model = WorldModel(
        WorldModelConfig.for_tokenizer(tokenizer, latent_size=latent_size, num_members=members), tokenizer, seed=seed
    )
    start = time.monotonic()
    metrics = fit_world_model(train, [], world_model, max_steps=wm_steps, batch_size=32, lr=1e-3, seed=seed)
    log(f"world model: {wm_steps} steps in {time.monotonic() - start:.0f} s, "
        f"train loss {metrics['train_after/loss']:.3f}")
    critic_seeds = split_seeds(env, kwargs, "train", seed=seed + 1, count=critic_episodes)
    critic_data = collect(NoisyExpertAgent(seed=seed), env, group_size=1, group_seeds=critic_seeds, env_kwargs=kwargs,
                          progress=False)
    critic = LatentCritic(LatentCriticConfig.from_section(tokenizer, LatentCriticSection()), tokenizer,
                          seed=seed)
    start = time.monotonic()
    losses = fit_turn_critic(critic, history_states(critic_data), lambda_returns(critic_data, gamma=gamma),
                             steps=critic_steps, batch_size=64, lr=1e-3, seed=seed)
    log(f"critic: {len(critic_data)} noisy-expert episodes, {critic_steps} steps in {time.monotonic() - start:.0f} s, "
        f"last-100 mean loss {sum(losses[-100:]) / len(losses[-100:]):.4f}")
    wm_dir, critic_dir = model_dir(out, "world_model"), model_dir(out, "critic")
    world_model.save_pretrained(wm_dir)
    critic.save_pretrained(critic_dir)
    (out / "reuse.json").write_text(strict_dumps({"env": env, "env_kwargs": kwargs, "gamma": gamma}, indent=2))
    return wm_dir, critic_dir


# --- evaluation --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Score:
    agent: str
    successes: list[bool]

    @property
    def rate(self) -> float:
        return sum(self.successes) / len(self.successes)

    @property
    def stderr(self) -> float:
        return math.sqrt(self.rate * (1 - self.rate) / len(self.successes))


def play(agent, env: str, seeds: Sequence[int]) -> list[bool]:
    """Success of one episode per seed, in seed order."""
    return [t.success for t in collect(agent, env, group_size=1, group_seeds=seeds, env_kwargs=ENVS[env],
                                       progress=False)]


def evaluate(
    world_model, critic, env: str = "hidden_number", *, episodes: int = 200, candidates: int = 4, samples: int = 4,
    gamma: float = 0.95, ablation: bool = False, seed: int = 0,
) -> list[Score]:
    """Both agents (and, with ``ablation``, the gamma-0 lookahead) on the same eval-split seeds."""
    seeds = split_seeds(env, ENVS[env], "eval", seed=seed, count=episodes)
    agents = {
        "first": FirstCandidateAgent(RandomCandidates(candidates, seed=seed)),
        "lookahead": LookaheadAgent(RandomCandidates(candidates, seed=seed), world_model, critic, gamma=gamma,
                                    samples=samples, seed=seed),
    }
    if ablation:
        agents["world model only"] = LookaheadAgent(RandomCandidates(candidates, seed=seed), world_model, critic,
                                                    gamma=0.0, samples=samples, seed=seed)
    return [Score(name, play(agent, env, seeds)) for name, agent in agents.items()]


def format_scores(scores: Sequence[Score]) -> str:
    lines = [f"{'agent':<18}{'success':>9}{'stderr':>9}{'episodes':>10}"]
    lines += [f"{s.agent:<18}{s.rate:>9.3f}{s.stderr:>9.3f}{len(s.successes):>10}" for s in scores]
    base = scores[0]
    for other in scores[1:]:
        diffs = [float(a) - float(b) for a, b in zip(other.successes, base.successes, strict=True)]
        mean = sum(diffs) / len(diffs)
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / max(len(diffs) - 1, 1))
        lines.append(f"{other.agent} - {base.agent}: {mean:+.3f} (paired stderr {sd / math.sqrt(len(diffs)):.3f})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[Score]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--critic", type=Path, help="a folder written by LatentCritic.save_pretrained")
    parser.add_argument("--world-model", type=Path, help="a folder written by a world model's save_pretrained (latent or LM)")
    parser.add_argument("--fit", action="store_true", help="fit and save both models under --out first")
    parser.add_argument("--out", type=Path, default=Path("outputs/reuse_critic"), help="where --fit saves the models")
    parser.add_argument("--env", default="hidden_number", choices=sorted(ENVS))
    parser.add_argument("--episodes", type=int, default=200, help="held-out (eval-split) episodes per agent")
    parser.add_argument("--candidates", type=int, default=4, help="actions the base agent proposes per turn")
    parser.add_argument("--samples", type=int, default=4, help="imagined outcomes per candidate")
    parser.add_argument("--gamma", type=float, default=0.95, help="discount in the lookahead (and of the fit's returns)")
    parser.add_argument("--ablation", action="store_true", help="also play the world-model-only ranking (gamma 0)")
    parser.add_argument("--train-episodes", type=int, default=600, help="--fit: world model's train-split episodes")
    parser.add_argument("--critic-episodes", type=int, default=1000, help="--fit: critic's train-split episodes")
    parser.add_argument("--wm-steps", type=int, default=600, help="--fit: world model optimiser steps")
    parser.add_argument("--critic-steps", type=int, default=1500, help="--fit: critic optimiser steps")
    parser.add_argument("--latent-size", type=int, default=128, help="--fit: world model latent size")
    parser.add_argument("--members", type=int, default=3, help="--fit: world model ensemble members")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    wm_dir, critic_dir = args.world_model, args.critic
    if args.fit or (wm_dir is None and critic_dir is None):
        wm_dir, critic_dir = fit_and_save(
            args.out, args.env, train_episodes=args.train_episodes, critic_episodes=args.critic_episodes,
            wm_steps=args.wm_steps,
            critic_steps=args.critic_steps, gamma=args.gamma, latent_size=args.latent_size, members=args.members,
            seed=args.seed,
        )
    elif wm_dir is None or critic_dir is None:
        parser.error("give both --critic and --world-model, or --fit")

    # From here on only the public loading API, as an outside program would use it.
    critic = LatentCritic.from_pretrained(critic_dir)
    world_model = load_world_model(wm_dir)
    print(f"loaded critic from {critic_dir}, world model from {wm_dir}")
    start = time.monotonic()
    scores = evaluate(world_model, critic, args.env, episodes=args.episodes, candidates=args.candidates,
                      samples=args.samples, gamma=args.gamma, ablation=args.ablation, seed=args.seed)
    print(f"{args.env} {ENVS[args.env]}, {args.candidates} random candidates per turn, {args.samples} imagined "
          f"outcomes each, gamma {args.gamma}; {time.monotonic() - start:.0f} s")
    print(format_scores(scores))
    return scores


if __name__ == "__main__":
    main()
