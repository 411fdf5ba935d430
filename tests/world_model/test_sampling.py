"""Inverse-CDF draws: the given frequencies, never a zero weight, the same draws for one seed."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from world_model.sampling import draw_categorical, inverse_cdf_sample


def draws(weights: list[float], count: int, seed: int) -> torch.Tensor:
    rows = torch.tensor(weights).expand(count, -1)  # (N, V)
    return inverse_cdf_sample(rows, torch.Generator().manual_seed(seed))  # (N,)


def test_frequencies_follow_the_normalised_weights():
    weights = [0.2, 0.0, 1.2, 0.6]  # sums to 2: normalised 0.1, 0, 0.6, 0.3
    picked = draws(weights, 20_000, seed=0)
    share = torch.bincount(picked, minlength=4).float() / 20_000
    # Binomial standard deviation at p = 0.6 over 20k draws is 0.0035; 0.015 is over four of them.
    gap = (share - torch.tensor([0.1, 0.0, 0.6, 0.3])).abs().max()
    assert gap <= 0.015, share.tolist()


def test_one_seed_gives_one_stream_and_rows_draw_independently():
    weights = [1.0, 1.0, 1.0, 1.0, 1.0]
    first = draws(weights, 64, seed=3)
    assert torch.equal(first, draws(weights, 64, seed=3))
    assert not torch.equal(first, draws(weights, 64, seed=4))
    assert len(set(first.tolist())) == 5  # 64 rows of one distribution do not all draw alike


def test_a_single_positive_weight_is_always_drawn_and_bad_shapes_are_refused():
    assert draws([0.0, 0.0, 3.0, 0.0], 100, seed=1).tolist() == [2] * 100
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        inverse_cdf_sample(torch.ones(3), None)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=10.0)), min_size=1, max_size=12
    ).filter(lambda w: sum(w) > 0),
    st.integers(min_value=0, max_value=2**31),
)
def test_a_zero_weight_is_never_drawn(weights, seed):
    picked = draws(weights, 200, seed=seed)
    assert all(weights[i] > 0 for i in picked.tolist())


def test_the_boundary_rule_is_the_policys():
    """The world model draws with the policy's primitive, whose rule at a tie is "the first running
    sum reaching the target" (>=). Before the two samplers became one, the world model took the first
    running sum *above* it, so a draw landing exactly on a running sum moved one index down; away from
    ties (every draw of 512k random mixtures checked when they merged) nothing changed."""
    weights = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    assert draw_categorical(weights, torch.tensor([0.5])).tolist() == [1]  # target 2.0 = running sum at 1
    assert draw_categorical(weights, torch.tensor([0.25])).tolist() == [0]  # target 1.0 = running sum at 0
    # u = 0 gives target 0; a leading zero weight is still never drawn.
    assert draw_categorical(torch.tensor([[0.0, 0.0, 2.0, 1.0]]), torch.tensor([0.0])).tolist() == [2]
