"""How well a critic predicts returns on held-out episodes: the latent critic against the token critic.

    python -m benchmarks.critic_quality [--env hidden_number] [--episodes 600] [--steps 1500] [--seed 0]

Data: episodes of a fixed agent mix (``envs.mixed_agents``), one episode per seed, cycling
``RandomAgent``, ``ExpertAgent`` and ``NoisyExpertAgent`` (the expert's action with probability
1/2, else a random one), so the return from a state depends on who is playing and on what the
history already pins down.
``--episodes`` training episodes on train-split seeds and ``--eval-episodes`` held-out episodes
on eval-split seeds (``envs.splits.split_seeds``: disjoint seed ranges, and for envs with task
keys disjoint tasks). Envs and options (``ENVS``): ``hidden_number`` as ``experiment=hidden_number``
plays it (``n=16``, transcript observations), ``frozen_lake`` on random 4x4 maps.

Targets: Monte-Carlo discounted returns (``critic.fit.lambda_returns`` with ``lam=1``, ``--gamma``)
of every turn state ``k = 0 .. num_turns - 1``; no episode is truncated (the env's own turn
budget ends them), so the targets depend on neither critic.

Critics, with the same initialisation seed and a similar parameter count:

- ``latent``: ``LatentCritic`` over the env's ``TurnTokenizer``, reading each state's history, with
  the training defaults of ``critic.config.LatentCriticSection``;
- ``token``: ``TokenCritic`` (a one-block Llama decoder, ``--token-hidden-size`` wide, 4 heads, MLP
  twice as wide: by default the size ``critic_cost`` compares with; the training default,
  ``critic.token.hidden_size=32``, is about a fifth of the latent critic) over the prompt ids a tiny
  policy would see in that state
  (``LMPolicy.state_prompts``, the policy's word tokenizer over the env's vocabulary,
  ``--history-window`` past turns rendered; the policy's own weights are never used).

Each is fitted with ``critic.fit.fit_turn_critic`` for ``--steps`` AdamW steps of ``--batch-size``
states (same lr, same minibatch seed). Printed per critic: parameters, fit wall time (one
thread), explained variance and MSE on the training and held-out states; plus the held-out MSE of
the training targets' mean, the floor a critic must beat. A single fit seed: no error bars.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from critic import LatentCritic, LatentCriticConfig, TokenCritic, TokenCriticConfig
from critic.config import LatentCriticSection
from critic.fit import (
    explained_variance,
    fit_turn_critic,
    history_states,
    lambda_returns,
    mse,
    predict,
    turn_states,
)
from envs.mixed_agents import collect_mix
from envs.registry import make
from policy.config import PolicyConfig
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer
from world_model.turn_tokens import TurnTokenizer

ENVS: dict[str, dict[str, Any]] = {
    "hidden_number": {"n": 16, "observation": "transcript"},
    "frozen_lake": {"size": 4},
}


def state_policy(env_name: str, env_kwargs: dict[str, Any], history_window: int) -> LMPolicy:
    """An untrained tiny policy: only its tokenizer and prompt rendering are used (``state_prompts``)."""
    tokenizer = build_tiny_tokenizer(make(env_name, **env_kwargs).vocabulary())
    cfg = PolicyConfig(hidden_size=8, num_layers=1, num_heads=1, intermediate_size=8, history_window=history_window)
    return LMPolicy(build_tiny_lm(cfg, tokenizer, seed=0), tokenizer, cfg)


@dataclass(frozen=True)
class Row:
    critic: str
    params: int
    fit_s: float
    train_ev: float
    train_mse: float
    eval_ev: float
    eval_mse: float


@dataclass
class Result:
    env: str
    train_states: int
    eval_states: int
    mean_mse: float
    """Held-out MSE of a constant prediction, the training targets' mean."""
    rows: list[Row] = field(default_factory=list)


def run(
    env: str = "hidden_number",
    *,
    episodes: int = 600,
    eval_episodes: int = 300,
    steps: int = 1500,
    batch_size: int = 64,
    lr: float = 1e-3,
    gamma: float = 0.95,
    history_window: int = 2,
    token_hidden_size: int = 64,
    seed: int = 0,
    log=print,
) -> Result:
    if env not in ENVS:
        raise ValueError(f"unknown env {env!r}; choose from {sorted(ENVS)}")
    for name, value in (("episodes", episodes), ("eval_episodes", eval_episodes), ("steps", steps)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    kwargs = ENVS[env]
    train = collect_mix(env, kwargs, "train", episodes, seed=seed)
    held = collect_mix(env, kwargs, "eval", eval_episodes, seed=seed)
    train_y = lambda_returns(train, gamma=gamma)  # (M,)
    held_y = lambda_returns(held, gamma=gamma)  # (M',)
    result = Result(env, len(train_y), len(held_y), mse(torch.full_like(held_y, float(train_y.mean())), held_y))
    log(f"env {env} {kwargs}: {len(train)} train episodes ({len(train_y)} states), "
        f"{len(held)} held-out episodes ({len(held_y)} states), gamma {gamma}")

    tokenizer = TurnTokenizer.for_env(env, kwargs)
    latent = LatentCritic(LatentCriticConfig.from_section(tokenizer, LatentCriticSection()), tokenizer, seed=seed)
    policy = state_policy(env, kwargs, history_window)
    token_config = TokenCriticConfig(vocab_size=len(policy.tokenizer), hidden_size=token_hidden_size, num_layers=1,
                                     num_heads=4, intermediate_size=2 * token_hidden_size)
    token = TokenCritic(token_config, seed=seed)
    critics = {
        "latent": (latent, history_states(train), history_states(held)),
        "token": (token, policy.state_prompts(turn_states(train)), policy.state_prompts(turn_states(held))),
    }
    for name, (critic, train_states, held_states) in critics.items():
        start = time.monotonic()
        fit_turn_critic(critic, train_states, train_y, steps=steps, batch_size=batch_size, lr=lr, seed=seed)
        fit_s = time.monotonic() - start
        train_pred, held_pred = predict(critic, train_states), predict(critic, held_states)
        row = Row(
            critic=name,
            params=sum(p.numel() for p in critic.parameters()),
            fit_s=fit_s,
            train_ev=explained_variance(train_pred, train_y),
            train_mse=mse(train_pred, train_y),
            eval_ev=explained_variance(held_pred, held_y),
            eval_mse=mse(held_pred, held_y),
        )
        result.rows.append(row)
        log(f"{name}: fitted in {fit_s:.1f} s")
    return result


def format_table(result: Result) -> str:
    lines = [
        f"{'critic':<8}{'params':>9}{'fit_s':>8}{'train_ev':>10}{'train_mse':>11}{'heldout_ev':>12}{'heldout_mse':>13}"
    ]
    for r in result.rows:
        lines.append(
            f"{r.critic:<8}{r.params:>9,}{r.fit_s:>8.1f}{r.train_ev:>10.3f}{r.train_mse:>11.4f}"
            f"{r.eval_ev:>12.3f}{r.eval_mse:>13.4f}"
        )
    lines.append(f"held-out MSE of the training mean: {result.mean_mse:.4f} "
                 f"({result.train_states} train / {result.eval_states} held-out states)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> Result:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="hidden_number", choices=sorted(ENVS))
    parser.add_argument("--episodes", type=int, default=600, help="training episodes (train-split seeds)")
    parser.add_argument("--eval-episodes", type=int, default=300, help="held-out episodes (eval-split seeds)")
    parser.add_argument("--steps", type=int, default=1500, help="AdamW steps per critic")
    parser.add_argument("--batch-size", type=int, default=64, help="states per step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.95, help="discount of the Monte-Carlo returns")
    parser.add_argument("--history-window", type=int, default=2, help="past turns in the token critic's prompts")
    parser.add_argument("--token-hidden-size", type=int, default=64, help="token critic width (a multiple of 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data, the critics' init and minibatches")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = run(args.env, episodes=args.episodes, eval_episodes=args.eval_episodes, steps=args.steps,
                 batch_size=args.batch_size, lr=args.lr, gamma=args.gamma, history_window=args.history_window,
                 token_hidden_size=args.token_hidden_size, seed=args.seed)
    print(format_table(result))
    return result


if __name__ == "__main__":
    main()
