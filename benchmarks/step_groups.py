"""How many steps get a step-level comparison, and a non-zero step advantage, under each grouping.

    python -m benchmarks.step_groups [--envs hidden_number minishop sokoban] [--seed 0]
        [--groups 8] [--group-size 8] [--siblings 4] [--horizon 2] [--sign-states 24] [--sign-rollouts 32]

Per env: a tiny policy (the ``experiment=hidden_number`` shape) is behaviour-cloned on the scripted
expert for ``--bc-steps`` steps (a weak, non-zero policy, as the training loop's warm start), then
plays ``--groups`` groups of ``--group-size`` episodes on training tasks. A small world model (the
sample-efficiency benchmark's model-based sizes; minishop's observations capped at ``--minishop-words``
words, its pages otherwise cost a dozen times more per step) is fitted for ``--wm-steps`` on the
expert and policy episodes, and a latent critic for ``--critic-steps`` on their discounted returns.

Over every step of the policy's episodes the table prints, per grouping:

- ``non-singleton``: the share of steps whose comparison group holds another member: GiGPO's
  (episode group, exact anchor) group; HGPO's largest level group (levels 1 .. K + 1 of the last k
  anchors; with ``base_group`` the episode group too); a counterfactual group always holds G + 1;
- ``non-zero``: the share of steps with a non-zero step advantage: GiGPO's step term, HGPO's whole
  advantage (it has no separate episode term; with the base group that term is one of its levels),
  and the real action's advantage in its counterfactual group (``imagination.step_groups.advantages``).

Sign agreement (hidden_number only, ``--sign-states`` > 0): at real states drawn from the episodes,
each member of the counterfactual group (the real action and the G siblings) is also played in the
real env ``--sign-rollouts`` times from that state (``envs.collect`` branches: the prefix replayed
from the seed, then the member's first action, then the policy), giving a Monte-Carlo value per
member; a member's measured advantage is its value minus the group's mean, counted only where it
is more than two standard errors from 0. Printed: the share of counted members whose
counterfactual advantage has the same sign, with a 95% Wilson interval, for the configured horizon
and for h = 1 (one imagined turn, then the latent critic: close to the critic's own value of each
alternative), and Spearman's rank correlation of each with the Monte-Carlo values within groups.
The Monte-Carlo rollouts are the real-branch oracle's cost, printed as real env steps.

The real-branch oracle (``algo=real_branch_gigpo``, ``imagination.step_groups.real_branch``) forms the same
groups with the same siblings (the same policy stream) in clones of the real env, then values them
with the same latent critic: a row of the table (``extra/step``: its branch and replay steps per real
step measured, 0 for the groupings that take no real step) and a line of the sign agreement.

One seed, small sizes: about 23 minutes on two heavily shared cores (minishop and sokoban take the
longest). It measures coverage and agreement, not learning.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence
from typing import Any

import torch
from tqdm.auto import tqdm

from benchmarks.step_group_measures import (
    exact_match_group_sizes,
    hgpo_group_sizes,
    share,
    sign_agreement,
    spearman,
    wilson_interval,
)
from critic.fit import fit_turn_critic, history_states, lambda_returns
from critic.latent_critic import LatentCritic, LatentCriticConfig
from envs import Trajectory, collect, count_env_steps, make
from envs.seeding import derive_seed_63bit
from envs.splits import split_seeds
from experiments.world_model_builder import build_world_model
from imagination.step_groups.advantages import counterfactual_step_advantages
from imagination.step_groups.groups import RealActionFirst, imagine_counterfactual_groups
from imagination.step_groups.real_branch import RealEnvBrancher
from policy.advantages import gigpo_advantages, hgpo_advantages
from policy.advantages.algorithms import turn_rows
from policy.advantages.config import AlgoConfig, CounterfactualConfig
from policy.config import PolicyConfig
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer
from policy.warm_start import behaviour_clone, expert_trajectories
from world_model.config import WorldModelOptions
from world_model.lightning_module import fit_world_model

ENVS: dict[str, dict[str, Any]] = {
    "hidden_number": {"n": 16, "observation": "transcript"},  # as experiment=hidden_number
    "minishop": {},
    "sokoban": {},
}
POLICY = PolicyConfig(history_window=0, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=256)
WORLD_MODEL = {
    "latent_size": 64,
    "num_members": 3,
    "decoder": {"model_size": 32, "num_layers": 1, "num_heads": 2, "latent_slots": 4},
}
GAMMA, PENALTY = 0.95, 0.1  # the training defaults: algo.gamma, algo.invalid_action_penalty


def trained_pieces(env_name: str, kwargs: dict[str, Any], args: argparse.Namespace):
    """The behaviour-cloned policy, its episodes, the fitted world model and latent critic."""
    seed = args.seed
    env = make(env_name, **kwargs)
    tokenizer = build_tiny_tokenizer(env.vocabulary())
    policy = LMPolicy(
        build_tiny_lm(POLICY, tokenizer, seed=derive_seed_63bit(seed, "policy")),
        tokenizer,
        POLICY,
        seed=derive_seed_63bit(seed, "sampling"),
    )
    experts = expert_trajectories(
        env_name,
        env_kwargs=kwargs,
        seeds=split_seeds(env_name, kwargs, "train", seed=derive_seed_63bit(seed, "expert"), count=args.experts),
    )
    behaviour_clone(
        policy,
        experts,
        max_steps=args.bc_steps,
        batch_size=32,
        seed=derive_seed_63bit(seed, "clone"),
        progress=False,
    )
    episodes = collect(
        policy,
        env_name,
        env_kwargs=kwargs,
        group_size=args.group_size,
        progress=False,
        group_seeds=split_seeds(
            env_name, kwargs, "train", seed=derive_seed_63bit(seed, "groups"), count=args.groups
        ),
    )
    words = args.minishop_words if env_name == "minishop" else None
    world_model = build_world_model(
        WorldModelOptions(**WORLD_MODEL, max_observation_words=words),
        env_name,
        kwargs,
        env.vocabulary(),
        seed=derive_seed_63bit(seed, "world-model"),
    )
    fit_world_model(
        experts + episodes,
        [],
        world_model,
        max_steps=args.wm_steps,
        batch_size=16,
        seed=derive_seed_63bit(seed, "world-model-fit"),
    )
    world_model.eval()
    critic = LatentCritic(
        LatentCriticConfig.for_tokenizer(
            world_model.tokenizer, latent_size=64, embed_size=32, feature_size=64
        ),
        world_model.tokenizer,
        seed=derive_seed_63bit(seed, "critic"),
    )
    data = experts + episodes
    fit_turn_critic(
        critic,
        history_states(data),
        lambda_returns(data, gamma=GAMMA, invalid_penalty=PENALTY),
        steps=args.critic_steps,
        seed=derive_seed_63bit(seed, "critic-fit"),
    )
    return policy, episodes, world_model, critic


def coverage(
    env_name: str, kwargs: dict[str, Any], episodes: list[Trajectory], groups, oracle=None
) -> list[tuple[str, float, float, float]]:
    """``(grouping, non-singleton share, non-zero share, extra real steps per step)`` over every step
    of ``episodes``; ``oracle``: ``(real-branch groups, their real env steps)``, a row if given."""
    keys = [(i, t) for i, trajectory in enumerate(episodes) for t in range(trajectory.num_turns)]
    rows = turn_rows(episodes, keys, invalid_action_penalty=PENALTY)
    step_rows = rows.step_rows()
    gigpo = gigpo_advantages(step_rows, gamma=GAMMA)
    gids, tids, steps = rows.group_ids.tolist(), rows.traj_ids.tolist(), rows.steps.tolist()
    out = [
        (
            "gigpo (exact anchor)",
            share(exact_match_group_sizes(gids, rows.anchors) > 1),
            share(gigpo.step_advantages != 0),
            0.0,
        )
    ]
    for name, base in (("hgpo (recipe default)", False), ("hgpo (base_group)", True)):
        hgpo = hgpo_advantages(step_rows, gamma=GAMMA, base_group=base)
        sizes = hgpo_group_sizes(gids, tids, steps, rows.anchors, base_group=base)
        out.append((name, share(sizes > 1), share(hgpo.advantages != 0), 0.0))
    real_action = counterfactual_step_advantages(groups.values)[:, 0]  # (N,) in the same row order
    out.append(
        (
            f"counterfactual (G={groups.values.shape[1] - 1})",
            share(torch.ones(len(real_action)) > 0),
            share(real_action != 0),
            0.0,
        )
    )
    if oracle is not None:
        branched, cost = oracle
        real_branch = counterfactual_step_advantages(branched.values)[:, 0]  # (N,)
        out.append(
            (
                f"real-branch oracle (G={branched.values.shape[1] - 1})",
                share(torch.ones(len(real_branch)) > 0),
                share(real_branch != 0),
                cost / max(len(real_branch), 1),
            )
        )
    return out


def real_brancher(env_name: str, kwargs: dict[str, Any], args: argparse.Namespace, horizon: int):
    """The oracle's brancher with the benchmark's G, h, gamma and invalid-action penalty."""
    algo = AlgoConfig(
        name="real_branch_gigpo",
        gamma=GAMMA,
        invalid_action_penalty=PENALTY,
        counterfactual=CounterfactualConfig(siblings=args.siblings, horizon=horizon),
    )
    return RealEnvBrancher(env_name, kwargs, algo)


def monte_carlo_values(
    policy: LMPolicy, env_name: str, kwargs: dict[str, Any], states, first_actions, rollouts: int
):
    """``(mean (S, G + 1), standard error (S, G + 1), real env steps)``: discounted shaped returns from each
    state after each given first action, then the policy, in the real env (prefix replayed from the seed)."""
    members = len(first_actions[0])
    branches = [state for state in states for _ in range(members)]
    forced: dict[int, tuple[int, str]] = {}
    built = []

    def make_env():
        env = make(env_name, **kwargs)
        branch = len(built) // rollouts
        (_, t), action = branches[branch], first_actions[branch // members][branch % members]
        forced[id(env)] = (t, action)
        built.append(env)
        return env

    played = collect(
        RealActionFirst(policy, forced),
        make_env,
        env_kwargs=kwargs,
        group_size=rollouts,
        branches=branches,
        progress=False,
    )
    returns = torch.zeros(len(played))
    for i, trajectory in enumerate(played):
        t = trajectory.branch_turn
        returns[i] = sum(
            GAMMA**j * (turn.reward - (0.0 if turn.valid else PENALTY))
            for j, turn in enumerate(trajectory.turns[t:])
        )
    table = returns.reshape(len(states), members, rollouts)  # (S, G + 1, M)
    return table.mean(-1), table.std(-1) / rollouts**0.5, count_env_steps(played)


def sign_report(policy, world_model, critic, env_name, kwargs, episodes, args) -> list[str]:
    """Sign agreement of counterfactual advantages with the real env's Monte-Carlo ones."""
    rng = random.Random(derive_seed_63bit(args.seed, "sign-states"))
    pool = [(trajectory, t) for trajectory in episodes for t in range(trajectory.num_turns)]
    states = rng.sample(pool, min(args.sign_states, len(pool)))
    lines = []
    first = None
    for label, horizon in ((f"counterfactual h={args.horizon}", args.horizon), ("critic lookahead h=1", 1)):
        groups = imagine_counterfactual_groups(
            policy.with_seed(derive_seed_63bit(args.seed, "sign-siblings")),
            world_model,
            critic,
            env_name,
            kwargs,
            states,
            siblings=args.siblings,
            horizon=horizon,
            gamma=GAMMA,
            seed=derive_seed_63bit(args.seed, "sign-dream"),
            invalid_action_penalty=PENALTY,
        )  # the same policy stream: the same siblings at both horizons
        actions = [
            [m.turns[t].action for m in members]
            for (_, t), members in zip(states, groups.members, strict=True)
        ]
        if first is None:
            mean, error, cost = monte_carlo_values(
                policy, env_name, kwargs, states, actions, args.sign_rollouts
            )
            measured = mean - mean.mean(dim=1, keepdim=True)  # (S, G + 1)
            sure = measured.abs() > 2 * error
            first = actions
            lines.append(
                f"  Monte-Carlo oracle: {args.sign_rollouts} real rollouts per member, {cost} real env steps; "
                f"{int(sure.sum())} of {sure.numel()} members' signs are sure (|adv| > 2 SE)"
            )
        if actions != first:
            lines.append(f"  {label}: siblings differ from the first draw; skipped")
            continue
        lines.append(agreement_line(label, groups.values, measured, sure, mean))
    # The oracle: the same siblings (the same stream), played h turns in clones of the real env.
    oracle = real_brancher(env_name, kwargs, args, args.horizon)
    label = f"real-branch oracle h={args.horizon}"
    groups = oracle(policy.with_seed(derive_seed_63bit(args.seed, "sign-siblings")), critic, states, seed=0)
    actions = [
        [m.turns[t].action for m in members] for (_, t), members in zip(states, groups.members, strict=True)
    ]
    if actions != first:
        lines.append(f"  {label}: siblings differ from the first draw; skipped")
    else:
        extra = oracle.metrics()["oracle/env_steps"] / len(states)
        lines.append(
            agreement_line(label, groups.values, measured, sure, mean)
            + f"; {extra:.1f} extra real steps/step"
        )
    return lines


def agreement_line(label: str, values, measured, sure, mean) -> str:
    """Sign agreement (Wilson 95% CI) of the groups' ``values`` (S, G + 1) with the Monte-Carlo advantages
    ``measured`` where ``sure``, and the mean within-group Spearman correlation with the Monte-Carlo ``mean``."""
    predicted = counterfactual_step_advantages(values)
    agree, counted = sign_agreement(predicted[sure], measured[sure])
    low, high = wilson_interval(agree, counted)
    ranks = [spearman(values[s], mean[s]) for s in range(len(values))]
    ranks = [r for r in ranks if r == r]  # NaN where a group's values are all equal
    rho = sum(ranks) / len(ranks) if ranks else float("nan")
    return (
        f"  {label:24s} sign agreement {agree}/{counted} = {agree / max(counted, 1):.2f} "
        f"(95% CI {low:.2f}-{high:.2f}); mean within-group Spearman {rho:.2f} over {len(ranks)} groups"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--groups", type=int, default=8, help="groups of policy episodes measured")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--siblings", type=int, default=4, help="G: policy siblings per counterfactual group")
    parser.add_argument("--horizon", type=int, default=2, help="h: imagined turns per member")
    parser.add_argument("--experts", type=int, default=128, help="expert episodes to clone and to fit on")
    parser.add_argument("--bc-steps", type=int, default=300)
    parser.add_argument("--wm-steps", type=int, default=300)
    parser.add_argument("--critic-steps", type=int, default=150)
    parser.add_argument(
        "--minishop-words", type=int, default=48, help="world-model observation cap on minishop"
    )
    parser.add_argument(
        "--sign-states", type=int, default=24, help="hidden_number states for sign agreement (0: off)"
    )
    parser.add_argument("--sign-rollouts", type=int, default=32, help="real rollouts per group member")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    table = []
    signs: list[str] = []
    for env_name in tqdm(args.envs, desc="envs"):
        start = time.monotonic()
        kwargs = ENVS[env_name]
        policy, episodes, world_model, critic = trained_pieces(env_name, kwargs, args)
        states = [(trajectory, t) for trajectory in episodes for t in range(trajectory.num_turns)]
        groups = imagine_counterfactual_groups(
            policy.with_seed(derive_seed_63bit(args.seed, "siblings")),
            world_model,
            critic,
            env_name,
            kwargs,
            states,
            siblings=args.siblings,
            horizon=args.horizon,
            gamma=GAMMA,
            seed=derive_seed_63bit(args.seed, "dream"),
            invalid_action_penalty=PENALTY,
        )
        oracle = real_brancher(env_name, kwargs, args, args.horizon)  # the same siblings, in the real env
        branched = oracle(policy.with_seed(derive_seed_63bit(args.seed, "siblings")), critic, states, seed=0)
        oracle_cost = oracle.metrics()["oracle/env_steps"]
        success = sum(t.success for t in episodes) / len(episodes)
        for name, non_singleton, non_zero, extra in coverage(
            env_name, kwargs, episodes, groups, (branched, oracle_cost)
        ):
            table.append((env_name, len(states), success, name, non_singleton, non_zero, extra))
        if env_name == "hidden_number" and args.sign_states > 0:
            signs = sign_report(policy, world_model, critic, env_name, kwargs, episodes, args)
        tqdm.write(f"{env_name}: {time.monotonic() - start:.0f} s")

    print(
        f"\nStep-level comparison groups (seed {args.seed}, G={args.siblings}, h={args.horizon}); "
        "shares over every step of the policy's episodes"
    )
    print(
        f"{'env':14s} {'steps':>5s} {'success':>7s}  {'grouping':30s} {'non-singleton':>13s} {'non-zero':>9s} "
        f"{'extra/step':>10s}"
    )
    for env_name, steps, success, name, non_singleton, non_zero, extra in table:
        print(
            f"{env_name:14s} {steps:5d} {success:7.2f}  {name:30s} {non_singleton:13.2f} {non_zero:9.2f} "
            f"{extra:10.2f}"
        )
    if signs:
        print(
            f"\nSign agreement with real-env Monte Carlo on hidden_number ({args.sign_states} states, "
            f"G={args.siblings})"
        )
        print("\n".join(signs))


if __name__ == "__main__":
    main()
