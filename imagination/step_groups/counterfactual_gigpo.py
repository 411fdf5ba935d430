"""``algo=counterfactual_gigpo``: GiGPO whose step groups are imagined instead of found.

GiGPO compares a real action only with the actions other rollouts happened to take from the same
exact anchor observation; where no other rollout comes by (larger or aliased state spaces), its step
term is 0. Here every real step gets a group on purpose: from the latent of its real history the
world model plays the real action and ``G`` actions the current policy samples there, each for ``h``
imagined turns, valued at the end by a latent critic (``imagination.step_groups.groups``). The
real action's step advantage is its value normalised in that group of ``G + 1``; the total is GiGPO's
``episode + omega * step`` with GiGPO's own episode term (``imagination.step_groups.advantages``).

A row keeps GiGPO's exact-match step advantage where the world model cannot be trusted: while the
imagination gate is closed, for rows of imagined episodes (Dyna groups, if the run has any), and at
states whose real transition the model finds more uncertain than ``fallback_uncertainty``.

The latent critic (the world model's tokenizer, its own encoder and value head) is fitted each
iteration on the discounted returns of the most recent real episodes, before it values anything.

Where the members are played is a seam, the ``brancher``: by default the world model
(``WorldModelBrancher``); ``imagination.step_groups.real_branch.RealEnvBrancher`` plays them in the real env
instead (``algo=real_branch_gigpo``, an oracle that pays for its groups in real env steps). A real
brancher needs no gate and no fallback, and reports the real env steps it took.

Bias and variance: the imagined values carry the model's and the critic's bias (the penalty
``imagination.reward_penalty`` and halting ``imagination.halt_uncertainty`` bound it, the fallback
removes it where the model is unsure), but the baseline is formed at the right state from on-policy
alternatives, and does not mix states that merely share an anchor text.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from critic.config import LatentCriticSection
from critic.fit import fit_turn_critic, history_states, lambda_returns, predict
from critic.latent_critic import LatentCritic, LatentCriticConfig
from envs.seeding import derive_seed_63bit
from envs.trajectory import Trajectory
from imagination.config import ImaginationConfig
from imagination.step_groups.advantages import (
    counterfactual_step_advantages,
    select_step_advantages,
    total_advantages,
)
from imagination.step_groups.groups import (
    CounterfactualGroups,
    imagine_counterfactual_groups,
    real_transition_uncertainty,
)
from policy.advantages import broadcast_to_tokens
from policy.advantages.algorithms import gigpo_of_rows, turn_rows
from policy.advantages.config import AlgoConfig
from policy.lm_policy import LMPolicy
from policy.rollout_batch import RolloutBatch, build_rollout_batch
from world_model.protocol import WorldModelLike
from world_model.turn_tokens import TurnTokenizer


class Brancher(Protocol):
    """Plays and values the step groups at real states: the world model, or the real env."""

    tokenizer: TurnTokenizer
    """The latent critic reads histories through it."""
    real_env: bool
    """True: the members play in the real env (no gate, no fallback; its steps are real env steps)."""

    def __call__(
        self, policy: LMPolicy, critic: LatentCritic, states: list[tuple[Trajectory, int]], *, seed: int
    ) -> CounterfactualGroups:
        """One group of ``G + 1`` members per state (``imagination.step_groups.groups``)."""
        ...

    def metrics(self) -> dict[str, float]:
        """What its last call cost, by metric name (e.g. real env steps taken); may be empty."""
        ...


class WorldModelBrancher:
    """The default brancher: the members are imagined by the world model (``imagine_counterfactual_groups``)."""

    real_env = False

    def __init__(
        self,
        world_model: WorldModelLike,
        env_name: str,
        env_kwargs: dict[str, Any],
        algo: AlgoConfig,
        imagination: ImaginationConfig,
        max_turns: int | None,
    ) -> None:
        self.world_model, self.env_name, self.env_kwargs = world_model, env_name, dict(env_kwargs)
        self.algo, self.imagination, self.max_turns = algo, imagination, max_turns
        self.tokenizer = world_model.tokenizer

    def __call__(
        self, policy: LMPolicy, critic: LatentCritic, states: list[tuple[Trajectory, int]], *, seed: int
    ) -> CounterfactualGroups:
        return imagine_counterfactual_groups(
            policy,
            self.world_model,
            critic,
            self.env_name,
            self.env_kwargs,
            states,
            siblings=self.algo.counterfactual.siblings,
            horizon=self.algo.counterfactual.horizon,
            gamma=self.algo.gamma,
            seed=seed,
            invalid_action_penalty=self.algo.invalid_action_penalty,
            reward_penalty=self.imagination.reward_penalty,
            halt_uncertainty=self.imagination.halt_uncertainty,
            max_turns=self.max_turns,
        )

    def metrics(self) -> dict[str, float]:
        return {}


class CounterfactualGiGPO:
    """The per-iteration estimator: fits its latent critic, imagines the groups, returns advantages.

    ``critic_options``: the latent critic's sizes (the run's ``critic.latent`` section);
    ``seed`` drives the critic's initialisation, its fits, the world model's draws and the siblings'
    sampling stream (a policy copy with its own generator, so the real rollouts' stream is untouched).
    ``brancher``: where the members play (default: ``WorldModelBrancher`` on ``world_model``).
    """

    def __init__(
        self,
        algo: AlgoConfig,
        imagination: ImaginationConfig,
        world_model: WorldModelLike,
        env_name: str,
        env_kwargs: dict[str, Any],
        *,
        critic_options: LatentCriticSection,
        seed: int,
        max_turns: int | None = None,
        brancher: Brancher | None = None,
    ) -> None:
        if world_model is None and brancher is None:
            raise ValueError("algo=counterfactual_gigpo needs a world model")
        if world_model is None and algo.counterfactual.fallback_uncertainty is not None:
            raise ValueError(
                "algo.counterfactual.fallback_uncertainty needs a world model to measure uncertainty; "
                f"algo={algo.name} has none: leave it null"
            )
        self.algo, self.options, self.imagination = algo, algo.counterfactual, imagination
        self.world_model, self.env_name, self.env_kwargs = world_model, env_name, dict(env_kwargs)
        self.seed, self.max_turns = seed, max_turns
        self.brancher = brancher or WorldModelBrancher(
            world_model, env_name, env_kwargs, algo, imagination, max_turns
        )
        tokenizer = self.brancher.tokenizer
        self.critic = LatentCritic(
            LatentCriticConfig.from_section(tokenizer, critic_options),
            tokenizer,
            seed=derive_seed_63bit(seed, "critic-init"),
        )
        self.recent: deque[Trajectory] = deque(maxlen=self.options.critic_trajectories)

    def fit_critic(self, new_real: Sequence[Trajectory], iteration: int) -> float:
        """Add ``new_real`` to the critic's data and fit it; the mean loss of this fit (NaN if none)."""
        self.recent.extend(t for t in new_real if t.source == "real" and t.turns)
        if not self.recent or self.options.critic_fit_steps == 0:
            return float("nan")
        data = list(self.recent)
        values = None
        if any(t.truncated for t in data):  # bootstrap cut-off episodes from the critic itself
            values = predict(self.critic, history_states(data, include_end=True))
        targets = lambda_returns(
            data, values, gamma=self.algo.gamma, lam=1.0, invalid_penalty=self.algo.invalid_action_penalty
        )
        losses = fit_turn_critic(
            self.critic,
            history_states(data),
            targets,
            steps=self.options.critic_fit_steps,
            batch_size=self.options.critic_batch_size,
            lr=self.options.critic_lr,
            seed=derive_seed_63bit(self.seed, "critic-fit", iteration),
        )
        return sum(losses) / len(losses)

    def advantages(
        self, policy: LMPolicy, batch: RolloutBatch, *, iteration: int, gate_open: bool = True
    ) -> tuple[RolloutBatch, torch.Tensor, dict[str, float]]:
        """``(batch, token advantages (B', L'), metrics)`` for one update.

        The returned batch is ``batch`` itself, or, with ``siblings_in_gradient``, ``batch`` with one
        row per sibling appended (its first imagined action, weight ``imagination.imagined_weight``).
        """
        algo, options = self.algo, self.options
        critic_loss = self.fit_critic(
            [batch.trajectories[i] for i in sorted({i for i, _ in batch.row_keys})], iteration
        )
        rows = turn_rows(
            batch.trajectories, batch.row_keys, invalid_action_penalty=algo.invalid_action_penalty
        )
        gigpo = gigpo_of_rows(rows, algo)
        n = len(batch)
        real = [b for b, (i, _) in enumerate(batch.row_keys) if batch.trajectories[i].source == "real"]
        states = [(batch.trajectories[batch.row_keys[b][0]], batch.row_keys[b][1]) for b in real]
        groups, member_advantages, brancher_metrics = None, None, {}
        if (gate_open or self.brancher.real_env) and states:  # the real env needs no gate
            groups, member_advantages, brancher_metrics = self._play_groups(policy, states, iteration)
        counterfactual, available, uncertainty = self._step_columns(n, real, states, member_advantages)
        step, fell_back = select_step_advantages(
            counterfactual,
            gigpo.step_advantages,
            uncertainty,
            threshold=options.fallback_uncertainty,
            available=available,
        )
        per_row = total_advantages(gigpo.episode_advantages, step, omega=algo.omega)  # (B,)
        siblings = 0
        if groups is not None and options.siblings_in_gradient:
            batch, per_row, siblings = self._with_siblings(policy, batch, per_row, real, groups, member_advantages, fell_back)
        advantages = broadcast_to_tokens(per_row, batch.tokens.response_mask)  # (B', L')

        real_mask = torch.zeros(n, dtype=torch.bool)
        real_mask[real] = True
        members = 0 if groups is None else groups.values.numel()
        metrics = {
            "counterfactual/groups": float(0 if groups is None else len(groups.states)),
            "counterfactual/fallback_share": _share(fell_back[real_mask]),
            "counterfactual/nonzero_step_share": _share(step[real_mask] != 0),
            "counterfactual/exact_match_nonzero_share": _share(gigpo.step_advantages[real_mask] != 0),
            "counterfactual/halted_share": groups.halted / members if members else float("nan"),
            "counterfactual/value_std": float(groups.values.std(dim=1).mean()) if members else float("nan"),
            "counterfactual/sibling_rows": float(siblings),
            "counterfactual/critic_loss": critic_loss,
            **brancher_metrics,
        }
        if options.fallback_uncertainty is not None and real:
            metrics["counterfactual/state_uncertainty"] = float(uncertainty[real_mask].mean())
        return batch, advantages, metrics

    def _play_groups(
        self, policy: LMPolicy, states: list[tuple[Trajectory, int]], iteration: int
    ) -> tuple[CounterfactualGroups, torch.Tensor, dict[str, float]]:
        """Each real state's group played by the brancher, the members' step advantages (R, G + 1)
        (column 0 the real action) and the brancher's metrics."""
        groups = self.brancher(
            policy.with_seed(derive_seed_63bit(self.seed, "siblings", iteration)),
            self.critic,
            states,
            seed=derive_seed_63bit(self.seed, "dream", iteration),
        )
        brancher_metrics = self.brancher.metrics()
        member_advantages = counterfactual_step_advantages(groups.values, mode=self.algo.mode)  # (R, G + 1)
        return groups, member_advantages, brancher_metrics

    def _step_columns(
        self, n: int, real: list[int], states: list[tuple[Trajectory, int]], member_advantages: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per row (B,): the real action's counterfactual step advantage, whether it has one, and the
        world model's uncertainty of the real transition (0 where not measured)."""
        counterfactual = torch.zeros(n)  # (B,)
        available = torch.zeros(n, dtype=torch.bool)  # (B,)
        uncertainty = torch.zeros(n)  # (B,)
        if member_advantages is not None:
            counterfactual[real] = member_advantages[:, 0]
            available[real] = True
            if self.options.fallback_uncertainty is not None:
                uncertainty[real] = real_transition_uncertainty(self.world_model, states)
        return counterfactual, available, uncertainty

    def _with_siblings(
        self,
        policy: LMPolicy,
        batch: RolloutBatch,
        per_row: torch.Tensor,
        real: list[int],
        groups: CounterfactualGroups,
        member_advantages: torch.Tensor,
        fell_back: torch.Tensor,
    ) -> tuple[RolloutBatch, torch.Tensor, int]:
        """``siblings_in_gradient``: the batch with one row per sibling's first imagined action
        appended (its own step advantage times omega), except at rows that fell back to GiGPO."""
        sibling_rows: list[Trajectory] = []
        sibling_advantages: list[float] = []
        next_id = max(t.trajectory_id for t in batch.trajectories) + 1
        next_group = max(t.group_id for t in batch.trajectories) + 1
        for r, b in enumerate(real):
            if fell_back[b]:
                continue  # the model is not trusted here: its siblings teach nothing either
            for g, member in enumerate(groups.members[r][1:], start=1):
                sibling_rows.append(_first_turn_only(member, next_id, next_group + r))
                sibling_advantages.append(self.algo.omega * float(member_advantages[r, g]))
                next_id += 1
        if sibling_rows:
            weights = _trajectory_weights(batch)
            batch = build_rollout_batch(
                batch.trajectories + sibling_rows,
                pad_id=policy.pad_token_id,
                weights=weights + [self.imagination.imagined_weight] * len(sibling_rows),
            )
            per_row = torch.cat([per_row, torch.tensor(sibling_advantages)])
        return batch, per_row, len(sibling_rows)


def _first_turn_only(member: Trajectory, trajectory_id: int, group_id: int) -> Trajectory:
    """The imagined member cut after its first imagined turn: one trainable row, the sibling action."""
    k = member.branch_turn
    return Trajectory(
        env_name=member.env_name,
        env_kwargs=dict(member.env_kwargs),
        seed=member.seed,
        group_id=group_id,
        trajectory_id=trajectory_id,
        source="imagined",
        turns=list(member.turns[: k + 1]),
        branch_turn=k,
        truncated=not member.turns[k].done,
        success=False,
        iteration=member.iteration,
        policy_version=member.policy_version,
    )


def _trajectory_weights(batch: RolloutBatch) -> list[float]:
    """One policy-loss weight per trajectory of ``batch`` (that of its rows; 1 for one without rows)."""
    weights = [1.0] * len(batch.trajectories)
    for (i, _), w in zip(batch.row_keys, batch.weights.tolist(), strict=True):
        weights[i] = w
    return weights


def _share(flags: torch.Tensor) -> float:
    return float(flags.float().mean()) if flags.numel() else float("nan")
