"""The GAE recursion against hand-worked numbers and a brute-force pure-Python reference."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from critic.targets import gae

F64 = torch.float64
finite = st.floats(min_value=-50, max_value=50, allow_nan=False, width=64)


def t64(xs):
    return torch.tensor(xs, dtype=F64)


def assert_close(actual, expected, tol=1e-9):
    assert actual.shape == torch.Size([len(expected)])
    assert torch.allclose(actual.to(F64), t64(expected), atol=tol, rtol=0), (actual, expected)


def ref_gae(rewards, values, mask, gamma, lam, bootstrap=None):
    """Plain loops over each row's valid positions; a skipped position holds the carried advantage."""
    adv_rows = []
    for b, (r, v, m) in enumerate(zip(rewards, values, mask, strict=True)):
        end_value = 0.0 if bootstrap is None else bootstrap[b]
        valid = [t for t in range(len(r)) if m[t]]
        adv = {}
        for j in reversed(range(len(valid))):
            t = valid[j]
            v_next = v[valid[j + 1]] if j + 1 < len(valid) else end_value
            a_next = adv[valid[j + 1]] if j + 1 < len(valid) else 0.0
            adv[t] = r[t] + gamma * v_next - v[t] + gamma * lam * a_next
        row = []
        for t in range(len(r)):
            later = [u for u in valid if u >= t]
            row.append(adv[later[0]] if later else 0.0)
        adv_rows.append(row)
    return adv_rows


def test_gae_hand_worked():
    # gamma 0.9, lam 0.8 (gamma * lam = 0.72)
    # t2: delta = 1 + 0 - 0.7 = 0.3; A2 = 0.3
    # t1: delta = 0 + 0.9 * 0.7 - 0.6 = 0.03; A1 = 0.03 + 0.72 * 0.3 = 0.246
    # t0: delta = 0 + 0.9 * 0.6 - 0.5 = 0.04; A0 = 0.04 + 0.72 * 0.246 = 0.21712
    adv, ret = gae(t64([[0, 0, 1]]), t64([[0.5, 0.6, 0.7]]), t64([[1, 1, 1]]), gamma=0.9, lam=0.8)
    assert_close(adv[0], [0.21712, 0.246, 0.3])
    assert_close(ret[0], [0.71712, 0.846, 1.0])


def test_gae_skips_a_masked_position_in_the_middle():
    # position 1 is masked: its reward 5 and value 9 are ignored; t0 bootstraps from V2 and A2.
    # t2: A2 = 1 - 0.7 = 0.3; t1 carries (0.3, V=0.7); t0: delta = 0.9 * 0.7 - 0.5 = 0.13, A0 = 0.13 + 0.72 * 0.3 = 0.346
    adv, ret = gae(t64([[0, 5, 1]]), t64([[0.5, 9.0, 0.7]]), t64([[1, 0, 1]]), gamma=0.9, lam=0.8)
    assert_close(adv[0], [0.346, 0.3, 0.3])
    assert_close(ret[0], [0.846, 9.3, 1.0])


def test_gae_trailing_padding_bootstraps_zero():
    # t2 masked (carries 0); t1: A1 = 1 + 0 - 0.6 = 0.4; t0: delta = 0.9 * 0.6 - 0.5 = 0.04, A0 = 0.04 + 0.72 * 0.4 = 0.328
    adv, _ = gae(t64([[0, 1, 7]]), t64([[0.5, 0.6, 9.0]]), t64([[1, 1, 0]]), gamma=0.9, lam=0.8)
    assert_close(adv[0], [0.328, 0.4, 0.0])


def test_gae_bootstraps_a_truncated_episode_from_the_given_value():
    # The episode was cut off after t2; the state after it is worth 2.0. gamma 0.9, lam 0.8.
    # t2: delta = 1 + 0.9 * 2.0 - 0.7 = 2.1; A2 = 2.1
    # t1: delta = 0 + 0.9 * 0.7 - 0.6 = 0.03; A1 = 0.03 + 0.72 * 2.1 = 1.542
    # t0: delta = 0 + 0.9 * 0.6 - 0.5 = 0.04; A0 = 0.04 + 0.72 * 1.542 = 1.15024
    # returns = A + V = [1.65024, 2.142, 2.8]
    adv, ret = gae(
        t64([[0, 0, 1]]), t64([[0.5, 0.6, 0.7]]), t64([[1, 1, 1]]), gamma=0.9, lam=0.8, bootstrap=t64([2.0])
    )
    assert_close(adv[0], [1.15024, 1.542, 2.1])
    assert_close(ret[0], [1.65024, 2.142, 2.8])


def test_gae_bootstrap_carries_through_masked_tail_positions():
    # t2 is padding: it carries V_next = 2.0 (the bootstrap) and A_next = 0, and stores 0.
    # t1: delta = 1 + 0.9 * 2.0 - 0.6 = 2.2; A1 = 2.2
    # t0: delta = 0 + 0.9 * 0.6 - 0.5 = 0.04; A0 = 0.04 + 0.72 * 2.2 = 1.624
    adv, ret = gae(
        t64([[0, 1, 7]]), t64([[0.5, 0.6, 9.0]]), t64([[1, 1, 0]]), gamma=0.9, lam=0.8, bootstrap=t64([2.0])
    )
    assert_close(adv[0], [1.624, 2.2, 0.0])
    assert_close(ret[0], [2.124, 2.8, 9.0])


def test_gae_bootstrap_is_per_row_and_zero_means_terminal():
    rewards, values, mask = t64([[0, 1], [0, 1]]), t64([[0.5, 0.6], [0.5, 0.6]]), t64([[1, 1], [1, 1]])
    done_adv, _ = gae(rewards, values, mask, gamma=0.9, lam=0.8)
    adv, _ = gae(rewards, values, mask, gamma=0.9, lam=0.8, bootstrap=t64([0.0, 2.0]))
    assert torch.equal(adv[0], done_adv[0])
    assert adv[1, 1].item() == pytest.approx(1 + 0.9 * 2.0 - 0.6, abs=1e-12)


def test_gae_bootstrap_is_cast_to_the_values_dtype_and_checked():
    adv, _ = gae(t64([[1.0]]), t64([[0.5]]), t64([[1]]), gamma=0.5, bootstrap=torch.tensor([1.0]))
    assert adv.dtype == F64 and adv.item() == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match=r"bootstrap must be \(B,\) = \(1,\), got \(2,\)"):
        gae(t64([[1.0]]), t64([[0.5]]), t64([[1]]), bootstrap=t64([1.0, 2.0]))
    with pytest.raises(ValueError, match="must share a \\(B, T\\) shape"):
        gae(t64([[1.0, 2.0]]), t64([[0.5]]), t64([[1]]))


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.tuples(finite, finite, st.booleans()), min_size=4, max_size=4), min_size=1, max_size=3
    ),
    gamma=st.sampled_from([1.0, 0.99, 0.5]),
    lam=st.sampled_from([1.0, 0.95, 0.0]),
    bootstrap=st.none() | st.lists(finite, min_size=3, max_size=3),
)
def test_gae_matches_reference(rows, gamma, lam, bootstrap):
    r = [[c[0] for c in row] for row in rows]
    v = [[c[1] for c in row] for row in rows]
    m = [[c[2] for c in row] for row in rows]
    boot = None if bootstrap is None else bootstrap[: len(rows)]
    adv, ret = gae(t64(r), t64(v), t64(m), gamma=gamma, lam=lam, bootstrap=None if boot is None else t64(boot))
    expected = ref_gae(r, v, m, gamma, lam, boot)
    assert torch.allclose(adv, t64(expected), atol=1e-9, rtol=1e-9)
    assert torch.allclose(ret, adv + t64(v))
