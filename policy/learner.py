"""The PPO learner: clipped policy updates (plus an optional critic) on Lightning Fabric.

One ``update`` runs ``epochs`` passes of shuffled minibatches over a ``TokenBatch`` (one row per
agent turn). Per minibatch: log-probs and entropies are recomputed, the verl-style clipped policy
loss is taken (per-sample weights passed through), an optional KL to a frozen reference policy and
an entropy bonus are added, and, when a value model is given, its clipped value loss. One backward
pass, gradient clipping per model, one step of each model's own optimizer.

Alignment: ``advantages``, ``old_logp``, ``returns`` and ``old_values`` are ``(B, L)`` and are read
on the response tokens only. Values are token-aligned (see ``policy.value_model.token_values``):
at response column ``t`` the value of the state before token ``t``.

Multi-process: every rank must hold the same number of rows (so all ranks take the same number of
optimizer steps); gradients are averaged across ranks by DDP, so with ``token-mean`` the update is
the mean of the per-rank token means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from lightning.fabric import Fabric

from policy.batch import TokenBatch
from policy.logprobs import token_logprobs
from policy.losses import (
    AGG_MODES,
    KL_KINDS,
    aggregate,
    clipped_value_loss,
    entropy_bonus,
    explained_variance,
    kl_penalty,
    ppo_policy_loss,
)
from policy.value_model import token_values


@dataclass
class PPOConfig:
    """Hyper-parameters of one PPO update."""

    epochs: int = 2
    """Passes over the batch per update."""
    minibatch_size: int = 64
    """Rows per optimizer step (per rank); the last minibatch of a pass may be smaller."""
    lr: float = 1e-4
    """Adam learning rate of the policy."""
    value_lr: float = 1e-3
    """Adam learning rate of the value model."""
    clip_low: float = 0.2
    """Lower PPO clip: the ratio is clipped at ``1 - clip_low``."""
    clip_high: float = 0.2
    """Upper PPO clip: the ratio is clipped at ``1 + clip_high`` (DAPO's clip-higher when larger)."""
    dual_clip: float | None = None
    """Dual-clip constant ``c`` (> 1) bounding the loss of negative-advantage tokens; None turns it off."""
    loss_agg: str = "token-mean"
    """How token losses become one number: one of ``AGG_MODES`` (verl's names)."""
    loss_scale_factor: float | None = None
    """Divisor of ``seq-mean-token-sum-norm`` (Dr. GRPO); None uses the padded length."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (subtracted from the loss)."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    value_clip: float | None = 0.2
    """Clip range of the value prediction around the old value; None turns value clipping off."""
    max_grad_norm: float | None = 1.0
    """Gradient-norm clip applied to each model separately; None only measures the norm."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference policy (needs ``ref_model``)."""
    kl_kind: str = "k3"
    """KL estimator: one of ``KL_KINDS``."""
    seed: int = 0
    """Seeds the minibatch shuffle: update ``n`` shuffles with ``seed + n``."""

    def __post_init__(self) -> None:
        for name in ("epochs", "minibatch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"PPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "value_lr", "clip_high", "entropy_coef", "value_coef", "kl_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"PPOConfig.{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.clip_low < 1:
            raise ValueError(f"PPOConfig.clip_low must be in [0, 1), got {self.clip_low}")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ValueError(f"PPOConfig.dual_clip must be > 1 or None, got {self.dual_clip}")
        if self.loss_agg not in AGG_MODES:
            raise ValueError(f"PPOConfig.loss_agg must be one of {AGG_MODES}, got {self.loss_agg!r}")
        if self.loss_scale_factor is not None and self.loss_scale_factor <= 0:
            raise ValueError(f"PPOConfig.loss_scale_factor must be > 0 or None, got {self.loss_scale_factor}")
        for name in ("value_clip", "max_grad_norm"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(f"PPOConfig.{name} must be > 0 or None, got {getattr(self, name)}")
        if self.kl_kind not in KL_KINDS:
            raise ValueError(f"PPOConfig.kl_kind must be one of {KL_KINDS}, got {self.kl_kind!r}")


def _in_eval_chunks(model: torch.nn.Module, batch: TokenBatch, chunk_size: int, fn) -> torch.Tensor:
    """Concatenate ``fn(model, ids, mask)`` over row chunks, without gradients and in eval mode."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            parts = [
                fn(
                    model,
                    batch.input_ids[start : start + chunk_size],
                    batch.attention_mask[start : start + chunk_size],
                )
                for start in range(0, len(batch), chunk_size)
            ]
    finally:
        model.train(was_training)
    return torch.cat(parts, dim=0)


def compute_old_logp(model: torch.nn.Module, batch: TokenBatch, chunk_size: int) -> torch.Tensor:
    """``(B, L)`` log-probs of ``batch`` under ``model`` (no gradient), ``chunk_size`` rows at a time.

    ``batch`` must already be on the model's device.
    """
    return _in_eval_chunks(model, batch, chunk_size, lambda m, ids, mask: token_logprobs(m, ids, mask)[0])


def compute_values(value_model: torch.nn.Module, batch: TokenBatch, chunk_size: int) -> torch.Tensor:
    """``(B, L)`` token-aligned values (``token_values``: 0 off the response), no gradient.

    Its first response column is each turn's value (``turn_values``). ``batch`` must already be on
    the model's device.
    """
    raw = _in_eval_chunks(value_model, batch, chunk_size, lambda m, ids, mask: m(ids, mask))  # (B, L)
    return token_values(raw, batch.response_mask)


class PPOLearner:
    """Owns the policy (and optional value model) with their optimizers, set up by Fabric."""

    def __init__(
        self,
        fabric: Fabric,
        policy_model: torch.nn.Module,
        cfg: PPOConfig,
        *,
        value_model: torch.nn.Module | None = None,
        ref_model: torch.nn.Module | None = None,
    ) -> None:
        if cfg.kl_coef > 0 and ref_model is None:
            raise ValueError("PPOConfig.kl_coef > 0 needs a ref_model")
        self.fabric = fabric
        self.cfg = cfg
        self.policy, self.policy_optimizer = fabric.setup(
            policy_model, torch.optim.Adam(policy_model.parameters(), lr=cfg.lr)
        )
        self.value_model = self.value_optimizer = None
        if value_model is not None:
            self.value_model, self.value_optimizer = fabric.setup(
                value_model, torch.optim.Adam(value_model.parameters(), lr=cfg.value_lr)
            )
        self.ref_model = None
        if ref_model is not None:  # frozen: not wrapped (DDP refuses a module without trainable parameters)
            self.ref_model = ref_model.requires_grad_(False).eval().to(fabric.device)
        self.num_updates = 0

    def update(
        self,
        batch: TokenBatch,
        advantages: torch.Tensor,
        old_logp: torch.Tensor,
        *,
        returns: torch.Tensor | None = None,
        old_values: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
    ) -> dict[str, float]:
        """One PPO update; returns the minibatch-averaged (and rank-averaged) ``losses/*`` metrics.

        ``advantages``, ``old_logp``, ``returns``, ``old_values``: ``(B, L)``; ``weights``: ``(B,)``
        per-row weights of the policy, KL and entropy terms (not of the value loss); as in
        ``ppo_policy_loss``, a weight-0 row adds no gradient but its tokens still count in the
        ``token-mean`` denominator. ``returns`` is
        required exactly when the learner has a value model; ``old_values`` defaults to the value
        model's predictions before this update.
        """
        cfg, device = self.cfg, self.fabric.device
        if (returns is None) != (self.value_model is None):
            raise ValueError("returns must be given exactly when the learner has a value model")
        batch = batch.to(device)
        shape = tuple(batch.input_ids.shape)
        tensors = {
            "advantages": advantages,
            "old_logp": old_logp,
            "returns": returns,
            "old_values": old_values,
        }
        for name, tensor in tensors.items():
            if tensor is not None and tuple(tensor.shape) != shape:
                raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected {shape} like input_ids")
        if weights is not None and tuple(weights.shape) != shape[:1]:
            raise ValueError(f"weights has shape {tuple(weights.shape)}, expected {shape[:1]}")
        per_token = {k: v.to(device).float() for k, v in tensors.items() if v is not None}  # each (B, L)
        rows = len(batch)
        if self.ref_model is not None:
            per_token["ref_logp"] = compute_old_logp(self.ref_model, batch, cfg.minibatch_size)  # (B, L)
        if self.value_model is not None and old_values is None:
            per_token["old_values"] = compute_values(self.value_model, batch, cfg.minibatch_size)  # (B, L)
        row_weights = None if weights is None else weights.to(device).float()  # (B,)
        self._check_ranks_agree(math.ceil(rows / cfg.minibatch_size))

        generator = torch.Generator().manual_seed(cfg.seed + self.num_updates)
        self.policy.train()
        if self.value_model is not None:
            self.value_model.train()
        totals: dict[str, float] = {}
        steps = 0
        for _ in range(cfg.epochs):
            order = torch.randperm(rows, generator=generator).to(device)  # (B,)
            for start in range(0, rows, cfg.minibatch_size):
                idx = order[start : start + cfg.minibatch_size]  # (b,)
                minibatch = {k: v[idx] for k, v in per_token.items()}
                step_weights = None if row_weights is None else row_weights[idx]
                for key, value in self._step(batch.index(idx), minibatch, step_weights).items():
                    totals[key] = totals.get(key, 0.0) + value
                steps += 1
        self.num_updates += 1

        metrics = {key: total / steps for key, total in totals.items()}
        if self.value_model is not None:
            mask = batch.response_mask.float()
            metrics["losses/explained_variance"] = float(
                explained_variance(per_token["old_values"], per_token["returns"], mask)
            )
        return self._mean_over_ranks(metrics)

    def _step(
        self, batch: TokenBatch, tensors: dict[str, torch.Tensor], weights: torch.Tensor | None
    ) -> dict[str, float]:
        """Loss, backward, clip and step on one minibatch; returns its metrics."""
        cfg = self.cfg
        mask = batch.response_mask.float()  # (b, L)
        token_weights = None if weights is None else weights.unsqueeze(1)  # (b, 1)
        logp, entropy = token_logprobs(self.policy, batch.input_ids, batch.attention_mask)  # (b, L) each
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
        loss = policy_loss - cfg.entropy_coef * entropy_bonus(weighted_entropy, mask, cfg.loss_agg)
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
        if self.value_model is not None:
            values = token_values(self.value_model(batch.input_ids, batch.attention_mask), mask)  # (b, L)
            value_loss, value_stats = clipped_value_loss(
                values,
                tensors["old_values"],
                tensors["returns"],
                mask,
                clip=math.inf if cfg.value_clip is None else cfg.value_clip,
                agg=cfg.loss_agg,
                scale_factor=cfg.loss_scale_factor,
            )
            loss = loss + cfg.value_coef * value_loss
            metrics["losses/value_loss"] = value_loss.item()
            metrics["losses/value_clipfrac"] = float(value_stats["clipfrac"])

        optimizers = [(self.policy, self.policy_optimizer)]
        if self.value_model is not None:
            optimizers.append((self.value_model, self.value_optimizer))
        for _, optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        self.fabric.backward(loss)
        max_norm = math.inf if cfg.max_grad_norm is None else cfg.max_grad_norm
        norms = [
            self.fabric.clip_gradients(model, optimizer, max_norm=max_norm) for model, optimizer in optimizers
        ]
        for _, optimizer in optimizers:
            optimizer.step()
        metrics["losses/grad_norm"] = float(norms[0])
        if len(norms) > 1:
            metrics["losses/value_grad_norm"] = float(norms[1])
        return metrics

    def _check_ranks_agree(self, num_minibatches: int) -> None:
        """Fail on every rank, instead of hanging, when ranks would take different numbers of steps."""
        if self.fabric.world_size == 1:
            return
        counts = self.fabric.all_gather(torch.tensor(num_minibatches, device=self.fabric.device))
        if bool((counts != num_minibatches).any()):
            raise ValueError(
                f"ranks hold different numbers of minibatches per epoch: {counts.flatten().tolist()}"
            )

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
        }
        if self.value_model is not None:
            state["value_model"] = self.value_model.state_dict()
            state["value_optimizer"] = self.value_optimizer.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned (e.g. from ``fabric.load(path)``)."""
        has_value = "value_model" in state
        if has_value != (self.value_model is not None):
            raise ValueError(
                f"checkpoint {'has' if has_value else 'lacks'} a value model but this learner "
                f"{'lacks' if has_value else 'has'} one"
            )
        self.policy.load_state_dict(state["policy"])
        self.policy_optimizer.load_state_dict(state["policy_optimizer"])
        if has_value:
            self.value_model.load_state_dict(state["value_model"])
            self.value_optimizer.load_state_dict(state["value_optimizer"])
        self.num_updates = int(state["num_updates"])
