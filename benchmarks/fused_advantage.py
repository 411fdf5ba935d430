"""How close each advantage estimator comes to the true advantage: fused against EVPO and the parents.

    python -m benchmarks.fused_advantage [--group-sizes 2,4,8] [--critic-steps 0,100,400,1500]

Env: ``hidden_number`` (n = 16, transcript observations, no noise, so a transition is a function of
the state and the action). Agent: the env's expert with probability ``--expert-probability``, else
a uniformly random guess; every batch below and every reference rollout plays it.

Reference: the true advantage of each sampled turn under that agent,
``A(s_t, a_t) = r_t + V(s_{t+1}) - V(s_t)`` (0 after a ``done``), with ``V`` estimated by
``--rollouts`` Monte-Carlo rollouts from the real env restored at that state (replay the episode's
actions from its seed, snapshot, roll out; one estimate per distinct state, shared by the group
members that reach it). Its noise is printed (the mean standard error of A) and is the same for
every estimator.

Critic: a ``LatentCritic`` (the training defaults of ``critic.config.LatentCriticSection``) fitted with
``critic.fit.fit_turn_critic`` on ``--critic-episodes`` episodes of the same agent on train-split seeds
(Monte-Carlo returns, gamma 1), read after each of ``--critic-steps`` cumulative AdamW steps: 0 is an
untrained critic, the way a run starts; its explained variance on the evaluation rows is printed.

Batches: ``--batches`` batches per group size G of ``--groups`` groups x G episodes on eval-split
seeds (what one training iteration sees). Estimators, each computed as ``experiments/train.py``
computes it (``policy.advantages.algorithms``, gamma 1, lambda 0.95 for the critic):

- ``grpo``, ``gigpo``: the group parents; ``critic``: ``ppo_turn``'s whitened turn-level GAE;
- ``evpo``: the critic's advantage when its explained variance on the batch is positive, else GRPO's;
- ``fused``: ``algo=fused`` (inverse-variance weights, GRPO parent); ``fused_gigpo``: the GiGPO parent;
- ``mix_0.5``: a fixed half-half mix, to show what the weights add.

Scores per batch, then mean (and std over batches): ``corr``, the Pearson correlation of the
estimator with the reference over the batch's rows; ``sign``, the share of rows with
``|A| >= --sign-margin`` whose estimate is non-zero with the reference's sign. Also printed: the mean
critic weight of ``fused``, how often and by how much ``fused`` is ahead of EVPO, the critic and GRPO,
and a plot of the correlations (``--plot``). One seed drives the data, the critic and the rollouts.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from critic import LatentCritic, LatentCriticConfig
from critic.config import LatentCriticSection
from critic.fit import explained_variance, fit_turn_critic, history_states, lambda_returns, predict
from envs.collect import collect
from envs.mixed_agents import NoisyExpertAgent
from envs.registry import make
from envs.seeding import derive_seed
from envs.splits import split_seeds
from envs.trajectory import Trajectory
from policy.advantages.algorithms import critic_token_advantages, group_baseline_token_advantages, turn_rows
from policy.advantages.config import AlgoConfig, FusedConfig
from world_model.turn_tokens import TurnTokenizer

ENV = "hidden_number"
ENV_KWARGS = {"n": 16, "observation": "transcript"}
ESTIMATORS = ("grpo", "gigpo", "critic", "evpo", "mix_0.5", "fused", "fused_gigpo")


class MonteCarloValues:
    """``V(s)`` of the noisy expert at a state given by (env seed, actions so far), by rollouts from a
    restored snapshot of the real env; cached per state."""

    def __init__(self, expert_probability: float, rollouts: int, seed: int) -> None:
        self.p, self.rollouts, self.seed = expert_probability, rollouts, seed
        self.env = make(ENV, **ENV_KWARGS)
        self.cache: dict[tuple[int, tuple[str, ...]], tuple[float, float]] = {}

    def __call__(self, env_seed: int, actions: tuple[str, ...]) -> tuple[float, float]:
        """(mean return from the state, its standard error)."""
        key = (env_seed, actions)
        if key not in self.cache:
            env = self.env
            env.reset(env_seed)
            for action in actions:
                env.step(action)
            snapshot = env.snapshot()
            rng = random.Random(derive_seed(self.seed, "mc", env_seed, *actions))
            returns = []
            for _ in range(self.rollouts):
                env.restore(snapshot)
                total, done = 0.0, False
                while not done:
                    action = env.expert_action() if rng.random() < self.p else env.random_action(rng)
                    result = env.step(action)
                    total, done = total + result.reward, result.done
                returns.append(total)
            mean = sum(returns) / len(returns)
            spread = statistics.pstdev(returns) / max(len(returns) - 1, 1) ** 0.5
            self.cache[key] = (mean, spread)
        return self.cache[key]


def reference_advantages(
    trajectories: Sequence[Trajectory], values: MonteCarloValues
) -> tuple[torch.Tensor, float]:
    """(N,) ``r_t + V(s_{t+1}) - V(s_t)`` per turn, in trajectory then turn order; and the mean
    standard error of those differences."""
    out, errors = [], []
    for trajectory in trajectories:
        actions = tuple(turn.action for turn in trajectory.turns)
        for t, turn in enumerate(trajectory.turns):
            v_now, e_now = values(trajectory.seed, actions[:t])
            v_next, e_next = (0.0, 0.0) if turn.done else values(trajectory.seed, actions[: t + 1])
            out.append(turn.reward + v_next - v_now)
            errors.append((e_now**2 + e_next**2) ** 0.5)
    return torch.tensor(out, dtype=torch.float64), sum(errors) / max(len(errors), 1)


def estimator_advantages(trajectories: Sequence[Trajectory], values: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every estimator's (N,) advantages for the rows in trajectory then turn order, plus ``fused``'s weights."""
    keys = [(i, t) for i, tr in enumerate(trajectories) for t in range(tr.num_turns)]
    rows = turn_rows(trajectories, keys, invalid_action_penalty=0.1)
    mask = torch.ones(len(keys), 1)  # (N, 1): one "token" per row, the turn's scalar
    base = AlgoConfig(name="fused", gamma=1.0, lam=0.95)

    def critic_based(**fused) -> torch.Tensor:
        cfg = dataclasses.replace(base, fused=FusedConfig(**fused))
        return critic_token_advantages(cfg, rows, mask, values)[0].squeeze(1)

    out = {
        "grpo": group_baseline_token_advantages(dataclasses.replace(base, name="grpo"), rows, mask).squeeze(
            1
        ),
        "gigpo": group_baseline_token_advantages(dataclasses.replace(base, name="gigpo"), rows, mask).squeeze(
            1
        ),
        "critic": critic_token_advantages(dataclasses.replace(base, name="ppo_turn"), rows, mask, values)[
            0
        ].squeeze(1),
        "evpo": critic_based(weighting="evpo"),
        "mix_0.5": critic_based(weighting="fixed", critic_weight=0.5),
        "fused": critic_based(),
        "fused_gigpo": critic_based(group="gigpo"),
    }
    # The weights themselves: fused = w * critic + (1 - w) * grpo, so w is read back where the parents differ.
    differ = (out["critic"] - out["grpo"]).abs() > 1e-6
    w = (out["fused"] - out["grpo"])[differ] / (out["critic"] - out["grpo"])[differ]
    out["fused_weight"] = w.mean() if w.numel() else torch.tensor(float("nan"))
    return out


def correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    denominator = (a.square().sum() * b.square().sum()).sqrt()
    return float((a * b).sum() / denominator) if denominator > 0 else 0.0


def sign_agreement(estimate: torch.Tensor, reference: torch.Tensor, margin: float) -> float:
    clear = reference.abs() >= margin
    if not clear.any():
        return float("nan")
    return float((torch.sign(estimate[clear].double()) == torch.sign(reference[clear])).double().mean())


@dataclass
class Cell:
    critic_steps: int
    critic_ev: float
    group_size: int
    corr: dict[str, list[float]] = field(default_factory=dict)
    sign: dict[str, list[float]] = field(default_factory=dict)
    weights: list[float] = field(default_factory=list)


def run(
    *,
    group_sizes: Sequence[int] = (2, 4, 8),
    critic_steps: Sequence[int] = (0, 100, 400, 1500),
    batches: int = 4,
    groups: int = 16,
    critic_episodes: int = 600,
    rollouts: int = 64,
    expert_probability: float = 0.5,
    sign_margin: float = 0.05,
    seed: int = 0,
    log=print,
) -> tuple[list[Cell], float]:
    if sorted(critic_steps) != list(critic_steps) or min(critic_steps) < 0:
        raise ValueError(f"--critic-steps must be non-negative and increasing, got {list(critic_steps)}")
    if min(group_sizes) < 2:
        raise ValueError(
            f"--group-sizes must be >= 2 (a group of one has no group baseline), got {list(group_sizes)}"
        )
    agent = NoisyExpertAgent(expert_probability, seed=derive_seed(seed, "agent"))
    start = time.monotonic()
    train = collect(
        agent,
        ENV,
        group_size=1,
        env_kwargs=ENV_KWARGS,
        progress=False,
        group_seeds=split_seeds(
            ENV, ENV_KWARGS, "train", seed=derive_seed(seed, "critic-data"), count=critic_episodes
        ),
    )
    eval_batches: dict[int, list[list[Trajectory]]] = {}
    for g in group_sizes:
        eval_batches[g] = [
            collect(
                agent,
                ENV,
                group_size=g,
                env_kwargs=ENV_KWARGS,
                progress=False,
                group_seeds=split_seeds(
                    ENV, ENV_KWARGS, "eval", seed=derive_seed(seed, "eval", g, b), count=groups
                ),
            )
            for b in range(batches)
        ]
    mc = MonteCarloValues(expert_probability, rollouts, seed)
    references = {
        (g, b): reference_advantages(batch, mc)
        for g in group_sizes
        for b, batch in enumerate(tqdm(eval_batches[g], desc=f"reference G={g}", leave=False))
    }
    noise = statistics.mean(err for _, err in references.values())
    log(
        f"data and {len(mc.cache)} Monte-Carlo state values ({rollouts} rollouts each) in "
        f"{time.monotonic() - start:.0f} s; mean standard error of the reference advantage {noise:.3f}"
    )

    tokenizer = TurnTokenizer.for_env(ENV, ENV_KWARGS)
    critic = LatentCritic(
        LatentCriticConfig.from_section(tokenizer, LatentCriticSection()),
        tokenizer,
        seed=derive_seed(seed, "critic-init"),
    )
    train_states, train_targets = history_states(train), lambda_returns(train, gamma=1.0)
    cells, done_steps = [], 0
    for steps in critic_steps:
        fit_turn_critic(
            critic,
            train_states,
            train_targets,
            steps=steps - done_steps,
            seed=derive_seed(seed, "fit", steps),
        )
        done_steps = steps
        for g in group_sizes:
            all_values, all_returns = [], []
            cell = Cell(steps, 0.0, g)
            for b, batch in enumerate(eval_batches[g]):
                values = predict(critic, history_states(batch))  # (N,) in trajectory then turn order
                all_values.append(values)
                all_returns.append(lambda_returns(batch, gamma=1.0))
                reference, _ = references[(g, b)]
                out = estimator_advantages(batch, values)
                cell.weights.append(float(out.pop("fused_weight")))
                for name, estimate in out.items():
                    cell.corr.setdefault(name, []).append(correlation(estimate, reference))
                    cell.sign.setdefault(name, []).append(sign_agreement(estimate, reference, sign_margin))
            cell.critic_ev = explained_variance(torch.cat(all_values), torch.cat(all_returns))
            cells.append(cell)
        log(f"critic after {steps} steps: scored")
    return cells, noise


def format_table(cells: Sequence[Cell], metric: str) -> str:
    header = f"{'critic steps':>12}{'critic EV':>10}{'G':>3}" + "".join(f"{name:>13}" for name in ESTIMATORS)
    lines = [header + f"{'fused w':>9}"]
    for cell in cells:
        scores = getattr(cell, metric)
        row = f"{cell.critic_steps:>12}{cell.critic_ev:>10.2f}{cell.group_size:>3}"
        for name in ESTIMATORS:
            values = scores[name]
            spread = statistics.pstdev(values) if len(values) > 1 else 0.0
            row += f"{statistics.mean(values):>8.3f}±{spread:<4.2f}"
        lines.append(row + f"{statistics.mean(cell.weights):>9.2f}")
    return "\n".join(lines)


def compare(cells: Sequence[Cell], metric: str, a: str, b: str) -> str:
    """How many cells ``a`` scores above ``b`` on ``metric`` (means over batches), and by how much."""
    gaps = [statistics.mean(getattr(c, metric)[a]) - statistics.mean(getattr(c, metric)[b]) for c in cells]
    return (
        f"{a} - {b} on {metric}: ahead in {sum(g > 0 for g in gaps)} of {len(cells)} cells, "
        f"mean {statistics.mean(gaps):+.3f}, from {min(gaps):+.3f} to {max(gaps):+.3f}"
    )


def plot(cells: Sequence[Cell], path: Path) -> None:
    """Correlation with the true advantage against critic fit steps, one panel per group size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({c.group_size for c in cells})
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.6), sharey=True, squeeze=False)
    for ax, g in zip(axes[0], sizes, strict=True):
        row = [c for c in cells if c.group_size == g]
        steps = [str(c.critic_steps) for c in row]
        for name in ESTIMATORS:
            ax.plot(steps, [statistics.mean(c.corr[name]) for c in row], marker="o", label=name)
        ax.set_title(f"G = {g}")
        ax.set_xlabel("critic fit steps")
    axes[0][0].set_ylabel("correlation with the true advantage")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> list[Cell]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--group-sizes", default="2,4,8", help="episodes per group, comma separated")
    parser.add_argument(
        "--critic-steps", default="0,100,400,1500", help="cumulative critic fit steps to score at"
    )
    parser.add_argument("--batches", type=int, default=4, help="batches per group size")
    parser.add_argument("--groups", type=int, default=16, help="groups per batch")
    parser.add_argument("--critic-episodes", type=int, default=600, help="episodes the critic is fitted on")
    parser.add_argument("--rollouts", type=int, default=64, help="Monte-Carlo rollouts per state value")
    parser.add_argument("--expert-probability", type=float, default=0.5)
    parser.add_argument(
        "--sign-margin", type=float, default=0.05, help="|A| below this is not scored for sign"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=Path("benchmarks/fused_advantage/fused_advantage.png"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cells, _ = run(
        group_sizes=[int(x) for x in args.group_sizes.split(",")],
        critic_steps=[int(x) for x in args.critic_steps.split(",")],
        batches=args.batches,
        groups=args.groups,
        critic_episodes=args.critic_episodes,
        rollouts=args.rollouts,
        expert_probability=args.expert_probability,
        sign_margin=args.sign_margin,
        seed=args.seed,
    )
    for metric, title in (
        ("corr", "Pearson correlation with the true advantage"),
        ("sign", f"sign agreement where |A| >= {args.sign_margin}"),
    ):
        print(f"\n{title} (mean ± std over {args.batches} batches of {args.groups} groups)")
        print(format_table(cells, metric))
    print()
    for metric in ("corr", "sign"):
        for a, b in (("fused", "evpo"), ("fused", "critic"), ("fused", "grpo"), ("fused_gigpo", "evpo")):
            print(compare(cells, metric, a, b))
    plot(cells, args.plot)
    print(f"plot: {args.plot}")
    return cells


if __name__ == "__main__":
    main()
