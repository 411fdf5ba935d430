"""Micro-batch rows and shares, against hand-worked numbers."""

import pytest
import torch

from policy.micro_batches import Shares, metric_share, micro_batch_shares, micro_rows

# Five rows: response tokens 2, 3, 0, 2, 1 (row 2 has none); value mask 1, 0, 1, 1, 0; micro-batches of 2, 2, 1.
TOKENS = torch.tensor([2.0, 3.0, 0.0, 2.0, 1.0])
VALUE_MASK = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])


def test_shares_by_hand():
    shares = micro_batch_shares(TOKENS, VALUE_MASK, [2, 2, 1])
    # tokens: 2+3=5, 0+2=2, 1 of 8; sequences with a response token: 2, 1, 1 of 4; value rows: 1, 2, 0 of 3.
    assert [s.tokens for s in shares] == [5 / 8, 2 / 8, 1 / 8]
    assert [s.sequences for s in shares] == [2 / 4, 1 / 4, 1 / 4]
    assert [s.value_rows for s in shares] == pytest.approx([1 / 3, 2 / 3, 0.0], abs=1e-15)


def test_loss_shares_follow_the_aggregation_and_the_value_level():
    share = Shares(tokens=5 / 8, sequences=2 / 4, value_rows=1 / 3)
    assert share.of_agg("token-mean") == 5 / 8
    for agg in ("seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        assert share.of_agg(agg) == 2 / 4
        assert share.of_value("token", agg) == 2 / 4  # token-level values are aggregated like the policy
    assert share.of_value("token", "token-mean") == 5 / 8
    assert share.of_value("turn", "token-mean") == share.of_value("sequence", "seq-mean-token-sum") == 1 / 3


def test_metric_shares():
    share = Shares(tokens=0.625, sequences=0.5, value_rows=0.25)
    for key in ("losses/approx_kl", "losses/clipfrac", "losses/clipfrac_lower", "losses/entropy"):
        assert metric_share(key, share, "seq-mean-token-mean", None) == 0.625  # token means, whatever agg
    assert metric_share("losses/policy_loss", share, "seq-mean-token-sum", None) == 0.5
    assert metric_share("losses/kl_ref", share, "token-mean", None) == 0.625
    assert metric_share("losses/value_loss", share, "seq-mean-token-sum", "token") == 0.5
    assert metric_share("losses/value_loss", share, "token-mean", "turn") == 0.25
    assert metric_share("losses/value_clipfrac", share, "seq-mean-token-sum", "token") == 0.625
    assert metric_share("losses/value_clipfrac", share, "token-mean", "turn") == 0.25
    with pytest.raises(KeyError, match="losses/grad_norm"):
        metric_share("losses/grad_norm", share, "token-mean", None)


def test_shares_of_an_empty_minibatch_are_zero_and_a_missing_value_mask_gives_zero():
    shares = micro_batch_shares(torch.zeros(3), None, [1, 2])
    assert all(s == Shares(0.0, 0.0, 0.0) for s in shares)


def test_shares_sum_to_one():
    shares = micro_batch_shares(TOKENS, VALUE_MASK, [1, 1, 1, 1, 1])
    assert sum(s.tokens for s in shares) == pytest.approx(1.0)
    assert sum(s.sequences for s in shares) == pytest.approx(1.0)
    assert sum(s.value_rows for s in shares) == pytest.approx(1.0)


def test_sizes_must_cover_the_minibatch():
    with pytest.raises(ValueError, match="sum to the minibatch's 5 rows"):
        micro_batch_shares(TOKENS, None, [2, 2])


def test_micro_rows_are_contiguous_chunks():
    idx = torch.tensor([5, 3, 1, 0, 2])
    assert [c.tolist() for c in micro_rows(idx, 2)] == [[5, 3], [1, 0], [2]]
    assert [c.tolist() for c in micro_rows(idx, None)] == [[5, 3, 1, 0, 2]]
    assert [c.tolist() for c in micro_rows(idx, 9)] == [[5, 3, 1, 0, 2]]
    with pytest.raises(ValueError, match="micro_batch_size must be >= 1"):
        micro_rows(idx, 0)


def test_a_minibatch_with_a_single_response_token_gives_it_the_whole_share():
    # One token and one value row in the whole minibatch, both in the second micro-batch: it carries the
    # minibatch's loss alone (share 1), the first none (a denominator of exactly 1 is not empty).
    first, second = micro_batch_shares(torch.tensor([0, 0, 1]), torch.tensor([0.0, 0.0, 1.0]), [2, 1])
    assert first == Shares(tokens=0.0, sequences=0.0, value_rows=0.0)
    assert second == Shares(tokens=1.0, sequences=1.0, value_rows=1.0)
