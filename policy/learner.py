"""The PPO learner: clipped policy updates (plus an optional critic) on Lightning Fabric.

One ``update`` runs ``epochs`` passes of shuffled minibatches over a ``TokenBatch`` (one row per
agent turn, the ids the policy sampled). Minibatches are length-aware by default (rows of similar
length drawn together, each minibatch cut to its longest row: ``policy.minibatches``), which changes
which rows meet but not what a minibatch's loss is. Per minibatch: log-probs and entropies are recomputed, the
verl-style clipped policy loss is taken (per-sample weights passed through), an optional KL to a
frozen reference policy and an entropy bonus are added, and, when a critic is given, its value loss
at the level of the algorithm (``policy.value_targets``). One backward pass, gradient clipping per
model, one step of each model's own optimizer.

Micro-batches (``micro_batch_size``): a minibatch is cut into contiguous chunks of rows, each trimmed of
its own padding, run forward and backward in turn with its loss scaled by its share of the minibatch's
denominators (``policy.micro_batches``), so the accumulated gradient is the minibatch's; then one clip
and one step. The step's metrics are the micro-batches' combined with the same shares, so they are the
minibatch's too. Both are equal up to floating-point rounding only (different summation order, and a
model's outputs on differently trimmed rows may round differently), not approximations. The no-grad
passes (old and reference log-probs) run over the same micro-batches as the first epoch.

Everything the update compares goes through the same Fabric-wrapped modules, on Fabric's device and
under its precision: old log-probs, reference log-probs, old values. ``advantages`` and ``old_logp``
are ``(B, L)`` and are read on the response tokens only.

Non-finite losses and gradients: a minibatch whose loss or gradient norm is NaN or infinite takes no
optimizer step (its gradients are dropped and the optimizers' states are untouched); the update
reports how many steps it skipped in ``losses/nonfinite_steps`` and averages its other metrics over
the steps taken. After more than ``max_nonfinite_updates`` updates in a row with a skipped step,
``update`` raises ``NonFiniteUpdateError``: the run is diverging, not hitting one bad batch.

Multi-process: every rank takes as many optimizer steps per epoch as the rank with the most
minibatches (a rank with fewer rows cuts its rows into more, smaller minibatches), since DDP's
gradient all-reduce runs in lockstep; gradients are averaged across ranks by DDP, so with
``token-mean`` the update is the mean of the per-rank token means.
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from typing import Any

import torch
from lightning.fabric import Fabric

from critic import CriticStates, token_values
from policy.batch import TokenBatch
from policy.config import PPOConfig
from policy.logprobs import scored_token_logprobs, token_logprobs
from policy.losses import (
    aggregate,
    clipped_value_loss,
    entropy_bonus,
    explained_variance,
    kl_penalty,
    ppo_policy_loss,
    sequence_value_loss,
)
from policy.micro_batches import Shares, metric_share, micro_batch_shares, micro_rows
from policy.minibatches import minibatch_indices, padding_columns, trim_columns
from policy.value_targets import ValueTargets


class NonFiniteUpdateError(RuntimeError):
    """Too many updates in a row had a non-finite loss or gradient."""


class PPOLearner:
    """Owns the policy (and optional critic) with their optimizers, set up by Fabric.

    ``seed`` drives the minibatch shuffle: update ``n`` shuffles with a generator seeded
    ``seed + n``, so a run's seed fixes every minibatch and nothing reads the global RNG.
    """

    def __init__(
        self,
        fabric: Fabric,
        policy_model: torch.nn.Module,
        cfg: PPOConfig,
        *,
        seed: int,
        critic: torch.nn.Module | None = None,
        ref_model: torch.nn.Module | None = None,
        max_nonfinite_updates: int = 3,
        scored_logits: bool = False,
    ) -> None:
        if max_nonfinite_updates < 0:
            raise ValueError(f"max_nonfinite_updates must be >= 0, got {max_nonfinite_updates}")
        if cfg.kl_coef > 0 and ref_model is None:
            raise ValueError("PPOConfig.kl_coef > 0 needs a ref_model")
        if cfg.loss_agg == "seq-mean-token-sum-norm" and cfg.loss_scale_factor is None:
            raise ValueError(
                "PPOConfig.loss_scale_factor must be set for seq-mean-token-sum-norm: a constant (the action "
                "token budget) keeps the loss scale from changing with each batch's padded width"
            )
        self.fabric = fabric
        self.cfg = cfg
        self.seed = seed
        self.scored_logits = scored_logits  # the LM head only at the response tokens (policy.scored_logits)
        self.policy, self.policy_optimizer = fabric.setup(
            policy_model, torch.optim.Adam(policy_model.parameters(), lr=cfg.lr)
        )
        self.critic = self.critic_optimizer = None
        if critic is not None:
            self.critic, self.critic_optimizer = fabric.setup(
                critic, torch.optim.Adam(critic.parameters(), lr=cfg.value_lr)
            )
            if hasattr(critic, "token_values"):  # a second entry point that must go through Fabric too
                self.critic.mark_forward_method("token_values")
        self.ref_model = None
        if ref_model is not None:  # frozen: not wrapped (DDP refuses a module without trainable parameters)
            self.ref_model = ref_model.requires_grad_(False).eval().to(fabric.device)
        self.num_updates = 0
        self.max_nonfinite_updates = max_nonfinite_updates
        self.nonfinite_in_a_row = 0  # consecutive updates that skipped a non-finite step

    @torch.no_grad()
    def old_logprobs(self, batch: TokenBatch, chunk_size: int) -> torch.Tensor:
        """(B, L) log-probs of ``batch`` under the Fabric-wrapped policy (its device and precision)."""
        return self._in_eval_mode(
            self.policy, lambda: _chunked(batch.to(self.fabric.device), chunk_size, self._policy_logp)
        )

    @torch.no_grad()
    def critic_values(self, states: CriticStates, chunk_size: int) -> torch.Tensor:
        """(N,) values of ``states`` under the Fabric-wrapped critic, no gradient."""
        states = states.to(self.fabric.device)
        parts = [
            self._in_eval_mode(self.critic, lambda rows=rows: self.critic(states.index(rows)).float())
            for rows in torch.arange(len(states), device=self.fabric.device).split(chunk_size)
        ]
        return torch.cat(parts) if parts else torch.zeros(0, device=self.fabric.device)

    @torch.no_grad()
    def critic_token_values(self, batch: TokenBatch, chunk_size: int) -> torch.Tensor:
        """(B, L) token-aligned values (0 off the response) under the Fabric-wrapped critic."""
        batch = batch.to(self.fabric.device)
        raw = self._in_eval_mode(self.critic, lambda: _chunked(batch, chunk_size, self._raw_token_values))
        return token_values(raw, batch.response_mask)

    def update(
        self,
        batch: TokenBatch,
        advantages: torch.Tensor,
        *,
        old_logp: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
        value: ValueTargets | None = None,
    ) -> dict[str, float]:
        """One PPO update; returns the minibatch-averaged (and rank-averaged) ``losses/*`` metrics.

        ``advantages``: ``(B, L)``, read on the response tokens. ``old_logp``: ``(B, L)``; by default
        the policy's log-probs before this update, computed through the same Fabric module, precision
        and (micro-)batch rows as the first epoch's forward passes, so the first ratios are exactly 1.
        ``weights``: ``(B,)`` per-row weights of the policy, KL and entropy terms (not of the value
        loss); as in ``ppo_policy_loss``, a weight-0 row adds no gradient but its tokens still count
        in the ``token-mean`` denominator. ``value`` is required exactly when the learner has a critic.
        """
        if (value is None) != (self.critic is None):
            raise ValueError("value targets must be given exactly when the learner has a critic")
        batch = batch.to(self.fabric.device)
        _check_update_shapes(tuple(batch.input_ids.shape), advantages, old_logp, weights)
        minibatches = self._plan_minibatches(batch)
        per_row = self._per_row_tensors(batch, minibatches, advantages, old_logp, weights, value)
        totals, steps, skipped = self._run_epochs(batch, minibatches, per_row, value)
        self.num_updates += 1
        self._count_nonfinite(skipped, steps)
        metrics = {key: total / max(steps, 1) for key, total in totals.items()}
        metrics["losses/nonfinite_steps"] = float(skipped)
        if value is not None and value.old_values is not None:
            mask = batch.response_mask if value.level == "token" else per_row["value_mask"]
            metrics["losses/explained_variance"] = float(
                explained_variance(per_row["old_values"], per_row["returns"], mask)
            )
        return self._mean_over_ranks(metrics)

    def _plan_minibatches(self, batch: TokenBatch) -> list[list[torch.Tensor]]:
        """Per epoch, each minibatch's (b,) row indices: length-bucketed, shuffled from ``seed`` plus the
        update count, and split so every rank takes as many steps as the busiest one."""
        cfg, device = self.cfg, self.fabric.device
        rows = len(batch)
        target = self._minibatches_on_every_rank(math.ceil(rows / cfg.minibatch_size), rows)
        generator = torch.Generator().manual_seed(self.seed + self.num_updates)
        minibatches = [  # per epoch, each minibatch's (b,) row indices
            [idx.to(device) for idx in epoch]
            for epoch in minibatch_indices(
                batch.attention_mask.sum(dim=1), epochs=cfg.epochs, minibatch_size=cfg.minibatch_size,
                length_buckets=cfg.length_buckets, generator=generator,
            )
        ]
        return [_split_to(epoch, target) for epoch in minibatches]  # as many steps as the busiest rank

    def _per_row_tensors(
        self,
        batch: TokenBatch,
        minibatches: list[list[torch.Tensor]],
        advantages: torch.Tensor,
        old_logp: torch.Tensor | None,
        weights: torch.Tensor | None,
        value: ValueTargets | None,
    ) -> dict[str, torch.Tensor]:
        """Everything the steps read per row, on the device, each (B, ...): advantages, old (and
        reference) log-probs, weights and the value targets."""
        cfg, device = self.cfg, self.fabric.device
        per_row: dict[str, torch.Tensor] = {"advantages": advantages.to(device).float()}  # each (B, ...)
        if old_logp is None:
            old_logp = self._over_minibatches(
                batch, minibatches[0], lambda part: self._in_eval_mode(self.policy, lambda: self._policy_logp(part))
            )
        per_row["old_logp"] = old_logp.to(device).float()
        if self.ref_model is not None:
            with self.fabric.autocast():  # the update's precision, for the reference too
                per_row["ref_logp"] = (
                    self._over_minibatches(batch, minibatches[0], self._ref_logp) if cfg.trim_padding
                    else _chunked(batch, cfg.micro_batch_size or cfg.minibatch_size, self._ref_logp)
                )
        if weights is not None:
            per_row["weights"] = weights.to(device).float()
        if value is not None:
            self._check_value_targets(value, len(batch), tuple(batch.input_ids.shape))
            per_row["returns"] = value.returns.to(device).float()
            per_row["value_mask"] = value.row_mask().to(device)
            if value.old_values is not None:
                per_row["old_values"] = value.old_values.to(device).float()
        return per_row

    def _run_epochs(
        self,
        batch: TokenBatch,
        minibatches: list[list[torch.Tensor]],
        per_row: dict[str, torch.Tensor],
        value: ValueTargets | None,
    ) -> tuple[dict[str, float], int, int]:
        """One ``_step`` per minibatch of every epoch: the summed metrics, steps taken and steps skipped."""
        states = None if value is None or value.states is None else value.states.to(self.fabric.device)
        # The (B, L) tensors, cut with the minibatch's columns; the others are (B,), one value per row.
        token_aligned = {"advantages", "old_logp", "ref_logp"} | (
            {"returns", "old_values"} if value is not None and value.level == "token" else set()
        )
        self.policy.train()
        if self.critic is not None:
            self.critic.train()
        totals: dict[str, float] = {}
        steps = skipped = 0
        for epoch_minibatches in minibatches:
            for idx in epoch_minibatches:  # (b,)
                micro, shares = self._micro_batches(batch, idx, per_row, token_aligned, states)
                step_metrics = self._step(micro, value, shares)
                if step_metrics is None:  # non-finite: no step taken, nothing averaged in
                    skipped += 1
                    continue
                for key, metric in step_metrics.items():
                    totals[key] = totals.get(key, 0.0) + metric
                steps += 1
        return totals, steps, skipped

    def _micro_batches(
        self,
        batch: TokenBatch,
        idx: torch.Tensor,
        per_row: dict[str, torch.Tensor],
        token_aligned: set[str],
        states: CriticStates | None,
    ) -> tuple[list[tuple[TokenBatch, dict[str, torch.Tensor], CriticStates | None]], list[Shares] | None]:
        """The minibatch ``idx`` (b,) as micro-batches (each its rows, trimmed, with its per-row tensors and
        critic states) and their shares of the minibatch's denominators (None when there is one)."""
        micro = []
        for rows in micro_rows(idx, self.cfg.micro_batch_size):  # (m,) each, contiguous
            part, start = self._minibatch(batch, rows)  # (m, L - start)
            tensors = {k: v[rows, start:] if k in token_aligned else v[rows] for k, v in per_row.items()}
            micro.append((part, tensors, None if states is None else states.index(rows)))
        if len(micro) == 1:
            return micro, None
        value_mask = per_row.get("value_mask")  # (B,) or None
        shares = micro_batch_shares(
            batch.response_mask[idx].sum(dim=1), None if value_mask is None else value_mask[idx],
            [len(part) for part, _, _ in micro],
        )
        return micro, shares

    def _count_nonfinite(self, skipped: int, steps: int) -> None:
        """Count updates in a row with a skipped step; too many stop the run."""
        self.nonfinite_in_a_row = self.nonfinite_in_a_row + 1 if skipped else 0
        if self.nonfinite_in_a_row > self.max_nonfinite_updates:
            raise NonFiniteUpdateError(
                f"{self.nonfinite_in_a_row} updates in a row had a non-finite loss or gradient (the last skipped "
                f"{skipped} of {skipped + steps} optimizer steps), more than max_nonfinite_updates="
                f"{self.max_nonfinite_updates}: stopping; lower the learning rate or check the rewards and advantages"
            )

    def _minibatch(self, batch: TokenBatch, idx: torch.Tensor) -> tuple[TokenBatch, int]:
        """The rows ``idx`` of ``batch``, cut to their longest row when ``trim_padding``, and how many leading
        columns were cut."""
        part = batch.index(idx)
        start = padding_columns(part.attention_mask) if self.cfg.trim_padding else 0
        return trim_columns(part, start), start

    def _over_minibatches(self, batch: TokenBatch, minibatches: list[torch.Tensor], fn) -> torch.Tensor:
        """(B, L) no-grad ``fn(micro-batch)`` over exactly these minibatches' micro-batches (as trimmed in the
        update), so the first epoch's forward passes see the same rows and columns; 0 on the columns a
        micro-batch dropped."""
        out = torch.zeros(batch.input_ids.shape, device=self.fabric.device)  # (B, L)
        with torch.no_grad():
            for idx in minibatches:
                for rows in micro_rows(idx, self.cfg.micro_batch_size):
                    part, start = self._minibatch(batch, rows)
                    out[rows, start:] = fn(part)  # (m, L - start)
        return out

    def _logprobs(self, model: torch.nn.Module, batch: TokenBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) log-probs and entropies; with ``scored_logits`` only the response tokens' (0 elsewhere,
        where no loss reads them)."""
        if self.scored_logits:
            return scored_token_logprobs(model, batch.input_ids, batch.attention_mask, batch.response_mask)
        return token_logprobs(model, batch.input_ids, batch.attention_mask)

    def _policy_logp(self, batch: TokenBatch) -> torch.Tensor:
        return self._logprobs(self.policy, batch)[0]

    def _ref_logp(self, batch: TokenBatch) -> torch.Tensor:
        with torch.no_grad():
            return self._logprobs(self.ref_model, batch)[0]

    def _raw_token_values(self, batch: TokenBatch) -> torch.Tensor:
        return self.critic.token_values(batch.input_ids, batch.attention_mask).float()

    @staticmethod
    def _in_eval_mode(model: torch.nn.Module, fn):
        """Run ``fn()`` with ``model`` in eval mode, restoring the mode it had."""
        was_training = model.training
        model.eval()
        try:
            return fn()
        finally:
            model.train(was_training)

    @staticmethod
    def _check_value_targets(value: ValueTargets, rows: int, shape: tuple[int, ...]) -> None:
        expected = shape if value.level == "token" else (rows,)
        if tuple(value.returns.shape) != expected:
            raise ValueError(f"{value.level}-level returns have shape {tuple(value.returns.shape)}, expected {expected}")
        if value.states is not None and len(value.states) != rows:
            raise ValueError(f"value targets hold {len(value.states)} critic states for {rows} rows")

    def _step(
        self,
        micro: list[tuple[TokenBatch, dict[str, torch.Tensor], CriticStates | None]],
        value: ValueTargets | None,
        shares: list[Shares] | None,
    ) -> dict[str, float] | None:
        """Loss and backward on each micro-batch of one minibatch (``shares``: theirs, None for one), then
        clip and step; returns the minibatch's metrics, or None when a loss or a gradient norm is not
        finite (then no optimizer steps)."""
        optimizers = self._optimizers()
        for _, optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        losses, metrics = [], {}
        for i, (batch, tensors, states) in enumerate(micro):
            share = None if shares is None else shares[i]
            with ExitStack() as stack:  # DDP: all-reduce the gradients once, on the last micro-batch's backward
                for model, _ in optimizers if i < len(micro) - 1 else []:
                    stack.enter_context(self.fabric.no_backward_sync(model))
                loss, micro_metrics = self._loss(batch, tensors, value, states, share)
                self.fabric.backward(loss)
            losses.append(loss.detach())
            for key, metric in micro_metrics.items():
                weight = 1.0 if share is None else metric_share(key, share, self.cfg.loss_agg, value and value.level)
                metrics[key] = metrics.get(key, 0.0) + weight * metric
        norms = self._clip_and_step(optimizers, losses)
        if norms is None:
            return None
        metrics["losses/grad_norm"] = float(norms[0])
        if len(norms) > 1:
            metrics["losses/value_grad_norm"] = float(norms[1])
        return metrics

    def _loss(
        self,
        batch: TokenBatch,
        tensors: dict[str, torch.Tensor],
        value: ValueTargets | None,
        states: CriticStates | None,
        share: Shares | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The minibatch's total loss (policy, entropy, KL to the reference, value) and its metrics; for a
        micro-batch (``share`` given) each term is scaled by the micro-batch's share of its denominator,
        and the metrics are the micro-batch's own, unscaled."""
        cfg = self.cfg
        mask = batch.response_mask.float()  # (b, L)
        weights = tensors.get("weights")  # (b,) or None
        token_weights = None if weights is None else weights.unsqueeze(1)  # (b, 1)
        logp, entropy = self._logprobs(self.policy, batch)  # (b, L) each
        policy_loss, policy_stats = ppo_policy_loss(
            logp,
            tensors["old_logp"],
            tensors["advantages"],
            mask,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            dual_clip=cfg.dual_clip,
            agg=cfg.loss_agg,
            scale_factor=cfg.loss_scale_factor,
            weights=weights,
        )
        weighted_entropy = entropy if token_weights is None else entropy * token_weights  # (b, L)
        loss = policy_loss - cfg.entropy_coef * entropy_bonus(weighted_entropy, mask, cfg.loss_agg, cfg.loss_scale_factor)
        metrics = {
            "losses/policy_loss": policy_loss.item(),
            "losses/approx_kl": float(policy_stats["approx_kl"]),
            "losses/clipfrac": float(policy_stats["clipfrac"]),
            "losses/clipfrac_lower": float(policy_stats["clipfrac_lower"]),
            "losses/entropy": float(aggregate(entropy.detach(), mask, "token-mean")),
        }
        if "ref_logp" in tensors:
            kl = kl_penalty(logp, tensors["ref_logp"], cfg.kl_kind)  # (b, L)
            kl = kl if token_weights is None else kl * token_weights
            kl_loss = aggregate(kl, mask, cfg.loss_agg, cfg.loss_scale_factor)
            loss = loss + cfg.kl_coef * kl_loss
            metrics["losses/kl_ref"] = kl_loss.item()
        if share is not None:
            loss = loss * share.of_agg(cfg.loss_agg)  # the policy, entropy and KL terms share a denominator
        if value is not None:
            value_loss, value_clipfrac = self._value_loss(batch, tensors, value.level, states)
            value_term = cfg.value_coef * value_loss
            loss = loss + (value_term if share is None else value_term * share.of_value(value.level, cfg.loss_agg))
            metrics["losses/value_loss"] = value_loss.item()
            if value_clipfrac is not None:
                metrics["losses/value_clipfrac"] = value_clipfrac
        return loss, metrics

    def _optimizers(self) -> list[tuple[torch.nn.Module, torch.optim.Optimizer]]:
        optimizers = [(self.policy, self.policy_optimizer)]
        if self.critic is not None:
            optimizers.append((self.critic, self.critic_optimizer))
        return optimizers

    def _clip_and_step(
        self, optimizers: list[tuple[torch.nn.Module, torch.optim.Optimizer]], losses: list[torch.Tensor]
    ) -> list[torch.Tensor] | None:
        """Clip and step every optimizer on the accumulated gradients; the gradient norms, or None (no
        step, gradients dropped) when a micro-batch's loss or a norm is not finite."""
        cfg = self.cfg
        max_norm = math.inf if cfg.max_grad_norm is None else cfg.max_grad_norm
        norms = [
            self.fabric.clip_gradients(model, optimizer, max_norm=max_norm, error_if_nonfinite=False)
            for model, optimizer in optimizers
        ]
        if not self._all_finite([*losses, *norms]):
            for _, optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            return None
        for _, optimizer in optimizers:
            optimizer.step()
        return norms

    def _value_loss(
        self, batch: TokenBatch, tensors: dict[str, torch.Tensor], level: str, states: CriticStates | None
    ) -> tuple[torch.Tensor, float | None]:
        """The critic's loss on one minibatch at its level, and its clip fraction (None for sequence)."""
        cfg = self.cfg
        clip = math.inf if cfg.value_clip is None else cfg.value_clip
        if level == "sequence":
            logits = self.critic(states).float()  # (b,)
            return sequence_value_loss(logits, tensors["returns"], tensors["value_mask"]), None
        if level == "token":
            mask = batch.response_mask.float()  # (b, L)
            values = token_values(self._raw_token_values(batch), mask)  # (b, L)
            loss, stats = clipped_value_loss(
                values, tensors["old_values"], tensors["returns"], mask, clip=clip, agg=cfg.loss_agg,
                scale_factor=cfg.loss_scale_factor,
            )
            return loss, float(stats["clipfrac"])
        values = self.critic(states).float().unsqueeze(1)  # (b, 1): one value per turn
        loss, stats = clipped_value_loss(
            values, tensors["old_values"].unsqueeze(1), tensors["returns"].unsqueeze(1),
            tensors["value_mask"].unsqueeze(1), clip=clip, agg="token-mean",
        )
        return loss, float(stats["clipfrac"])

    def _all_finite(self, values: list[torch.Tensor]) -> bool:
        """True when every value is finite on every rank (ranks must skip a step together)."""
        bad = torch.tensor(float(not all(bool(torch.isfinite(v).all()) for v in values)), device=self.fabric.device)
        if self.fabric.world_size > 1:
            bad = self.fabric.all_reduce(bad, reduce_op="sum")
        return float(bad) == 0.0

    def _minibatches_on_every_rank(self, num_minibatches: int, rows: int) -> int:
        """The most minibatches per epoch any rank holds, which every rank then takes (DDP steps in lockstep).

        A rank with fewer rows splits its minibatches further; one with fewer rows than that count fails on
        every rank (the decision is collective, so no rank is left waiting in a gradient all-reduce)."""
        if self.fabric.world_size == 1:
            return num_minibatches
        gathered = self.fabric.all_gather(torch.tensor([num_minibatches, rows], device=self.fabric.device))
        counts, row_counts = gathered.reshape(-1, 2).T.tolist()  # per rank
        target = max(counts)
        if min(row_counts) < target:
            raise ValueError(
                f"ranks hold different numbers of minibatches per epoch ({counts}) and some rank holds fewer rows "
                f"({row_counts}) than the {target} steps every rank must take: raise minibatch_size or give every "
                "rank more rows"
            )
        return target

    def _mean_over_ranks(self, metrics: dict[str, float]) -> dict[str, float]:
        if self.fabric.world_size == 1:
            return metrics
        keys = sorted(metrics)
        values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64, device=self.fabric.device)
        values = self.fabric.all_reduce(values, reduce_op="mean")
        return dict(zip(keys, values.tolist(), strict=True))

    def state_dict(self) -> dict[str, Any]:
        """Models, optimizers and the update count, as plain state dicts (for ``fabric.save``)."""
        state: dict[str, Any] = {
            "policy": self.policy.state_dict(),
            "policy_optimizer": self.policy_optimizer.state_dict(),
            "num_updates": self.num_updates,
            "nonfinite_in_a_row": self.nonfinite_in_a_row,
        }
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned (read back from safetensors and JSON, never a pickle)."""
        has_critic = "critic" in state
        if has_critic != (self.critic is not None):
            raise ValueError(
                f"checkpoint {'has' if has_critic else 'lacks'} a critic but this learner "
                f"{'lacks' if has_critic else 'has'} one"
            )
        self.policy.load_state_dict(state["policy"])
        self.policy_optimizer.load_state_dict(state["policy_optimizer"])
        if has_critic:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.num_updates = int(state["num_updates"])
        self.nonfinite_in_a_row = int(state.get("nonfinite_in_a_row", 0))


def _chunked(batch: TokenBatch, chunk_size: int, fn) -> torch.Tensor:
    """``fn(sub-batch)`` over row chunks of ``batch``, concatenated along rows."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    rows = torch.arange(len(batch), device=batch.input_ids.device)
    return torch.cat([fn(batch.index(part)) for part in rows.split(chunk_size)], dim=0)


def _check_update_shapes(
    shape: tuple[int, ...], advantages: torch.Tensor, old_logp: torch.Tensor | None, weights: torch.Tensor | None
) -> None:
    for name, tensor in (("advantages", advantages), ("old_logp", old_logp)):
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected {shape} like input_ids")
    if weights is not None and tuple(weights.shape) != shape[:1]:
        raise ValueError(f"weights has shape {tuple(weights.shape)}, expected {shape[:1]}")


def _split_to(minibatches: list[torch.Tensor], count: int) -> list[torch.Tensor]:
    """``minibatches`` with the largest halved until there are ``count`` (each holds >= 1 row if the rows allow)."""
    parts = list(minibatches)
    while len(parts) < count:
        largest = max(range(len(parts)), key=lambda i: len(parts[i]))
        parts[largest : largest + 1] = list(parts[largest].tensor_split(2))
    return parts
