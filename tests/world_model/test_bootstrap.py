"""Bootstrapped members: each member's loss is its loss on its own resample of the batch."""

import pytest
import torch

from tests.world_model.conftest import tiny_model
from world_model import WorldModelConfig, build_training_batch
from world_model.bootstrap import bootstrap_counts, weighted_mean


def test_counts_are_draws_with_replacement():
    counts = bootstrap_counts(4, 6, torch.Generator().manual_seed(0))
    assert counts.shape == (4, 6)
    assert torch.equal(counts.sum(dim=1), torch.full((4,), 6.0))
    draws = torch.randint(6, (4, 6), generator=torch.Generator().manual_seed(0))
    assert torch.equal(counts[2], torch.bincount(draws[2], minlength=6).float())  # the same stream, counted by hand


def test_weighted_mean_by_hand():
    values = torch.tensor([[1.0, 2.0, 4.0]])
    assert weighted_mean(values, torch.tensor([[2.0, 0.0, 1.0]])).item() == pytest.approx((2 + 4) / 3)


def test_each_member_trains_on_its_own_resample(hn_tokenizer, hn_trajectories):
    items = hn_trajectories[:6]
    pair = tiny_model(hn_tokenizer, num_members=2, seed=0, bootstrap=True).train()
    single = [tiny_model(hn_tokenizer, num_members=1, seed=s) for s in (0, 1)]
    for k, m in enumerate(single):
        m.encoder.load_state_dict(pair.encoder.state_dict())
        m.dynamics.decoders[0].load_state_dict(pair.dynamics.decoders[k].state_dict())
        m.dynamics.heads[0].load_state_dict(pair.dynamics.heads[k].state_dict())
    torch.manual_seed(11)
    counts = bootstrap_counts(2, len(items))
    assert len({tuple(c.tolist()) for c in counts}) == 2  # the two resamples differ for this seed
    torch.manual_seed(11)
    parts = pair.loss(build_training_batch(items, hn_tokenizer))
    expected = {name: 0.0 for name in parts}
    for k, m in enumerate(single):
        resample = [t for t, c in zip(items, counts[k].long().tolist(), strict=True) for _ in range(c)]
        alone = m.loss(build_training_batch(resample, hn_tokenizer))
        for name in expected:
            expected[name] += alone[name]
    for name, value in parts.items():
        assert torch.allclose(value, expected[name], rtol=1e-5, atol=1e-6), name
    pair.eval()  # scoring never resamples
    plain = tiny_model(hn_tokenizer, num_members=2, seed=0).eval()
    batch = build_training_batch(items, hn_tokenizer)
    assert torch.equal(pair.loss(batch)["loss"], plain.loss(batch)["loss"])


def test_bootstrap_must_be_a_bool(hn_tokenizer):
    with pytest.raises(ValueError, match="WorldModelConfig.bootstrap"):
        WorldModelConfig.for_tokenizer(hn_tokenizer, bootstrap="yes")
