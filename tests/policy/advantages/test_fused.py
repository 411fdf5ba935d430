"""algo=fused: the critic-group mix reduces to each parent at its limits, and its weights are the
inverse-variance weights worked out by hand (or EVPO's switch).

References: the brute-force GRPO / GiGPO / HGPO / turn-GAE / whitening loops of
``tests/policy/advantages/test_algorithms.py`` (written from docs/conventions.md, no library code), on its
hand-built batch; the weights of the small example below are hand arithmetic in the comments.
"""

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.trajectory import Trajectory, Turn
from policy.advantages.algorithms import critic_token_advantages, group_baseline_token_advantages, turn_rows
from policy.advantages.config import AlgoConfig, FusedConfig
from policy.advantages.fused import (
    difference,
    fuse,
    fused_critic_weights,
    leave_one_out_group_means,
    pooled_start_variance,
)
from tests.policy.advantages.test_algorithms import (
    KEYS,
    RESPONSE_LENGTHS,
    SHUFFLED_KEYS,
    TRAJS,
    column,
    ref_gigpo,
    ref_hgpo,
    ref_turn_gae,
    ref_whiten,
    response_mask_for,
    token_values_for,
)
from tests.policy.references import ref_group_norm


def fused_cfg(lam: float = 0.95, whiten: bool = True, **fused) -> AlgoConfig:
    return AlgoConfig(name="fused", gamma=1.0, lam=lam, whiten_advantages=whiten, fused=FusedConfig(**fused))


def turn_values(mask: torch.Tensor) -> torch.Tensor:
    """(B,) the value at each row's first response column of ``token_values_for``: what ref_turn_gae reads."""
    values = token_values_for(mask)
    first = (mask > 0).float().argmax(dim=1)
    return values[torch.arange(len(mask)), first]


def ref_group_parent(name: str, keys, cfg: AlgoConfig) -> list[float]:
    groups = column(keys, lambda tr, i, t: tr.group_id)
    scores = column(keys, lambda tr, i, t: tr.episode_return)
    if name in ("grpo", "drgrpo"):
        mode = "mean_std_norm" if name == "grpo" else "mean_norm"
        return ref_group_norm(scores, groups, mode=mode, ddof=1, eps=1e-6, singleton="raw")
    if name == "gigpo":
        return ref_gigpo(
            keys, gamma=cfg.gamma, omega=cfg.omega, mode=cfg.mode, episode_stats=cfg.episode_stats
        )
    return ref_hgpo(
        keys, gamma=cfg.gamma, K=cfg.history_levels, alpha=cfg.alpha, mode=cfg.mode, base_group=cfg.base_group
    )


# ----------------------------------------------------------------------------------------------
# The limits: critic weight 0 is the group parent, critic weight 1 the critic parent, exactly
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("group", ["grpo", "drgrpo", "gigpo", "hgpo"])
@pytest.mark.parametrize("keys", [KEYS, SHUFFLED_KEYS], ids=["time_order", "shuffled"])
def test_critic_weight_zero_is_the_group_parent_exactly(group, keys):
    lengths = [RESPONSE_LENGTHS[KEYS.index(k)] for k in keys]
    rows, mask = turn_rows(TRAJS, keys), response_mask_for(lengths)
    cfg = fused_cfg(group=group, weighting="fixed", critic_weight=0.0)
    adv, _ = critic_token_advantages(cfg, rows, mask, turn_values(mask))
    parent = group_baseline_token_advantages(dataclasses.replace(cfg, name=group), rows, mask)
    assert torch.equal(adv, parent)  # bit for bit
    expected = ref_group_parent(group, keys, cfg)
    for b, value in enumerate(expected):
        assert torch.allclose(
            adv[b][mask[b] > 0].double(), torch.tensor(value, dtype=torch.float64), atol=1e-6
        )
    assert (adv[mask == 0] == 0).all()


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("truncated", [False, True])
def test_critic_weight_one_is_the_critic_parent_exactly(whiten, truncated):
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    values = turn_values(mask)
    cfg = dataclasses.replace(fused_cfg(weighting="fixed", critic_weight=1.0), whiten_advantages=whiten)
    # Trajectory 3 (id 20) cut off by the turn cap: it bootstraps from the value after its last turn.
    end_value = {3: 0.7} if truncated else {}
    bootstrap = torch.tensor([end_value.get(i, 0.0) for i, _ in KEYS])
    adv, targets = critic_token_advantages(cfg, rows, mask, values, bootstrap=bootstrap)
    parent_adv, parent_targets = critic_token_advantages(
        dataclasses.replace(cfg, name="ppo_turn"), rows, mask, values, bootstrap=bootstrap
    )
    assert torch.equal(adv, parent_adv) and torch.equal(targets, parent_targets)
    ref_adv, ref_ret = ref_turn_gae(
        KEYS, mask.tolist(), token_values_for(mask).tolist(), 1.0, 0.95, end_value
    )
    if whiten:
        ref_adv = ref_whiten(ref_adv, mask.tolist())
    assert torch.allclose(adv.double(), torch.tensor(ref_adv, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(targets.double(), torch.tensor(ref_ret, dtype=torch.float64), atol=1e-5)


def test_fuse_mixes_per_row_and_keeps_the_parents_at_the_ends():
    critic = torch.tensor([[0.0, 2.0], [0.0, -1.0], [3.0, 1.0]])  # (B, L)
    group = torch.tensor([[0.0, 4.0], [0.0, 5.0], [-1.0, 1.0]])
    out = fuse(critic, group, torch.tensor([0.25, 0.0, 1.0]))
    # row 0: 0.25 * 2 + 0.75 * 4 = 3.5; row 1: the group's 5; row 2: the critic's row
    assert out.tolist() == [[0.0, 3.5], [0.0, 5.0], [3.0, 1.0]]
    with pytest.raises(ValueError, match="fuse needs"):
        fuse(critic, group, torch.tensor([0.5, 0.5]))


# ----------------------------------------------------------------------------------------------
# The weights on a hand-worked batch
# ----------------------------------------------------------------------------------------------
# Episode groups 0 = {a, b} and 1 = {c, d}; the only reward is the last turn's; gamma = lambda = 1, so
# every row's return-to-go G_t, and the critic's lambda-return, equals its episode score S.
#   a: 2 turns, S = 1    b: 2 turns, S = 0    c: 1 turn, S = 1    d: 2 turns, S = 0
# nu, pooled over the first rows: group 0 {1, 0} and group 1 {1, 0}: (0.5 + 0.5) / (1 + 1) = 0.5.
# Leave-one-out group means: a 0, b 1, c 0, d 1, so every group residual S - b_g is +-1: v_g = 1 at
# both turn indices, sigma_g^2 = 1 - 0.5 = 0.5.
# Critic values: 1.5 at every first turn: residuals -0.5 (a, c), -1.5 (b, d); v_c(0) = (0.25 + 2.25 +
# 0.25 + 2.25) / 4 = 1.25, sigma_c^2 = 0.75, w(0) = 0.5 / (0.75 + 0.5) = 0.4.
# Second turns a1, b1, d1 valued 0, 1, 0: residuals 1, -1, 0; v_c(1) = 2/3, sigma_c^2 = 1/6,
# w(1) = 0.5 / (1/6 + 0.5) = 0.75.
# Whitened critic advantages: the residuals above, [-0.5, 1, -1.5, -1, -0.5, -1.5, 0] in ROWS order, lose
# their mean -4/7: first turns 1/14, -13/14, 1/14, -13/14, m_c(0) = 340/196 / 4 = 85/196 < 0.5, so
# sigma_c^2 = 0 and w(0) = 1; second turns 11/7, -3/7, 4/7, m_c(1) = 146/147, sigma_c^2 = 146/147 - 1/2,
# w(1) = 0.5 / (146/147) = 147/292.
# EVPO: G = [1, 1, 0, 0, 1, 0, 0] and G - V = [-0.5, 1, -1.5, -1, -0.5, -1.5, 0] in ROWS order;
# Var G = 12/49, Var(G - V) = 1 - 16/49 = 33/49: explained variance 1 - 33/12 < 0, so the group.


def episode(group: int, traj_id: int, turns: int, score: float) -> Trajectory:
    return Trajectory(
        env_name="fake",
        env_kwargs={},
        seed=group,
        group_id=group,
        trajectory_id=traj_id,
        turns=[
            Turn(
                observation=f"o{t}",
                action="a",
                next_observation="n",
                reward=score if t == turns - 1 else 0.0,
                done=t == turns - 1,
                valid=True,
                anchor_observation=f"anchor{t}",
            )
            for t in range(turns)
        ],
    )


HAND = [episode(0, 1, 2, 1.0), episode(0, 2, 2, 0.0), episode(1, 3, 1, 1.0), episode(1, 4, 2, 0.0)]
ROWS = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 0), (3, 1)]  # a0 a1 b0 b1 c0 d0 d1
HAND_VALUES = torch.tensor([1.5, 0.0, 1.5, 1.0, 1.5, 1.5, 0.0])
HAND_WEIGHTS = [0.4, 0.75, 0.4, 0.75, 0.4, 0.4, 0.75]
HAND_WEIGHTS_WHITENED = [1.0, 147 / 292, 1.0, 147 / 292, 1.0, 1.0, 147 / 292]


def hand_inputs():
    rows = turn_rows(HAND, ROWS)
    return rows, torch.ones(len(ROWS), 3)


def test_leave_one_out_means_and_pooled_start_variance_by_hand():
    rows, _ = hand_inputs()
    assert leave_one_out_group_means(rows.episode_rewards, rows.group_ids, rows.traj_ids).tolist() == [
        0.0,
        0.0,
        1.0,
        1.0,
        0.0,
        1.0,
        1.0,
    ]
    starts = torch.tensor([t == 0 for _, t in ROWS])
    assert pooled_start_variance(rows.episode_rewards, rows.group_ids, starts) == pytest.approx(0.5)
    # A group of one trajectory has no leave-one-out mean: GRPO's singleton baseline 0.
    assert leave_one_out_group_means(torch.tensor([2.0, 2.0]), [7, 7], [5, 5]).tolist() == [0.0, 0.0]


@pytest.mark.parametrize(("whiten", "expected"), [(False, HAND_WEIGHTS), (True, HAND_WEIGHTS_WHITENED)])
def test_inverse_variance_weights_by_hand_through_the_algorithm(whiten, expected):
    rows, mask = hand_inputs()
    cfg = fused_cfg(lam=1.0, whiten=whiten)
    starts = torch.tensor([t == 0 for _, t in ROWS])
    weights = fused_critic_weights(
        cfg.fused,
        critic_returns=rows.episode_rewards,
        mc_returns=rows.episode_rewards,
        centre_critic=whiten,
        values=HAND_VALUES,
        scores=rows.episode_rewards,
        group_ids=rows.group_ids,
        traj_ids=rows.traj_ids,
        levels=rows.steps,
        start_rows=starts,
    )
    assert weights.tolist() == pytest.approx(expected)
    adv, _ = critic_token_advantages(cfg, rows, mask, HAND_VALUES)
    critic_adv, _ = critic_token_advantages(
        dataclasses.replace(cfg, name="ppo_turn"), rows, mask, HAND_VALUES
    )
    group_adv = group_baseline_token_advantages(dataclasses.replace(cfg, name="grpo"), rows, mask)
    w = torch.tensor(expected).unsqueeze(1)
    assert torch.allclose(adv, w * critic_adv + (1 - w) * group_adv, atol=1e-6)


def test_evpo_switch_by_hand():
    rows, mask = hand_inputs()
    cfg = fused_cfg(lam=1.0, weighting="evpo")
    critic_adv, _ = critic_token_advantages(
        dataclasses.replace(cfg, name="ppo_turn"), rows, mask, HAND_VALUES
    )
    group_adv = group_baseline_token_advantages(dataclasses.replace(cfg, name="grpo"), rows, mask)
    adv, _ = critic_token_advantages(cfg, rows, mask, HAND_VALUES)  # explained variance -1.75: the group
    assert torch.equal(adv, group_adv)
    good = rows.episode_rewards + 0.1 * torch.tensor(
        [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0]
    )  # Var(G - V) = 0.01 * 48/49: EV = 0.96
    adv, _ = critic_token_advantages(cfg, rows, mask, good)
    good_critic, _ = critic_token_advantages(dataclasses.replace(cfg, name="ppo_turn"), rows, mask, good)
    assert torch.equal(adv, good_critic)
    # The threshold: that explained variance (~0.96) is below 0.99, so the group again.
    adv, _ = critic_token_advantages(
        fused_cfg(lam=1.0, weighting="evpo", evpo_threshold=0.99), rows, mask, good
    )
    assert torch.equal(adv, group_adv)


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        (dict(group="ppo_turn"), "algo.fused.group"),
        (dict(weighting="softmax"), "algo.fused.weighting"),
        (dict(critic_weight=1.5), "algo.fused.critic_weight"),
        (dict(critic_weight=-0.1), "algo.fused.critic_weight"),
        (dict(evpo_threshold=1.5), "algo.fused.evpo_threshold"),
    ],
)
def test_fused_config_errors_name_the_key(fields, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        FusedConfig(**fields)


# ----------------------------------------------------------------------------------------------
# Properties over random batches
# ----------------------------------------------------------------------------------------------


@st.composite
def batches(draw):
    """Random groups of ragged trajectories with end-of-episode or per-turn rewards, and values."""
    trajectories, traj_id = [], 0
    for group in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            turns = draw(st.integers(1, 3))
            rewards = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, -0.25]), min_size=turns, max_size=turns))
            trajectories.append(
                Trajectory(
                    env_name="fake",
                    env_kwargs={},
                    seed=group,
                    group_id=group,
                    trajectory_id=traj_id,
                    turns=[
                        Turn(
                            observation="o",
                            action="a",
                            next_observation="n",
                            reward=r,
                            done=t == turns - 1,
                            valid=True,
                            anchor_observation=f"s{draw(st.integers(0, 1))}",
                        )
                        for t, r in enumerate(rewards)
                    ],
                )
            )
            traj_id += 1
    keys = [(i, t) for i, tr in enumerate(trajectories) for t in range(tr.num_turns)]
    values = draw(st.lists(st.floats(-1.0, 2.0), min_size=len(keys), max_size=len(keys)))
    return trajectories, keys, torch.tensor(values)


@settings(max_examples=40, deadline=None)
@given(batches(), st.sampled_from(["grpo", "gigpo"]))
def test_limits_hold_on_random_batches(batch, group):
    trajectories, keys, values = batch
    rows, mask = turn_rows(trajectories, keys), torch.ones(len(keys), 2)
    zero, _ = critic_token_advantages(
        fused_cfg(group=group, weighting="fixed", critic_weight=0.0), rows, mask, values
    )
    one, _ = critic_token_advantages(
        fused_cfg(group=group, weighting="fixed", critic_weight=1.0), rows, mask, values
    )
    cfg = fused_cfg(group=group)
    assert torch.equal(
        zero, group_baseline_token_advantages(dataclasses.replace(cfg, name=group), rows, mask)
    )
    assert torch.equal(
        one, critic_token_advantages(dataclasses.replace(cfg, name="ppo_turn"), rows, mask, values)[0]
    )
    mixed, _ = critic_token_advantages(cfg, rows, mask, values)
    low, high = torch.minimum(zero, one), torch.maximum(zero, one)
    assert ((mixed >= low - 1e-6) & (mixed <= high + 1e-6)).all()  # a convex mix of the parents


def test_a_difference_within_rounding_of_its_operands_is_zero():
    # 0.1 + 0.2 is 0.30000000000000004 in float64: 5.6e-17 apart from 0.3, rounding at that size
    def f64(x: float) -> torch.Tensor:
        return torch.tensor([x], dtype=torch.float64)

    assert (0.1 + 0.2) - 0.3 != 0.0 and difference(f64(0.1 + 0.2), f64(0.3)).item() == 0.0
    assert difference(f64(1.0 + 1e-9), f64(1.0)).item() == pytest.approx(1e-9, rel=1e-6)
    assert difference(f64(0.0), f64(0.0)).item() == 0.0
    assert difference(f64(2.5), f64(-1.0)).item() == 3.5
    # the tolerance grows with the operands: a rounding residue at 1e6 is 0, a real 1e-6 at 0 is kept
    assert (1e6 + 0.1 + 0.2) - (1e6 + 0.3) != 0.0 and difference(f64(1e6 + 0.1 + 0.2), f64(1e6 + 0.3)).item() == 0.0
    assert difference(f64(1e-6), f64(0.0)).item() == 1e-6


def test_equal_returns_shifted_in_units_keep_the_even_weight():
    # Four one-turn trajectories of one group, every return, value and score equal: neither parent
    # has an error, so the weight is 1/2; shifted by 0.1 the leave-one-out means round to a few ulps
    # off the scores, which once gave the group a "variance" and weight 1 (a hypothesis example).
    def weights(shift: float) -> torch.Tensor:
        same = torch.full((4,), shift, dtype=torch.float64)
        return fused_critic_weights(FusedConfig(), critic_returns=same, values=same, mc_returns=same, scores=same,
                                    group_ids=[0, 0, 0, 0], traj_ids=[0, 1, 2, 3], levels=torch.zeros(4),
                                    start_rows=torch.ones(4, dtype=torch.bool), centre_critic=False)

    assert weights(0.0).tolist() == [0.5] * 4
    assert weights(0.1).tolist() == [0.5] * 4


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(0.1, 10.0), st.floats(-5.0, 5.0), st.booleans())
def test_weights_lie_in_unit_interval_and_ignore_the_units_of_reward(batch, scale, shift, centre):
    trajectories, keys, values = batch
    rows = turn_rows(trajectories, keys)
    starts = torch.tensor([t == 0 for _, t in keys])
    g = rows.step_rewards.double()  # any per-row returns work for the weights' algebra
    mc = rows.episode_rewards.double()

    def weights(scale: float, shift: float, values: torch.Tensor) -> torch.Tensor:
        return fused_critic_weights(
            FusedConfig(),
            critic_returns=scale * g + shift,
            values=scale * values + shift,
            mc_returns=scale * mc + shift,
            scores=scale * rows.episode_rewards.double() + shift,
            group_ids=rows.group_ids,
            traj_ids=rows.traj_ids,
            levels=rows.steps,
            start_rows=starts,
            centre_critic=centre,
        )

    w = weights(1.0, 0.0, values.double())
    assert ((w >= 0) & (w <= 1)).all()
    # The same batch in other units (affine map of every return, value and score): the same weights.
    # A group of one trajectory keeps GRPO's baseline 0, which a shift moves: only rescale those.
    members = {}
    for tr in trajectories:
        members.setdefault(tr.group_id, set()).add(tr.trajectory_id)
    if min(len(m) for m in members.values()) < 2:
        shift = 0.0
    assert torch.allclose(w, weights(scale, shift, values.double()), atol=1e-9)
    # A critic that predicts every return exactly is never trusted less than the group.
    assert (weights(1.0, 0.0, g) >= 0.5).all()
