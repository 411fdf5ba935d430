"""Non-finite losses and gradients: the step is skipped, counted, and too many in a row stop training."""

from __future__ import annotations

import math

import pytest
import torch

from policy.config import PPOConfig
from policy.learner import NonFiniteUpdateError
from tests.policy.test_learner import hand_batch, make_learner, tiny_lm


def snapshot(learner) -> list[torch.Tensor]:
    return [p.detach().clone() for p in learner.policy.parameters()]


def advantages_with(batch, bad_row: int | None, bad_value: float = math.nan) -> torch.Tensor:
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])  # (B, L)
    if bad_row is not None:
        advantages[bad_row, -1] = bad_value
    return advantages


@pytest.mark.parametrize("bad_value", [math.nan, math.inf])
def test_a_nonfinite_loss_takes_no_step(bad_value: float) -> None:
    batch = hand_batch()
    learner = make_learner(tiny_lm(), PPOConfig(epochs=1, minibatch_size=64, lr=1e-2))
    before = snapshot(learner)
    stats = learner.update(batch, advantages_with(batch, 2, bad_value))
    assert stats["losses/nonfinite_steps"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(learner), strict=True))
    assert learner.policy_optimizer.state_dict()["state"] == {}  # Adam never stepped: no moments
    assert all(p.grad is None for p in learner.policy.parameters())
    assert learner.nonfinite_in_a_row == 1


def test_only_the_bad_minibatch_is_skipped_and_a_finite_update_resets_the_count() -> None:
    batch = hand_batch()
    learner = make_learner(tiny_lm(), PPOConfig(epochs=1, minibatch_size=1, lr=1e-2), max_nonfinite_updates=1)
    before = snapshot(learner)
    stats = learner.update(batch, advantages_with(batch, 0))
    assert stats["losses/nonfinite_steps"] == 1.0  # one row per minibatch: 1 of 4 steps skipped
    assert all(math.isfinite(v) for v in stats.values())  # averaged over the three steps taken
    after = snapshot(learner)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert all(bool(torch.isfinite(p).all()) for p in after)
    stats = learner.update(batch, advantages_with(batch, None))
    assert stats["losses/nonfinite_steps"] == 0.0 and learner.nonfinite_in_a_row == 0


def test_a_nonfinite_gradient_with_a_finite_loss_is_skipped() -> None:
    batch = hand_batch()
    learner = make_learner(tiny_lm(), PPOConfig(epochs=1, minibatch_size=64, lr=1e-2))
    weight = next(learner.policy.parameters())
    weight.register_hook(lambda grad: torch.full_like(grad, math.inf))
    before = snapshot(learner)
    stats = learner.update(batch, advantages_with(batch, None))
    assert math.isfinite(stats.get("losses/policy_loss", 0.0))
    assert stats["losses/nonfinite_steps"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(learner), strict=True))


def test_too_many_nonfinite_updates_in_a_row_stop_with_a_clear_message() -> None:
    batch = hand_batch()
    learner = make_learner(tiny_lm(), PPOConfig(epochs=1, minibatch_size=64), max_nonfinite_updates=2)
    learner.update(batch, advantages_with(batch, 1))
    learner.update(batch, advantages_with(batch, 1))  # two in a row: still allowed
    with pytest.raises(
        NonFiniteUpdateError,
        match="3 updates in a row had a non-finite loss or gradient.*max_nonfinite_updates=2",
    ):
        learner.update(batch, advantages_with(batch, 1))


def test_max_nonfinite_updates_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="max_nonfinite_updates must be >= 0"):
        make_learner(tiny_lm(), PPOConfig(), max_nonfinite_updates=-1)
