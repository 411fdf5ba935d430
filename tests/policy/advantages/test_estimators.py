"""Advantage estimators against hand-worked numbers and brute-force pure-Python references."""

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from critic.targets import gae as critic_gae
from policy.advantages import (
    broadcast_to_tokens,
    gae,
    gigpo_advantages,
    grpo_advantages,
    hgpo_advantages,
    normalise_in_groups,
    score_from_token_rewards,
    sppo_advantages,
    whiten,
)
from policy.advantages.step_rows import StepRows
from policy.losses import sequence_value_loss
from tests.policy.references import ref_group_norm

F64 = torch.float64


def t64(xs):
    return torch.tensor(xs, dtype=F64)


def assert_close(actual, expected, tol=1e-9):
    assert actual.shape == torch.Size([len(expected)])
    assert torch.allclose(actual.to(F64), torch.as_tensor(expected, dtype=F64), atol=tol, rtol=0), (actual, expected)


# ----------------------------------------------------------------------------------------------
# Pure-Python references (loops and dicts, no tensors), written from the convention text.
# ----------------------------------------------------------------------------------------------

def ref_returns(traj_ids, steps, rewards, gamma):
    by_traj = {}
    for i, tr in enumerate(traj_ids):
        by_traj.setdefault(tr, []).append(i)
    out = [0.0] * len(rewards)
    for rows in by_traj.values():
        running = 0.0
        for i in sorted(rows, key=lambda i: steps[i], reverse=True):
            running = rewards[i] + gamma * running
            out[i] = running
    return out


def ref_gigpo(groups, trajs, steps, anchors, rewards, scores, *, gamma, omega, mode, eps, episode_stats):
    returns = ref_returns(trajs, steps, rewards, gamma)
    if episode_stats == "rows":
        stat = [True] * len(groups)
    else:
        seen, stat = set(), []
        for tr in trajs:
            stat.append(tr not in seen)
            seen.add(tr)
    episode = ref_group_norm(scores, groups, mode=mode, ddof=1, eps=eps, singleton="raw", stat=stat)
    step_keys = [(g, a) for g, a in zip(groups, anchors, strict=True)]
    step = ref_group_norm(returns, step_keys, mode=mode, ddof=1, eps=eps, singleton="zero")
    total = [e + omega * s for e, s in zip(episode, step, strict=True)]
    return total, episode, step, returns


def ref_hgpo(groups, trajs, steps, anchors, rewards, scores, *, gamma, K, alpha, mode, base_group):
    returns = ref_returns(trajs, steps, rewards, gamma)
    n = len(groups)
    history = {}
    for tr in set(trajs):
        rows = sorted((i for i in range(n) if trajs[i] == tr), key=lambda i: steps[i])
        for t, i in enumerate(rows):
            history[i] = [anchors[j] for j in rows[: t + 1]]
    level_adv = {}  # (row, k) -> advantage
    for k in range(1, K + 2):
        members = {}
        for i in range(n):
            if len(history[i]) >= k:
                members.setdefault((groups[i], tuple(history[i][-k:])), []).append(returns[i])
        for i in range(n):
            if len(history[i]) < k:
                continue
            vals = members[(groups[i], tuple(history[i][-k:]))]
            if len(vals) == 1 or max(vals) == min(vals):
                level_adv[(i, k)] = 0.0
                continue
            mean = sum(vals) / len(vals)
            std = math.sqrt(sum((x - mean) ** 2 for x in vals) / len(vals))
            level_adv[(i, k)] = (returns[i] - mean) / (std + 1e-6) if mode == "mean_std_norm" else returns[i] - mean
    base = ref_group_norm(scores, groups, mode=mode, ddof=1, eps=1e-6, singleton="raw") if base_group else None
    out = []
    for i in range(n):
        num = den = 0.0
        terms = [(k + 1.0) ** alpha for k in range(1, K + 2)]
        for k, w in zip(range(1, K + 2), terms, strict=True):
            a = level_adv.get((i, k), 0.0)
            if a != 0.0:
                num += w * a
                den += w
        if base_group and base[i] != 0.0:
            num += base[i]
            den += 1.0
        out.append(num / (den + 1e-6) if den > 0 else 0.0)
    return out, returns


# ----------------------------------------------------------------------------------------------
# GRPO
# ----------------------------------------------------------------------------------------------

SEED_REWARDS = [1, 1, 0, 0, 0, 1, 0, 0]


def test_grpo_seed_example_population_std_no_eps():
    # mean = 3/8 = 0.375; sum of squared deviations = 3 * 0.625^2 + 5 * 0.375^2 = 1.875
    # population std = sqrt(1.875 / 8) = 0.4841229; 0.625 / 0.4841229 = 1.290994, -0.375 / ... = -0.774597
    adv = grpo_advantages(t64(SEED_REWARDS), torch.zeros(8, dtype=torch.long), std_ddof=0, eps=0.0)
    assert_close(adv, [1.290994 if r else -0.774597 for r in SEED_REWARDS], tol=1e-6)


def test_grpo_seed_example_sample_std_with_eps():
    # sample std = sqrt(1.875 / 7) = 0.5175492; 0.625 / (0.5175492 + 1e-6) = 1.2076124
    adv = grpo_advantages(torch.tensor(SEED_REWARDS, dtype=torch.float32), torch.zeros(8, dtype=torch.long))
    assert adv.dtype == torch.float32
    assert_close(adv, [1.2076124 if r else -0.7245674 for r in SEED_REWARDS], tol=1e-6)


def test_dr_grpo_only_centres():
    adv = grpo_advantages(t64(SEED_REWARDS), torch.zeros(8, dtype=torch.long), norm_by_std=False)
    assert_close(adv, [0.625 if r else -0.375 for r in SEED_REWARDS])


def test_grpo_interleaved_groups():
    # group 5: [1, 3] -> mean 2, sample std sqrt(2); group 3: [2, 6] -> mean 4, sample std sqrt(8)
    adv = grpo_advantages(t64([1.0, 2.0, 3.0, 6.0]), torch.tensor([5, 3, 5, 3]))
    s2, s8 = math.sqrt(2), math.sqrt(8)
    assert_close(adv, [-1 / (s2 + 1e-6), -2 / (s8 + 1e-6), 1 / (s2 + 1e-6), 2 / (s8 + 1e-6)])


@pytest.mark.parametrize("eps", [0.0, 1e-6])
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_all_equal_group_is_exactly_zero(eps, norm_by_std):
    # 0.1 * 3 / 3 != 0.1 in floating point, so a naive r - mean would leave a residue
    adv = grpo_advantages(t64([0.1, 0.1, 0.1, 0.7]), torch.tensor([0, 0, 0, 1]), eps=eps, norm_by_std=norm_by_std)
    assert adv[:3].tolist() == [0.0, 0.0, 0.0]
    assert not torch.isnan(adv).any()


def test_singleton_rules():
    rewards, ids = t64([2.0, 1.0, 3.0]), torch.tensor([0, 1, 1])
    # raw (verl): mean 0, std 1 -> 2 / (1 + 1e-6) with std scaling
    assert grpo_advantages(rewards, ids)[0].item() == pytest.approx(2.0 / (1.0 + 1e-6), abs=1e-12)
    assert grpo_advantages(rewards, ids, eps=0.0)[0].item() == 2.0
    assert grpo_advantages(rewards, ids, norm_by_std=False)[0].item() == 2.0
    zero = grpo_advantages(rewards, ids, singleton="zero")
    assert zero[0].item() == 0.0
    # the other group is unaffected: [1, 3] -> mean 2, sample std sqrt(2)
    assert zero[2].item() == pytest.approx(1 / (math.sqrt(2) + 1e-6), abs=1e-12)


def test_unknown_options_name_the_option():
    with pytest.raises(ValueError, match="singleton"):
        grpo_advantages(t64([1.0]), torch.tensor([0]), singleton="nope")
    with pytest.raises(ValueError, match="mode.*mean_std_norm"):
        normalise_in_groups(t64([1.0]), [0], mode="std")
    with pytest.raises(ValueError, match="ddof"):
        grpo_advantages(t64([1.0]), torch.tensor([0]), std_ddof=2)


def test_stat_rows_take_statistics_from_a_subset():
    # stats from rows 0 and 2 only: [0, 4] -> mean 2, sample std sqrt(8); row 1 (value 3) uses them
    out = normalise_in_groups(t64([0.0, 3.0, 4.0]), ["g", "g", "g"], eps=0.0, stat_rows=torch.tensor([True, False, True]))
    s8 = math.sqrt(8)
    assert_close(out, [-2 / s8, 1 / s8, 2 / s8])


finite = st.floats(min_value=-50, max_value=50, allow_nan=False, width=64)


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(0, 4), st.one_of(finite, st.sampled_from([0.0, 1.0, 0.1]))), min_size=1, max_size=20),
    norm_by_std=st.booleans(),
    ddof=st.sampled_from([0, 1]),
    eps=st.sampled_from([1e-6, 1e-3]),
    singleton=st.sampled_from(["raw", "zero"]),
)
def test_grpo_matches_reference(data, norm_by_std, ddof, eps, singleton):
    ids, rewards = [d[0] for d in data], [d[1] for d in data]
    adv = grpo_advantages(t64(rewards), torch.tensor(ids), norm_by_std=norm_by_std, std_ddof=ddof, eps=eps, singleton=singleton)
    mode = "mean_std_norm" if norm_by_std else "mean_norm"
    expected = ref_group_norm(rewards, ids, mode=mode, ddof=ddof, eps=eps, singleton=singleton)
    assert torch.allclose(adv, t64(expected), atol=1e-7, rtol=1e-9)


def test_score_sums_every_position_and_broadcast_masks():
    token_rewards = t64([[0.0, 0.0, 1.0], [0.5, 0.0, 0.25]])
    mask = t64([[1, 1, 0], [1, 1, 1]])
    # row 0: the reward sits on a masked position and still counts (verl): 0 + 0 + 1 = 1
    assert score_from_token_rewards(token_rewards, mask).tolist() == [1.0, 0.75]
    assert broadcast_to_tokens(t64([2.0, -1.0]), mask).tolist() == [[2.0, 2.0, 0.0], [-1.0, -1.0, -1.0]]


# ----------------------------------------------------------------------------------------------
# GAE
# ----------------------------------------------------------------------------------------------

def test_gae_is_the_critic_recursion():
    # the recursion and its tests live in critic.targets; policy re-exports the one implementation
    assert gae is critic_gae


def test_whiten_uses_valid_entries_and_unbiased_variance():
    # valid [1, 2, 3]: mean 2, unbiased var (1 + 0 + 1) / 2 = 1; the masked 10 is transformed too
    values, mask = t64([1.0, 2.0, 3.0, 10.0]), t64([1, 1, 1, 0])
    scale = 1 / math.sqrt(1 + 1e-8)
    assert_close(whiten(values, mask), [-scale, 0.0, scale, 8 * scale])
    assert_close(whiten(values, mask, shift_mean=False), [2 - scale, 2.0, 2 + scale, 2 + 8 * scale])
    with pytest.raises(ValueError, match="at least 2"):
        whiten(values, t64([0, 1, 0, 0]))


# ----------------------------------------------------------------------------------------------
# SPPO
# ----------------------------------------------------------------------------------------------

def test_sppo_advantage_and_bce():
    logits = t64([0.0, math.log(3.0)]).requires_grad_()  # sigmoid -> [0.5, 0.75]
    returns = t64([1.0, 0.0])
    adv = sppo_advantages(returns, logits)
    assert_close(adv, [0.5, -0.75])
    assert not adv.requires_grad
    # BCE: [-ln 0.5, -ln(1 - 0.75)] = [0.693147, 1.386294] -> mean 1.0397208
    loss = sequence_value_loss(logits, returns, torch.ones(2, dtype=F64))
    assert loss.item() == pytest.approx((math.log(2) + math.log(4)) / 2, abs=1e-12)
    loss.backward()
    assert_close(logits.grad, [(0.5 - 1.0) / 2, (0.75 - 0.0) / 2])  # d/dlogit = (sigmoid - R) / B


# ----------------------------------------------------------------------------------------------
# GiGPO
# ----------------------------------------------------------------------------------------------

# Interleaved batch. Episode group 0: T1 visits s0, s1, s0 (rewards 0, 0, 1; score 1),
# T2 visits s0, s2 (rewards 0, 0; score 0). Episode group 1: T3 visits s0 once (reward 0.5, score 0.5).
ROWS = [  # (group, traj, step, anchor, step reward, episode score)
    (0, "T1", 0, "s0", 0.0, 1.0),
    (0, "T2", 0, "s0", 0.0, 0.0),
    (1, "T3", 0, "s0", 0.5, 0.5),
    (0, "T1", 1, "s1", 0.0, 1.0),
    (0, "T2", 1, "s2", 0.0, 0.0),
    (0, "T1", 2, "s0", 1.0, 1.0),
]


def step_rows(rows):
    g, tr, s, a, r, e = zip(*rows, strict=True)
    return StepRows(list(g), list(tr), list(s), list(a), t64(r), t64(e))


def test_gigpo_hand_worked_interleaved_with_repeated_anchor():
    out = gigpo_advantages(step_rows(ROWS), gamma=0.95)
    # returns: T1 [0.95^2, 0.95, 1] = [0.9025, 0.95, 1]; T2 [0, 0]; T3 [0.5]
    assert_close(out.step_returns, [0.9025, 0.0, 0.5, 0.95, 0.0, 1.0])
    # episode, rows pooled in group 0: scores [1, 0, 1, 0, 1] -> mean 0.6, sample var (3 * 0.16 + 2 * 0.36) / 4 = 0.3
    s = math.sqrt(0.3) + 1e-6
    # group 1 is a single row: raw score, 0.5 / (1 + 1e-6)
    episode = [0.4 / s, -0.6 / s, 0.5 / (1 + 1e-6), 0.4 / s, -0.6 / s, 0.4 / s]
    assert_close(out.episode_advantages, episode)
    # step group (0, s0) holds rows 0, 1 and 5 (T1 twice): [0.9025, 0, 1], mean 1.9025 / 3;
    # (0, s1), (0, s2) and (1, s0) are single rows -> 0 (T3's s0 does not join group 0's s0)
    vals = [0.9025, 0.0, 1.0]
    mean = sum(vals) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in vals) / 2) + 1e-6  # sqrt(0.6080042 / 2) = 0.551364
    step = [(0.9025 - mean) / sd, -mean / sd, 0.0, 0.0, 0.0, (1.0 - mean) / sd]
    assert_close(out.step_advantages, step)
    assert_close(out.advantages, [e + x for e, x in zip(episode, step, strict=True)])
    half = gigpo_advantages(step_rows(ROWS), gamma=0.95, omega=0.5)
    assert_close(half.advantages, [e + 0.5 * x for e, x in zip(episode, step, strict=True)])


def test_gigpo_episode_stats_per_trajectory_and_mean_norm():
    out = gigpo_advantages(step_rows(ROWS), gamma=0.95, episode_stats="trajectories")
    # one value per trajectory in group 0: [1, 0] -> mean 0.5, sample std sqrt(0.5)
    s = math.sqrt(0.5) + 1e-6
    assert_close(out.episode_advantages, [0.5 / s, -0.5 / s, 0.5 / (1 + 1e-6), 0.5 / s, -0.5 / s, 0.5 / s])
    centred = gigpo_advantages(step_rows(ROWS), gamma=0.95, mode="mean_norm")
    # episode: score - 0.6 in group 0, raw 0.5 for the singleton; step: R - 1.9025 / 3 in (0, s0)
    m = 1.9025 / 3
    assert_close(centred.episode_advantages, [0.4, -0.6, 0.5, 0.4, -0.6, 0.4])
    assert_close(centred.step_advantages, [0.9025 - m, -m, 0.0, 0.0, 0.0, 1.0 - m])


def test_gigpo_rejects_bad_rows_and_options():
    rows = step_rows(ROWS)
    with pytest.raises(ValueError, match="repeated step"):
        gigpo_advantages(dataclasses.replace(rows, steps=[0, 0, 0, 0, 1, 0]))
    with pytest.raises(ValueError, match="more than one episode group"):
        gigpo_advantages(dataclasses.replace(rows, group_ids=[0, 0, 1, 0, 0, 1]))
    with pytest.raises(ValueError, match="episode_stats"):
        gigpo_advantages(rows, episode_stats="steps")
    with pytest.raises(ValueError, match="more than one episode score"):
        gigpo_advantages(
            dataclasses.replace(rows, episode_rewards=t64([1.0, 0.0, 0.5, 0.0, 0.0, 1.0])), episode_stats="trajectories"
        )


@st.composite
def step_batches(draw):
    """Episode groups of trajectories over a tiny anchor alphabet, rows randomly interleaved
    (each trajectory's rows stay in time order). Dyadic rewards and gamma keep returns exact."""
    trajs = []
    for g in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            length = draw(st.integers(1, 4))
            anchors = draw(st.lists(st.sampled_from("abc"), min_size=length, max_size=length))
            rewards = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, -1.0]), min_size=length, max_size=length))
            score = draw(st.sampled_from([0.0, 1.0, 0.25]))
            trajs.append((g, anchors, rewards, score))
    order = draw(st.permutations([j for j, tr in enumerate(trajs) for _ in tr[1]]))
    next_step = [0] * len(trajs)
    rows = []
    for j in order:
        g, anchors, rewards, score = trajs[j]
        t = next_step[j]
        next_step[j] += 1
        rows.append((g, f"traj{j}", t, anchors[t], rewards[t], score))
    return rows


@settings(max_examples=120, deadline=None)
@given(
    rows=step_batches(),
    gamma=st.sampled_from([0.5, 1.0]),
    mode=st.sampled_from(["mean_std_norm", "mean_norm"]),
    episode_stats=st.sampled_from(["rows", "trajectories"]),
    omega=st.sampled_from([1.0, 0.5]),
)
def test_gigpo_matches_reference(rows, gamma, mode, episode_stats, omega):
    out = gigpo_advantages(step_rows(rows), gamma=gamma, omega=omega, mode=mode, episode_stats=episode_stats)
    g, tr, s, a, r, e = zip(*rows, strict=True)
    total, episode, step, returns = ref_gigpo(
        g, tr, s, a, r, e, gamma=gamma, omega=omega, mode=mode, eps=1e-6, episode_stats=episode_stats
    )
    assert torch.allclose(out.step_returns, t64(returns), atol=1e-12)
    assert torch.allclose(out.episode_advantages, t64(episode), atol=1e-9)
    assert torch.allclose(out.step_advantages, t64(step), atol=1e-9)
    assert torch.allclose(out.advantages, t64(total), atol=1e-9)


# ----------------------------------------------------------------------------------------------
# HGPO
# ----------------------------------------------------------------------------------------------

# One episode group, gamma 0.5. T1: a -> b, rewards 0, 1 (returns 0.5, 1). T2: a -> b, rewards 0, 0
# (returns 0, 0). T3: c -> b, rewards 0, 1 (returns 0.5, 1). Scores 1, 0, 1.
HROWS = [
    (0, "T1", 0, "a", 0.0, 1.0),
    (0, "T3", 0, "c", 0.0, 1.0),
    (0, "T2", 0, "a", 0.0, 0.0),
    (0, "T2", 1, "b", 0.0, 0.0),
    (0, "T1", 1, "b", 1.0, 1.0),
    (0, "T3", 1, "b", 1.0, 1.0),
]


def test_hgpo_hand_worked_levels():
    out = hgpo_advantages(step_rows(HROWS), gamma=0.5, K=1, alpha=1.0)
    assert out.levels == (1, 2)
    # level 1 at t=0: (a) holds T1 0.5, T2 0 -> mean 0.25, population std 0.25 -> +-0.25 / (0.25 + 1e-6);
    #   (c) holds T3 alone -> skipped (0)
    a0 = 0.25 / (0.25 + 1e-6)
    # level 1 at t=1: (b) holds T1 1, T2 0, T3 1 -> mean 2/3, population var (1/9 + 4/9 + 1/9) / 3 = 2/9
    sb = math.sqrt(2 / 9) + 1e-6
    # level 2 at t=1: (a, b) holds T1 1, T2 0 -> mean 0.5, std 0.5; (c, b) holds T3 alone -> 0
    a2 = 0.5 / (0.5 + 1e-6)
    # rows: T1@0, T3@0, T2@0, T2@1, T1@1, T3@1 ; columns: level 1, level 2 (absent at t=0)
    levels = [[a0, 0], [0, 0], [-a0, 0], [(-2 / 3) / sb, -a2], [(1 / 3) / sb, a2], [(1 / 3) / sb, 0]]
    assert torch.allclose(out.level_advantages, t64(levels), atol=1e-9)
    # weights (k + 1)^1: level 1 -> 2, level 2 -> 3; only non-zero levels count
    expected = [
        2 * a0 / (2 + 1e-6),
        0.0,
        -2 * a0 / (2 + 1e-6),
        (2 * (-2 / 3) / sb + 3 * -a2) / (5 + 1e-6),
        (2 * (1 / 3) / sb + 3 * a2) / (5 + 1e-6),
        2 * (1 / 3) / sb / (2 + 1e-6),
    ]
    assert_close(out.advantages, expected)
    assert_close(out.step_returns, [0.5, 0.5, 0.0, 0.0, 1.0, 1.0])
    # K = 2 adds level 3, which no step of length-2 trajectories reaches: same advantages
    k2 = hgpo_advantages(step_rows(HROWS), gamma=0.5, K=2)
    assert k2.level_advantages.shape == (6, 3) and k2.level_advantages[:, 2].abs().sum() == 0
    assert torch.allclose(k2.advantages, out.advantages)


def test_hgpo_mean_norm_alpha_and_base_group():
    centred = hgpo_advantages(step_rows(HROWS), gamma=0.5, K=1, alpha=2.0, mode="mean_norm")
    # T1@1: level 1: 1 - 2/3 = 1/3 (weight 2^2 = 4); level 2: 1 - 0.5 = 0.5 (weight 3^2 = 9)
    assert centred.advantages[4].item() == pytest.approx((4 / 3 + 9 * 0.5) / (13 + 1e-6), abs=1e-12)
    based = hgpo_advantages(step_rows(HROWS), gamma=0.5, K=1, base_group=True)
    assert based.levels == (0, 1, 2) and based.level_advantages.shape == (6, 3)
    # base: scores pooled over rows [1, 1, 0, 0, 1, 1] -> mean 2/3,
    # sample var (4 * (1/3)^2 + 2 * (2/3)^2) / 5 = (12/9) / 5 = 4/15
    sd = math.sqrt(4 / 15) + 1e-6
    base = [(1 / 3) / sd, (1 / 3) / sd, (-2 / 3) / sd, (-2 / 3) / sd, (1 / 3) / sd, (1 / 3) / sd]
    assert_close(based.level_advantages[:, 0], base)
    # T3@0 had no non-zero level; now only the base (weight 1) counts
    assert based.advantages[1].item() == pytest.approx(base[1] / (1 + 1e-6), abs=1e-12)
    a0 = 0.25 / (0.25 + 1e-6)
    assert based.advantages[0].item() == pytest.approx((base[0] + 2 * a0) / (3 + 1e-6), abs=1e-12)


def test_hgpo_all_equal_level_gives_exact_zero():
    rows = [(0, "A", 0, "x", 1.0, 1.0), (0, "B", 0, "x", 1.0, 1.0)]
    out = hgpo_advantages(step_rows(rows))
    assert out.advantages.tolist() == [0.0, 0.0]


@settings(max_examples=120, deadline=None)
@given(
    rows=step_batches(),
    gamma=st.sampled_from([0.5, 1.0]),
    K=st.integers(0, 3),
    alpha=st.sampled_from([1.0, 0.5, 2.0]),
    mode=st.sampled_from(["mean_std_norm", "mean_norm"]),
    base_group=st.booleans(),
)
def test_hgpo_matches_reference(rows, gamma, K, alpha, mode, base_group):  # noqa: N803
    out = hgpo_advantages(step_rows(rows), gamma=gamma, K=K, alpha=alpha, mode=mode, base_group=base_group)
    g, tr, s, a, r, e = zip(*rows, strict=True)
    expected, returns = ref_hgpo(g, tr, s, a, r, e, gamma=gamma, K=K, alpha=alpha, mode=mode, base_group=base_group)
    assert out.level_advantages.shape == (len(rows), K + 1 + int(base_group))
    assert torch.allclose(out.step_returns, t64(returns), atol=1e-12)
    assert torch.allclose(out.advantages, t64(expected), atol=1e-9)
