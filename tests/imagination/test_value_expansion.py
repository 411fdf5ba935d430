"""Value expansion (``imagination.mode=value_expansion``): the MVE targets worked by hand, the branch plan,
and the policy batch, which must hold real rows alone."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from envs.trajectory import Trajectory, Turn
from imagination.imagine import ImaginedGroups
from imagination.value_expansion import (
    check_value_expansion,
    discounted_return,
    expanded_returns,
    expansion_branches,
    expansion_target,
    plan_expansion,
    policy_batch,
)
from policy.losses import ppo_policy_loss


def episode(
    rewards, *, done_last=True, valid=None, trajectory_id=0, source="real", prefix=None
) -> Trajectory:
    """An episode with these turn rewards; ``prefix``: a real episode's first turns copied before them."""
    valid = valid or [True] * len(rewards)
    played = [
        Turn(
            observation=f"o{i}",
            action=f"a{i}",
            next_observation=f"o{i + 1}",
            reward=r,
            done=done_last and i == len(rewards) - 1,
            valid=v,
            anchor_observation=f"o{i}",
        )
        for i, (r, v) in enumerate(zip(rewards, valid, strict=True))
    ]
    copied = [] if prefix is None else list(prefix)
    return Trajectory(
        env_name="hidden_number",
        env_kwargs={},
        seed=7,
        group_id=0,
        trajectory_id=trajectory_id,
        source=source,
        turns=copied + played,
        truncated=not done_last,
        branch_turn=len(copied),
    )


def test_discounted_return_by_hand():
    # 0.5 + 0.9 * 1.0 + 0.81 * 2.0 (the bootstrap after two turns)
    assert discounted_return([0.5, 1.0], 2.0, 0.9) == pytest.approx(3.02)
    assert discounted_return([], 0.7, 0.9) == pytest.approx(0.7)  # cut before any turn: the value itself


def test_expansion_target_by_hand():
    assert expansion_target(-0.1, [0.36, 1.0], 0.9) == pytest.approx(-0.1 + 0.9 * 0.68)
    with pytest.raises(ValueError, match="at least one"):
        expansion_target(0.0, [], 0.9)


def test_two_step_mve_targets_by_hand():
    # A real episode: turn 0 (invalid, reward 0, shaped to -0.1), turn 1 (reward 1, done).
    real = episode([0.0, 1.0], valid=[False, True], trajectory_id=10)
    # Two continuations from the real state after turn 0 (branch k = 1), gamma 0.9, penalty 0.1:
    # A: one imagined turn (reward 0), cut by the horizon, critic says 0.4 there: 0 + 0.9 * 0.4 = 0.36
    # B: one imagined turn, invalid (1 - 0.1 = 0.9), done:                                       0.9
    a = episode([0.0], done_last=False, trajectory_id=20, source="imagined", prefix=real.turns[:1])
    b = episode([1.0], valid=[False], trajectory_id=21, source="imagined", prefix=real.turns[:1])
    imagined = ImaginedGroups([a, b], [[a, b]], [(real, 1)])
    asked = []

    def end_values(states):
        asked.extend((t.trajectory_id, k) for t, k in states)
        return torch.tensor([0.4] * len(states))

    base = torch.tensor([5.0, 6.0])  # the ordinary targets: kept where nothing was imagined
    targets = expanded_returns(
        base, [(0, 0), (0, 1)], [real], imagined, end_values=end_values, gamma=0.9, invalid_action_penalty=0.1
    )
    # row 0: -0.1 + 0.9 * mean(0.36, 0.9) = -0.1 + 0.567; row 1 ended its episode: its own target
    assert targets.tolist() == pytest.approx([0.467, 6.0])
    assert asked == [(20, 2)]  # only the cut continuation is bootstrapped, after its last turn (prefix + 1)


def test_rows_of_other_episodes_keep_their_targets():
    real, other = episode([0.0, 1.0], trajectory_id=1), episode([0.0, 1.0], trajectory_id=2)
    cont = episode([1.0], trajectory_id=30, source="imagined", prefix=real.turns[:1])
    imagined = ImaginedGroups([cont], [[cont]], [(real, 1)])
    targets = expanded_returns(
        torch.tensor([0.3, 0.4, 0.5, 0.6]),
        [(0, 0), (0, 1), (1, 0), (1, 1)],
        [real, other],
        imagined,
        end_values=lambda s: torch.zeros(len(s)),
        gamma=1.0,
        invalid_action_penalty=0.0,
    )
    assert targets.tolist() == pytest.approx([1.0, 0.4, 0.5, 0.6])


def test_branches_follow_every_turn_that_did_not_end_the_episode():
    three = episode([0, 0, 1], trajectory_id=1)  # continues after turns 0 and 1
    one = episode([1], trajectory_id=2)  # done at once: nothing to continue
    cut = episode([0, 0], done_last=False, trajectory_id=3)  # truncated: the critic bootstraps its last row
    assert [(t.trajectory_id, k) for t, k in expansion_branches([three, one, cut])] == [
        (1, 1),
        (1, 2),
        (3, 1),
    ]


def test_plan_expansion_by_hand():
    branches = [(episode([0, 1], trajectory_id=i), 1) for i in range(5)]
    assert plan_expansion(branches, 12, random.Random(0)) == (branches, 2)
    kept, per_branch = plan_expansion(branches, 3, random.Random(0))
    assert per_branch == 1 and len(kept) == 3
    assert [t.trajectory_id for t, _ in kept] == sorted(t.trajectory_id for t, _ in kept)  # original order
    assert plan_expansion([], 3, random.Random(0)) == ([], 0)


@given(st.integers(1, 40), st.integers(1, 200), st.integers(0, 2**16))
def test_plan_expansion_stays_within_the_budget(n, budget, seed):
    branches = [(episode([0, 1], trajectory_id=i), 1) for i in range(n)]
    kept, per_branch = plan_expansion(branches, budget, random.Random(seed))
    assert len(kept) * per_branch <= budget
    assert len(kept) == min(n, budget)
    if n <= budget:  # as many continuations per branch as fit
        assert (per_branch + 1) * n > budget


def test_policy_mode_keeps_imagined_rows_at_their_weight():
    real, imagined = [episode([1], trajectory_id=1)], [episode([1], trajectory_id=2, source="imagined")]
    assert policy_batch(real, imagined, mode="policy", imagined_weight=0.5) == (real + imagined, [1.0, 0.5])
    assert policy_batch(real, [], mode="policy", imagined_weight=0.5) == (real, None)


def _real_row_gradient(mode: str) -> torch.Tensor:
    """d(policy loss)/d(log-prob) on the real rows' tokens, for the batch ``policy_batch`` builds."""
    real = [episode([1], trajectory_id=i) for i in range(2)]
    imagined = [episode([1], trajectory_id=10 + i, source="imagined") for i in range(6)]
    trajectories, weights = policy_batch(real, imagined, mode=mode, imagined_weight=1.0)
    generator = torch.Generator().manual_seed(0)
    advantages = torch.randn(len(trajectories), 4, generator=generator)  # (B, T)
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]]).repeat(len(trajectories), 1)  # (B, T)
    logp = torch.zeros(len(trajectories), 4, requires_grad=True)
    loss, _ = ppo_policy_loss(
        logp, logp.detach(), advantages, mask, weights=None if weights is None else torch.tensor(weights)
    )
    loss.backward()
    return logp.grad[:2], advantages[:2], mask[:2]


def test_imagined_rows_never_change_the_real_rows_policy_gradient():
    grad, advantages, mask = _real_row_gradient("value_expansion")
    # token-mean over the real tokens alone, first epoch (ratio 1, unclipped): -A / (real token count)
    assert torch.allclose(grad, -advantages * mask / mask.sum())


def test_check_value_expansion_refuses_what_it_cannot_do():
    check_value_expansion("value_expansion", True, "ppo_turn", "turn", 0)
    check_value_expansion("value_expansion", False, "grpo", None, 0)  # no imagination: nothing to refuse
    check_value_expansion("policy", True, "grpo", None, 3)
    with pytest.raises(ValueError, match="algo=grpo has no critic"):
        check_value_expansion("value_expansion", True, "grpo", None, 0)
    with pytest.raises(ValueError, match="token-level critic"):
        check_value_expansion("value_expansion", True, "ppo_token", "token", 0)
    with pytest.raises(ValueError, match="warmup_iterations"):
        check_value_expansion("value_expansion", True, "ppo_turn", "turn", 2)


def test_branches_skip_the_state_after_a_copied_prefix():
    # One copied turn then two played ones (branch_turn 1): turn 0 was not trained here, so the state
    # after it (k = 1) is no branch; the state after played turn 1 (k = 2) is.
    prefix = episode([0.0], done_last=False).turns
    branched = episode([0.0, 1.0], trajectory_id=4, prefix=prefix)
    assert [(t.trajectory_id, k) for t, k in expansion_branches([branched])] == [(4, 2)]


def _one_branch(cut: bool):
    real = episode([0.0, 1.0], trajectory_id=10)
    cont = episode([1.0], done_last=not cut, trajectory_id=20, source="imagined", prefix=real.turns[:1])
    return real, cont


def test_the_critic_is_asked_only_when_a_continuation_was_cut():
    real, cont = _one_branch(cut=False)
    asked = []

    def end_values(states):
        asked.append(list(states))
        return torch.zeros(len(states))

    targets = expanded_returns(torch.tensor([5.0]), [(0, 0)], [real], ImaginedGroups([cont], [[cont]], [(real, 1)]),
                               end_values=end_values, gamma=0.5, invalid_action_penalty=0.0)
    assert targets.tolist() == pytest.approx([0.0 + 0.5 * 1.0])  # r_0 + gamma * the continuation's 1
    assert asked == []


def test_expanded_returns_refuses_mismatched_inputs():
    real, cont = _one_branch(cut=True)
    imagined = ImaginedGroups([cont], [[cont]], [(real, 1)])
    kwargs = dict(gamma=0.5, invalid_action_penalty=0.0)
    with pytest.raises(ValueError, match=r"returns \(3,\) must be \(1,\), one per row"):
        expanded_returns(torch.zeros(3), [(0, 0)], [real], imagined, end_values=lambda s: torch.zeros(len(s)), **kwargs)
    with pytest.raises(ValueError):  # a critic that answers two values for one cut continuation
        expanded_returns(torch.zeros(1), [(0, 0)], [real], imagined, end_values=lambda s: torch.zeros(2), **kwargs)
    two_branches = ImaginedGroups([cont], [[cont]], [(real, 1), (real, 1)])  # two branch points, one group
    with pytest.raises(ValueError):
        expanded_returns(torch.zeros(1), [(0, 0)], [real], two_branches, end_values=lambda s: torch.zeros(len(s)),
                         **kwargs)


def test_refusals_say_what_is_wrong():
    with pytest.raises(ValueError, match="budget must be >= 1, got 0"):
        plan_expansion([], 0, random.Random(0))
    with pytest.raises(ValueError, match="trains the policy on real turns only"):
        check_value_expansion("value_expansion", True, "ppo_turn", "turn", 2)
