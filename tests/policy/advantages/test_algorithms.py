"""policy.advantages.algorithms: from a batch of trajectories to per-row token advantages, for every algorithm.

The batch below is built by hand: two episode groups, ragged trajectories (1 to 3 turns),
trajectory ids that differ from list positions, rows of different trajectories interleaved, an
anchor visited twice within one trajectory, and the same anchor strings in both groups (which must
never be pooled). Expected values come from hand arithmetic (in comments) or from pure-Python
references written here from ``docs/conventions.md`` (loops and dicts, no library code).
"""

import dataclasses
import inspect
import math

import pytest
import torch

from envs.trajectory import Trajectory, Turn
from policy.advantages import gigpo_advantages, grpo_advantages, hgpo_advantages
from policy.advantages.algorithms import (
    critic_token_advantages,
    first_rows_mask,
    group_baseline_token_advantages,
    turn_rows,
)
from policy.advantages.config import ALGORITHMS, AlgoConfig
from policy.advantages.step_rows import StepRows
from tests.policy.references import ref_group_norm


def make_traj(group: int, traj_id: int, steps: list[tuple[str, float]], invalid: tuple[int, ...] = ()) -> Trajectory:
    """A trajectory whose turn t has anchor steps[t][0] and reward steps[t][1]; turns in ``invalid``
    did not parse."""
    turns = [
        Turn(
            observation=f"history ... | {anchor}",  # differs from the anchor: turn_rows must read the anchor
            action=f"act {t}",
            next_observation="next",
            reward=reward,
            done=t == len(steps) - 1,
            valid=t not in invalid,
            anchor_observation=anchor,
        )
        for t, (anchor, reward) in enumerate(steps)
    ]
    return Trajectory(env_name="fake", env_kwargs={}, seed=100 + group, group_id=group, trajectory_id=traj_id,
                      turns=turns)


# list index: (group, trajectory id, [(anchor, reward), ...])        episode return
TRAJS = [
    make_traj(1, 21, [("A", 0.0), ("B", 1.0)]),                          # 1.0   (2 turns)
    make_traj(0, 10, [("A", 0.0), ("B", 0.0), ("A", 1.0)]),              # 1.0   (3 turns, A twice)
    make_traj(0, 11, [("A", 0.0)]),                                      # 0.0   (1 turn)
    make_traj(1, 20, [("A", 0.0), ("C", 0.0), ("B", 0.5)]),              # 0.5   (3 turns)
    make_traj(0, 12, [("A", -0.5), ("C", 1.0)]),                         # 0.5   (2 turns)
]
# (trajectory index, turn index) per row: interleaved, each trajectory's rows in time order.
KEYS = [(1, 0), (0, 0), (3, 0), (2, 0), (4, 0), (1, 1), (3, 1), (0, 1), (4, 1), (1, 2), (3, 2)]
# The same rows with time order broken inside trajectories.
SHUFFLED_KEYS = [(3, 2), (1, 2), (0, 1), (4, 1), (2, 0), (1, 0), (3, 0), (4, 0), (0, 0), (1, 1), (3, 1)]
L = 6
RESPONSE_LENGTHS = [2, 3, 1, 4, 2, 3, 5, 2, 1, 3, 2]  # per row of KEYS; right-aligned like encode_samples


def response_mask_for(lengths: list[int]) -> torch.Tensor:
    mask = torch.zeros(len(lengths), L)
    for b, n in enumerate(lengths):
        mask[b, L - n:] = 1.0
    return mask


def token_values_for(mask: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Distinct values in every column (off-mask ones too, so reading them would show)."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(mask.shape, generator=g) * 2.0 - 0.5  # (B, L)


def column(keys, fn):
    return [fn(TRAJS[i], i, t) for i, t in keys]


def assert_rows_close(actual: torch.Tensor, expected: list[float], tol: float = 1e-6):
    assert actual.shape == (len(expected),)
    assert torch.allclose(actual.double(), torch.tensor(expected, dtype=torch.float64), atol=tol, rtol=0), (
        actual.tolist(), expected)


def assert_broadcast(token_adv: torch.Tensor, per_row: list[float], mask: torch.Tensor, tol: float = 1e-6):
    """token_adv (B, L) holds per_row[b] on row b's response tokens and exactly 0 elsewhere."""
    assert token_adv.shape == mask.shape
    assert (token_adv[mask == 0] == 0).all()
    for b, value in enumerate(per_row):
        on = token_adv[b][mask[b] > 0]
        assert on.numel() == int(mask[b].sum())
        assert torch.allclose(on.double(), torch.full_like(on, value, dtype=torch.float64), atol=tol, rtol=0), (b, on, value)
        assert (on == on[0]).all()  # exactly the same scalar on every token of the row


# ----------------------------------------------------------------------------------------------
# Pure-Python references
# ----------------------------------------------------------------------------------------------

def ref_step_returns(keys, gamma):
    """R_t = r_t + gamma * R_{t+1} inside each trajectory, per row of keys."""
    returns = {}
    for i, traj in enumerate(TRAJS):
        running = 0.0
        for t in reversed(range(traj.num_turns)):
            running = traj.turns[t].reward + gamma * running
            returns[(i, t)] = running
    return [returns[k] for k in keys]


def first_row_flags(keys):
    seen, flags = set(), []
    for i, _ in keys:
        flags.append(i not in seen)
        seen.add(i)
    return flags


def ref_gigpo(keys, *, gamma, omega, mode, episode_stats, eps=1e-6):
    groups = column(keys, lambda tr, i, t: tr.group_id)
    anchors = column(keys, lambda tr, i, t: tr.turns[t].anchor_observation)
    scores = column(keys, lambda tr, i, t: tr.episode_return)
    stat = first_row_flags(keys) if episode_stats == "trajectories" else None
    episode = ref_group_norm(scores, groups, mode=mode, ddof=1, eps=eps, singleton="raw", stat=stat)
    step = ref_group_norm(ref_step_returns(keys, gamma), list(zip(groups, anchors, strict=True)),
                         mode=mode, ddof=1, eps=eps, singleton="zero")
    return [e + omega * s for e, s in zip(episode, step, strict=True)]


def ref_hgpo(keys, *, gamma, K, alpha, mode, base_group):
    groups = column(keys, lambda tr, i, t: tr.group_id)
    scores = column(keys, lambda tr, i, t: tr.episode_return)
    returns = ref_step_returns(keys, gamma)
    # history[b]: anchors of row b's trajectory up to and including its turn
    history = column(keys, lambda tr, i, t: [tr.turns[u].anchor_observation for u in range(t + 1)])
    levels = {}  # (row, k) -> advantage
    for k in range(1, K + 2):
        members = {}
        for b, h in enumerate(history):
            if len(h) >= k:
                members.setdefault((groups[b], tuple(h[-k:])), []).append(returns[b])
        for b, h in enumerate(history):
            if len(h) < k:
                continue
            vals = members[(groups[b], tuple(h[-k:]))]
            if len(vals) == 1 or max(vals) == min(vals):
                levels[(b, k)] = 0.0
                continue
            mean = sum(vals) / len(vals)
            std = math.sqrt(sum((x - mean) ** 2 for x in vals) / len(vals))  # population std
            levels[(b, k)] = (returns[b] - mean) / (std + 1e-6) if mode == "mean_std_norm" else returns[b] - mean
    base = ref_group_norm(scores, groups, mode=mode, ddof=1, eps=1e-6, singleton="raw") if base_group else None
    out = []
    for b in range(len(keys)):
        terms = [((k + 1.0) ** alpha, levels.get((b, k), 0.0)) for k in range(1, K + 2)]
        if base_group:
            terms.append((1.0, base[b]))
        terms = [(w, a) for w, a in terms if a != 0.0]
        den = sum(w for w, _ in terms)
        out.append(sum(w * a for w, a in terms) / (den + 1e-6) if terms else 0.0)
    return out


def ref_whiten(adv_tokens, mask):
    """(A - mean) / sqrt(unbiased var + 1e-8) over the valid tokens; 0 off the mask."""
    vals = [adv_tokens[b][col] for b in range(len(mask)) for col in range(L) if mask[b][col]]
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    return [[(adv_tokens[b][col] - mean) / math.sqrt(var + 1e-8) if mask[b][col] else 0.0 for col in range(L)]
            for b in range(len(mask))]


def ref_turn_gae(keys, mask, values, gamma, lam, bootstrap=None):
    """Turn-level GAE per trajectory in time order, V = value at the row's first response column;
    after the last turn V = ``bootstrap[trajectory index]`` (0 when absent: a terminal end).

    Returns advantages as (B, L) nested lists (the turn's scalar on its response tokens) and the
    returns as one value per row.
    """
    row_of = {key: b for b, key in enumerate(keys)}
    adv_row, ret_row = {}, {}
    for i, traj in enumerate(TRAJS):
        a_next, v_next = 0.0, (bootstrap or {}).get(i, 0.0)
        for t in reversed(range(traj.num_turns)):
            b = row_of[(i, t)]
            v = values[b][min(col for col in range(L) if mask[b][col])]
            a = traj.turns[t].reward + gamma * v_next - v + gamma * lam * a_next
            adv_row[b], ret_row[b] = a, a + v
            a_next, v_next = a, v
    adv = [[adv_row[b] if mask[b][col] else 0.0 for col in range(L)] for b in range(len(keys))]
    return adv, [ret_row[b] for b in range(len(keys))]


def ref_token_gae(keys, mask, values, gamma, lam, bootstrap=None):
    """Token-level GAE over each trajectory's action tokens in time order; the turn reward sits on
    the turn's last action token; one recursion runs across the turn boundaries."""
    row_of = {key: b for b, key in enumerate(keys)}
    adv = [[0.0] * L for _ in keys]
    ret = [[0.0] * L for _ in keys]
    for i, traj in enumerate(TRAJS):
        seq = []  # (row, column, reward) of every action token, in time order
        for t in range(traj.num_turns):
            b = row_of[(i, t)]
            cols = [col for col in range(L) if mask[b][col]]
            seq += [(b, col, traj.turns[t].reward if col == cols[-1] else 0.0) for col in cols]
        a_next, v_next = 0.0, (bootstrap or {}).get(i, 0.0)
        for b, col, r in reversed(seq):
            v = values[b][col]
            a = r + gamma * v_next - v + gamma * lam * a_next
            adv[b][col], ret[b][col] = a, a + v
            a_next, v_next = a, v
    return adv, ret


def assert_tokens_close(actual: torch.Tensor, expected, tol=1e-5):
    assert actual.shape == (len(expected), L)
    expected = torch.tensor(expected, dtype=torch.float64)
    assert torch.allclose(actual.double(), expected, atol=tol, rtol=0), (actual, expected)


# ----------------------------------------------------------------------------------------------
# turn_rows
# ----------------------------------------------------------------------------------------------

def test_turn_rows_fields_follow_the_row_keys():
    rows = turn_rows(TRAJS, KEYS)
    assert len(rows) == 11
    assert rows.trajectory_index == [1, 0, 3, 2, 4, 1, 3, 0, 4, 1, 3]
    assert rows.group_ids.tolist() == [0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 1]
    assert rows.traj_ids.tolist() == [10, 21, 20, 11, 12, 10, 20, 21, 12, 10, 20]  # ids, not list positions
    assert rows.steps.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert rows.anchors == ["A", "A", "A", "A", "A", "B", "C", "B", "C", "A", "B"]
    assert rows.step_rewards.tolist() == [0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5]
    assert rows.episode_rewards.tolist() == [1.0, 1.0, 0.5, 0.0, 0.5, 1.0, 0.5, 1.0, 0.5, 1.0, 0.5]
    assert rows.group_ids.dtype == rows.traj_ids.dtype == rows.steps.dtype == torch.long
    assert rows.step_rewards.dtype == rows.episode_rewards.dtype == torch.float32


HAS_PENALTY = "invalid_action_penalty" in inspect.signature(turn_rows).parameters


@pytest.mark.skipif(not HAS_PENALTY, reason="turn_rows has no invalid_action_penalty in this tree")
def test_turn_rows_invalid_action_penalty_shapes_step_rewards_and_episode_scores():
    # traj 0: turn 0 invalid (reward 0), turn 1 valid (reward 1), turn 2 invalid (reward 0.5)
    # traj 1: one invalid turn (reward 0)
    trajs = [make_traj(0, 0, [("A", 0.0), ("B", 1.0), ("C", 0.5)], invalid=(0, 2)), make_traj(0, 1, [("A", 0.0)], invalid=(0,))]
    keys = [(0, 0), (1, 0), (0, 1), (0, 2)]
    plain = turn_rows(trajs, keys)  # the default shapes nothing
    assert plain.step_rewards.tolist() == [0.0, 0.0, 1.0, 0.5]
    assert plain.episode_rewards.tolist() == [1.5, 0.0, 1.5, 1.5]
    rows = turn_rows(trajs, keys, invalid_action_penalty=0.25)
    # shaped turns: traj 0: [0 - .25, 1, .5 - .25] = [-.25, 1, .25], score 1.0; traj 1: [-.25], score -.25
    assert rows.step_rewards.tolist() == [-0.25, -0.25, 1.0, 0.25]
    assert rows.episode_rewards.tolist() == [1.0, -0.25, 1.0, 1.0]
    assert trajs[0].episode_return == 1.5  # the trajectories themselves are untouched


@pytest.mark.skipif(not HAS_PENALTY, reason="turn_rows has no invalid_action_penalty in this tree")
def test_invalid_action_penalty_reaches_the_estimators_through_the_rows():
    # Both trajectories earn 0 from the env; only their invalid turns differ. Unshaped, GRPO gives 0;
    # shaped with 0.5: scores 0 (all valid) and -0.5 (one invalid turn of two).
    # Rows pooled (Dr. GRPO), rows alternate traj 0 / traj 1: [0, -.5, 0, -.5], mean -.25 -> [.25, -.25, .25, -.25]
    trajs = [make_traj(0, 0, [("A", 0.0), ("B", 0.0)]), make_traj(0, 1, [("A", 0.0), ("C", 0.0)], invalid=(1,))]
    keys = [(0, 0), (1, 0), (0, 1), (1, 1)]
    mask = torch.ones(4, 3)
    cfg = AlgoConfig(name="drgrpo")
    assert (group_baseline_token_advantages(cfg, turn_rows(trajs, keys), mask) == 0).all()
    shaped = group_baseline_token_advantages(cfg, turn_rows(trajs, keys, invalid_action_penalty=0.5), mask)
    assert_broadcast(shaped, [0.25, -0.25, 0.25, -0.25], mask)


# ----------------------------------------------------------------------------------------------
# GRPO / Dr. GRPO
# ----------------------------------------------------------------------------------------------

# Rows pooled. Group 0 rows: traj 10 x3 (score 1), traj 11 x1 (0), traj 12 x2 (0.5)
#   mean = 4/6 = 2/3; squared deviations 3*(1/3)^2 + (2/3)^2 + 2*(1/6)^2 = 5/6; sample var 5/6/5 = 1/6
#   std = sqrt(1/6) = 0.4082483
# Group 1 rows: traj 21 x2 (1), traj 20 x3 (0.5): mean 3.5/5 = 0.7; sq dev 2*.09 + 3*.04 = .3;
#   var .3/4 = .075, std = 0.2738613
S0, S1 = math.sqrt(1 / 6) + 1e-6, math.sqrt(0.075) + 1e-6
GRPO_ROWS = {10: (1 / 3) / S0, 11: (-2 / 3) / S0, 12: (-1 / 6) / S0, 21: 0.3 / S1, 20: -0.2 / S1}
# One value per trajectory. Group 0: [1, 0, 0.5] mean .5, var (.25 + .25 + 0)/2 = .25, std .5
# Group 1: [1, .5] mean .75, var 2 * .0625 / 1 = .125, std .3535534
GRPO_TRAJ = {10: 0.5 / 0.500001, 11: -0.5 / 0.500001, 12: 0.0,
             21: 0.25 / (math.sqrt(0.125) + 1e-6), 20: -0.25 / (math.sqrt(0.125) + 1e-6)}
DRGRPO_ROWS = {10: 1 / 3, 11: -2 / 3, 12: -1 / 6, 21: 0.3, 20: -0.2}
DRGRPO_TRAJ = {10: 0.5, 11: -0.5, 12: 0.0, 21: 0.25, 20: -0.25}


def per_row(keys, by_traj_id):
    return [by_traj_id[TRAJS[i].trajectory_id] for i, _ in keys]


@pytest.mark.parametrize(
    ("name", "episode_stats", "norm_by_std", "expected"),
    [
        ("grpo", "rows", True, GRPO_ROWS),
        ("grpo", "trajectories", True, GRPO_TRAJ),
        ("grpo", "rows", False, DRGRPO_ROWS),  # norm_by_std=False on grpo is Dr. GRPO
        ("drgrpo", "rows", True, DRGRPO_ROWS),  # drgrpo never divides by the std, whatever norm_by_std says
        ("drgrpo", "trajectories", True, DRGRPO_TRAJ),
    ],
)
def test_grpo_family_hand_values_broadcast_on_response_tokens(name, episode_stats, norm_by_std, expected):
    cfg = AlgoConfig(name=name, episode_stats=episode_stats, norm_by_std=norm_by_std)
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    adv = group_baseline_token_advantages(cfg, rows, mask)
    assert_broadcast(adv, per_row(KEYS, expected), mask)


def test_grpo_equals_the_direct_estimator_call():
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    scores = torch.tensor(column(KEYS, lambda tr, i, t: tr.episode_return))
    groups = torch.tensor(column(KEYS, lambda tr, i, t: tr.group_id))
    direct = grpo_advantages(scores, groups)
    adv = group_baseline_token_advantages(AlgoConfig(name="grpo"), rows, mask)
    assert torch.equal(adv, direct.unsqueeze(-1) * mask)


def test_grpo_singleton_and_all_equal_groups_through_the_algorithm():
    # group 7: a single one-turn trajectory -> verl's raw rule, 2 / (1 + 1e-6);
    # group 8: two trajectories with the same score -> exactly 0.
    trajs = [make_traj(7, 0, [("A", 2.0)]), make_traj(8, 1, [("A", 0.1), ("B", 0.2)]), make_traj(8, 2, [("C", 0.3)])]
    keys = [(0, 0), (1, 0), (2, 0), (1, 1)]
    mask = torch.ones(4, 2)
    for stats in ("rows", "trajectories"):
        adv = group_baseline_token_advantages(AlgoConfig(name="grpo", episode_stats=stats), turn_rows(trajs, keys), mask)
        assert_broadcast(adv, [2.0 / (1 + 1e-6), 0.0, 0.0, 0.0], mask, tol=1e-7)
        assert (adv[1:] == 0).all()


# ----------------------------------------------------------------------------------------------
# GiGPO / HGPO
# ----------------------------------------------------------------------------------------------

def direct_columns(keys):
    return StepRows(
        group_ids=torch.tensor(column(keys, lambda tr, i, t: tr.group_id)),
        traj_ids=torch.tensor(column(keys, lambda tr, i, t: tr.trajectory_id)),
        steps=torch.tensor(column(keys, lambda tr, i, t: t)),
        anchors=column(keys, lambda tr, i, t: tr.turns[t].anchor_observation),
        step_rewards=torch.tensor(column(keys, lambda tr, i, t: tr.turns[t].reward)),
        episode_rewards=torch.tensor(column(keys, lambda tr, i, t: tr.episode_return)),
    )


GIGPO_CASES = [
    dict(gamma=0.8, omega=0.5, mode="mean_std_norm", episode_stats="rows"),
    dict(gamma=0.6, omega=2.0, mode="mean_norm", episode_stats="trajectories"),
    dict(gamma=0.95, omega=1.0, mode="mean_std_norm", episode_stats="trajectories"),
]


@pytest.mark.parametrize("options", GIGPO_CASES)
@pytest.mark.parametrize("keys", [KEYS, SHUFFLED_KEYS], ids=["interleaved", "shuffled"])
def test_gigpo_matches_reference_and_direct_call(options, keys):
    lengths = RESPONSE_LENGTHS if keys is KEYS else RESPONSE_LENGTHS[::-1]
    rows, mask = turn_rows(TRAJS, keys), response_mask_for(lengths)
    adv = group_baseline_token_advantages(AlgoConfig(name="gigpo", **options), rows, mask)
    expected = ref_gigpo(keys, **options)
    assert_broadcast(adv, expected, mask)
    direct = gigpo_advantages(direct_columns(keys), **options).advantages
    assert torch.allclose(adv, direct.unsqueeze(-1) * mask, atol=1e-7, rtol=0)
    # The options matter for this batch, so the comparison above would see one that was dropped.
    assert not torch.allclose(direct, gigpo_advantages(direct_columns(keys)).advantages)


def test_gigpo_step_groups_do_not_cross_episode_groups():
    # Anchor "A" at step 0 exists in both groups; pooled across groups the step term would differ.
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    cfg = AlgoConfig(name="gigpo", gamma=1.0, omega=1.0, mode="mean_norm")
    adv = group_baseline_token_advantages(cfg, rows, mask)
    # Row 3 is traj 11 (group 0, one turn, anchor A, return 0). Group 0's A rows have step returns
    # traj 10 t0: 1, traj 10 t2: 1, traj 11 t0: 0, traj 12 t0: 0.5 -> mean 2.5/4 = 0.625; step = -0.625.
    # Episode term (rows pooled, mean_norm): 0 - 2/3. Total = -0.625 - 0.6666667 = -1.2916667.
    assert adv[3, L - 1].item() == pytest.approx(-0.625 - 2 / 3, abs=1e-6)


HGPO_CASES = [
    dict(gamma=0.8, K=2, alpha=1.0, mode="mean_std_norm", base_group=False),
    dict(gamma=0.7, K=1, alpha=2.0, mode="mean_norm", base_group=True),
    dict(gamma=0.9, K=0, alpha=0.5, mode="mean_std_norm", base_group=True),
]


@pytest.mark.parametrize("options", HGPO_CASES)
@pytest.mark.parametrize("keys", [KEYS, SHUFFLED_KEYS], ids=["interleaved", "shuffled"])
def test_hgpo_matches_reference_and_direct_call(options, keys):
    rows, mask = turn_rows(TRAJS, keys), response_mask_for(RESPONSE_LENGTHS)
    cfg = AlgoConfig(name="hgpo", gamma=options["gamma"], history_levels=options["K"], alpha=options["alpha"],
                     mode=options["mode"], base_group=options["base_group"])
    adv = group_baseline_token_advantages(cfg, rows, mask)
    expected = ref_hgpo(keys, **options)
    assert any(abs(x) > 1e-3 for x in expected)
    assert_broadcast(adv, expected, mask)
    direct = hgpo_advantages(direct_columns(keys), **options).advantages
    assert torch.allclose(adv, direct.unsqueeze(-1) * mask, atol=1e-7, rtol=0)
    assert not torch.allclose(direct, hgpo_advantages(direct_columns(keys)).advantages)


# ----------------------------------------------------------------------------------------------
# PPO: turn-level and token-level GAE
# ----------------------------------------------------------------------------------------------

def test_ppo_turn_hand_example_rows_in_reverse_time_order():
    # One trajectory: turn 0 reward 0, turn 1 reward 1. Row 0 is turn 1, row 1 is turn 0.
    # V(before turn) is the first response column: V0 = 0.2, V1 = 0.4. gamma = lam = 0.5.
    #   turn 1: delta = 1 + 0.5 * 0 - 0.4 = 0.6, A1 = 0.6, return 1.0
    #   turn 0: delta = 0 + 0.5 * 0.4 - 0.2 = 0.0, A0 = 0 + 0.25 * 0.6 = 0.15, return 0.35
    trajs = [make_traj(0, 5, [("A", 0.0), ("B", 1.0)])]
    rows = turn_rows(trajs, [(0, 1), (0, 0)])
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    values = torch.tensor([0.4, 0.2])  # per row: V(before turn 1), V(before turn 0)
    cfg = AlgoConfig(name="ppo_turn", gamma=0.5, lam=0.5, whiten_advantages=False)
    adv, ret = critic_token_advantages(cfg, rows, mask, values)
    assert torch.allclose(adv, torch.tensor([[0.0, 0.6, 0.6], [0.0, 0.15, 0.15]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([1.0, 0.35]), atol=1e-6)


def test_ppo_turn_truncated_episode_bootstraps_from_the_value_after_its_last_turn():
    # The same trajectory cut off by the turn cap after turn 1, with V(after turn 1) = 0.8:
    #   turn 1: delta = 1 + 0.5 * 0.8 - 0.4 = 1.0, A1 = 1.0, return 1.4
    #   turn 0: delta = 0 + 0.5 * 0.4 - 0.2 = 0.0, A0 = 0 + 0.25 * 1.0 = 0.25, return 0.45
    trajs = [make_traj(0, 5, [("A", 0.0), ("B", 1.0)])]
    rows = turn_rows(trajs, [(0, 1), (0, 0)])
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    cfg = AlgoConfig(name="ppo_turn", gamma=0.5, lam=0.5, whiten_advantages=False)
    adv, ret = critic_token_advantages(cfg, rows, mask, torch.tensor([0.4, 0.2]), bootstrap=torch.tensor([0.8, 0.8]))
    assert torch.allclose(adv, torch.tensor([[0.0, 1.0, 1.0], [0.0, 0.25, 0.25]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([1.4, 0.45]), atol=1e-6)


def test_group_estimators_ignore_truncation_bootstraps():
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    truncated = [dataclasses.replace(t, truncated=True) for t in TRAJS]
    for name in ("grpo", "gigpo", "hgpo"):
        cfg = AlgoConfig(name=name)
        assert torch.equal(group_baseline_token_advantages(cfg, rows, mask),
                           group_baseline_token_advantages(cfg, turn_rows(truncated, KEYS), mask))


def test_ppo_token_hand_example_bootstraps_across_turns():
    # Same trajectory; two action tokens per turn with values turn 0: [.2, .3], turn 1: [.4, .5].
    # Flat sequence v = [.2, .3, .4, .5], r = [0, 0, 0, 1] (turn rewards on each turn's last token).
    # gamma = lam = 0.5, so gamma * lam = 0.25:
    #   pos 3: delta = 1 - .5 = .5;                 A = .5;                     ret = 1.0
    #   pos 2: delta = .5 * .5 - .4 = -.15;          A = -.15 + .25 * .5 = -.025; ret = .375
    #   pos 1: delta = .5 * .4 - .3 = -.1;           A = -.1 + .25 * -.025 = -.10625; ret = .19375
    #   pos 0: delta = .5 * .3 - .2 = -.05;          A = -.05 + .25 * -.10625 = -.0765625; ret = .1234375
    trajs = [make_traj(0, 5, [("A", 0.0), ("B", 1.0)])]
    rows = turn_rows(trajs, [(0, 1), (0, 0)])  # row 0 is turn 1
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    values = torch.tensor([[0.0, 0.4, 0.5], [0.0, 0.2, 0.3]])
    cfg = AlgoConfig(name="ppo_token", gamma=0.5, lam=0.5, whiten_advantages=False)
    adv, ret = critic_token_advantages(cfg, rows, mask, values)
    assert torch.allclose(adv, torch.tensor([[0.0, -0.025, 0.5], [0.0, -0.0765625, -0.10625]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[0.0, 0.375, 1.0], [0.0, 0.1234375, 0.19375]]), atol=1e-6)


def critic_inputs(name, keys, mask, values, truncated_values):
    """What the critic hands the estimator: turn values (first action column) or token values, and a
    per-row bootstrap read on each trajectory's last row."""
    per_row = values.gather(1, mask.argmax(dim=1, keepdim=True)).squeeze(1) if name == "ppo_turn" else values
    bootstrap = torch.tensor([truncated_values.get(i, 0.0) for i, _ in keys])
    return per_row, bootstrap


@pytest.mark.parametrize("name", ["ppo_turn", "ppo_token"])
@pytest.mark.parametrize("keys", [KEYS, SHUFFLED_KEYS], ids=["interleaved", "shuffled"])
@pytest.mark.parametrize("whiten", [False, True])
@pytest.mark.parametrize("truncated", [{}, {0: 0.7, 3: -0.4}], ids=["done", "truncated"])
def test_critic_advantages_match_brute_force_gae(name, keys, whiten, truncated):
    gamma, lam = 0.9, 0.8
    lengths = RESPONSE_LENGTHS if keys is KEYS else RESPONSE_LENGTHS[::-1]
    rows, mask = turn_rows(TRAJS, keys), response_mask_for(lengths)
    values = token_values_for(mask)
    cfg = AlgoConfig(name=name, gamma=gamma, lam=lam, whiten_advantages=whiten)
    per_row, bootstrap = critic_inputs(name, keys, mask, values, truncated)
    adv, ret = critic_token_advantages(cfg, rows, mask, per_row, bootstrap=bootstrap)

    ref = ref_turn_gae if name == "ppo_turn" else ref_token_gae
    exp_adv, exp_ret = ref(keys, mask.tolist(), values.tolist(), gamma, lam, truncated)
    if name == "ppo_turn":
        assert_rows_close(ret, exp_ret)  # one return per turn: raw advantage + value
    else:
        assert_tokens_close(ret, exp_ret)  # returns = raw advantages + values, whitening or not
        assert (ret[mask == 0] == 0).all()
    assert_tokens_close(adv, ref_whiten(exp_adv, mask.tolist()) if whiten else exp_adv)
    assert (adv[mask == 0] == 0).all()
    if whiten:  # whitened over the batch's action tokens: mean 0, unbiased std 1
        on = adv[mask > 0].double()
        assert on.mean().item() == pytest.approx(0.0, abs=1e-6)
        assert on.std().item() == pytest.approx(1.0, abs=1e-4)


def test_ppo_turn_and_ppo_token_differ_and_turn_uses_one_value_per_turn():
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    values = token_values_for(mask)
    turn_values, _ = critic_inputs("ppo_turn", KEYS, mask, values, {})
    turn_adv, _ = critic_token_advantages(AlgoConfig(name="ppo_turn", gamma=0.9, lam=0.8, whiten_advantages=False),
                                          rows, mask, turn_values)
    token_adv, _ = critic_token_advantages(AlgoConfig(name="ppo_token", gamma=0.9, lam=0.8, whiten_advantages=False),
                                           rows, mask, values)
    for b in range(len(KEYS)):
        on = turn_adv[b][mask[b] > 0]
        assert (on == on[0]).all()
    assert not torch.allclose(turn_adv, token_adv)
    # Only the first response column of each row matters to ppo_turn.
    first = mask.argmax(dim=1)
    shifted = values + 10.0
    shifted[torch.arange(len(KEYS)), first] = values[torch.arange(len(KEYS)), first]
    shifted_turn, _ = critic_inputs("ppo_turn", KEYS, mask, shifted, {})
    again, _ = critic_token_advantages(AlgoConfig(name="ppo_turn", gamma=0.9, lam=0.8, whiten_advantages=False),
                                       rows, mask, shifted_turn)
    assert torch.equal(again, turn_adv)


def test_sppo_gives_every_turn_the_episode_score_minus_the_first_state_value():
    # TRAJS[1] (id 10) scores 1.0, TRAJS[2] (id 11) 0.0; logits on their first rows: 0 and ln 3,
    # i.e. V = 0.5 and 0.75. Other rows' logits must not matter.
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    logits = torch.full((len(KEYS),), 9.0)
    logits[KEYS.index((1, 0))] = 0.0
    logits[KEYS.index((2, 0))] = math.log(3.0)
    adv, targets = critic_token_advantages(AlgoConfig(name="sppo"), rows, mask, logits)
    for b, (i, _) in enumerate(KEYS):
        if i in (1, 2):
            expected = 0.5 if i == 1 else -0.75
            assert torch.allclose(adv[b][mask[b] > 0], torch.tensor(expected), atol=1e-6)
    assert targets[KEYS.index((1, 2))] == 1.0 and targets[KEYS.index((2, 0))] == 0.0
    assert first_rows_mask(rows).tolist() == [1.0 if t == 0 else 0.0 for _, t in KEYS]


@pytest.mark.parametrize("name", ["grpo", "drgrpo", "gigpo", "hgpo"])
def test_critic_advantages_refuse_critic_free_algorithms(name):
    rows, mask = turn_rows(TRAJS, KEYS), response_mask_for(RESPONSE_LENGTHS)
    with pytest.raises(ValueError, match=name):
        critic_token_advantages(AlgoConfig(name=name), rows, mask, token_values_for(mask))


# ----------------------------------------------------------------------------------------------
# AlgoConfig
# ----------------------------------------------------------------------------------------------

def test_uses_critic_only_for_ppo_and_fused():
    assert {n for n in ALGORITHMS if AlgoConfig(name=n).uses_critic} == {"ppo_token", "ppo_turn", "sppo", "fused"}


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (dict(name="reinforce"), "algo.name"),
        (dict(gamma=1.5), "algo.gamma"),
        (dict(gamma=-0.1), "algo.gamma"),
        (dict(lam=1.01), "algo.lam"),
        (dict(lam=-1.0), "algo.lam"),
        (dict(episode_stats="episodes"), "algo.episode_stats"),
        (dict(mode="std_norm"), "algo.mode"),
        (dict(history_levels=-1), "algo.history_levels"),
        (dict(max_resample_rounds=-1), "algo.max_resample_rounds"),
        pytest.param(dict(invalid_action_penalty=-0.1), "algo.invalid_action_penalty", marks=pytest.mark.skipif(
            "invalid_action_penalty" not in {f.name for f in dataclasses.fields(AlgoConfig)},
            reason="AlgoConfig has no invalid_action_penalty in this tree")),
    ],
)
def test_algo_config_errors_name_the_key(overrides, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        AlgoConfig(**overrides)


def test_algo_config_accepts_range_ends():
    for gamma in (0.0, 1.0):
        for lam in (0.0, 1.0):
            AlgoConfig(name="ppo_turn", gamma=gamma, lam=lam)
    AlgoConfig(name="hgpo", history_levels=0)
    AlgoConfig(max_resample_rounds=0)


# --- cut imagined episodes are left out of the group statistics ------------------------------------
def one_turn(traj_id: int, reward: float, *, source: str = "imagined", truncated: bool = False) -> Trajectory:
    """A one-turn episode of group 0 from anchor "s0" with ``reward``; ``truncated``: cut, not done."""
    turn = Turn(observation="s0", action="a", next_observation="next", reward=reward, done=not truncated,
                valid=True, anchor_observation="s0")
    return Trajectory(env_name="fake", env_kwargs={}, seed=1, group_id=0, trajectory_id=traj_id, source=source,
                      turns=[turn], truncated=truncated)


# A finished with 1, B finished with 0, C halted after one turn (reward 0 so far).
CUT_GROUP = [one_turn(1, 1.0), one_turn(2, 0.0), one_turn(3, 0.0, truncated=True)]
ONE_TOKEN = torch.ones(3, 1)
# Left out, the group is {1, 0}: mean 1/2, sample std 1/sqrt(2), so +-1/sqrt(2) for A and B (GRPO);
# GiGPO adds the step group {1, 0} on anchor s0, the same +-1/sqrt(2) again; HGPO's one level (t = 0)
# uses the population std 1/2: +-1 (times weight 2 over weight 2). Had C been scored as a failure,
# the group {1, 0, 0} would give A (1 - 1/3) / sqrt(1/3) = 1.155 under GRPO.
R = 1 / math.sqrt(2)
CUT_EXPECTED = {"grpo": [R, -R, 0.0], "drgrpo": [0.5, -0.5, 0.0], "gigpo": [2 * R, -2 * R, 0.0],
                "hgpo": [1.0, -1.0, 0.0]}


@pytest.mark.parametrize("name", sorted(CUT_EXPECTED))
def test_a_cut_imagined_episode_is_left_out_of_its_group(name):
    rows = turn_rows(CUT_GROUP, [(0, 0), (1, 0), (2, 0)])
    assert rows.scored.tolist() == [True, True, False]
    got = group_baseline_token_advantages(AlgoConfig(name=name), rows, ONE_TOKEN)[:, 0]
    assert torch.allclose(got, torch.tensor(CUT_EXPECTED[name]), atol=1e-5), got
    # The finished members alone give the same numbers: the cut one changed nothing.
    alone = group_baseline_token_advantages(AlgoConfig(name=name), turn_rows(CUT_GROUP[:2], [(0, 0), (1, 0)]),
                                            ONE_TOKEN[:2])[:, 0]
    assert torch.allclose(got[:2], alone)


def test_a_cut_episode_would_otherwise_pull_the_baseline_down():
    scored_as_failure = turn_rows([CUT_GROUP[0], CUT_GROUP[1], one_turn(3, 0.0)], [(0, 0), (1, 0), (2, 0)])
    old = group_baseline_token_advantages(AlgoConfig(name="grpo"), scored_as_failure, ONE_TOKEN)[:, 0]
    assert math.isclose(float(old[0]), (2 / 3) / (math.sqrt(1 / 3) + 1e-6), rel_tol=1e-5)  # the bias it removes


def test_real_truncated_episodes_and_whole_cut_groups():
    real_cut = [one_turn(1, 1.0, source="real"), one_turn(2, 0.0, source="real", truncated=True)]
    rows = turn_rows(real_cut, [(0, 0), (1, 0)])
    assert rows.scored.tolist() == [True, True]  # a real episode is scored as it ended
    all_cut = [one_turn(1, 1.0, truncated=True), one_turn(2, 0.0, truncated=True)]
    got = group_baseline_token_advantages(AlgoConfig(name="gigpo"), turn_rows(all_cut, [(0, 0), (1, 0)]),
                                          ONE_TOKEN[:2])
    assert torch.equal(got, torch.zeros(2, 1))
