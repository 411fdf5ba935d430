"""Counterfactual groups: the real action and G policy siblings, imagined from the real state's latent."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import envs
from imagination.dream_env import DreamStepper
from imagination.step_groups.groups import imagine_counterfactual_groups, real_transition_uncertainty
from tests.imagination.conftest import tiny_model

SIBLING = "guess(4)"


class Siblings:
    """A text policy that always answers ``SIBLING`` and records what it was shown."""

    def __init__(self) -> None:
        self.views: list[tuple[list, str]] = []

    def act(self, views):
        self.views.extend((list(v.turns), v.observation) for v in views)
        return [SIBLING for _ in views]


class ConstantCritic(torch.nn.Module):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = torch.nn.Parameter(torch.tensor(value))

    def forward(self, states):
        return self.value.expand(len(states))


def real_states() -> list[tuple[envs.Trajectory, int]]:
    """Two real states of random hidden_number episodes whose real action there is not ``SIBLING``."""
    real = envs.collect(
        envs.RandomAgent(3), "hidden_number", group_size=1, n_groups=6, seed=11, progress=False
    )
    states = [(t, k) for t in real for k in range(min(t.num_turns, 3)) if t.turns[k].action != SIBLING]
    assert len({id(t) for t, _ in states}) >= 2
    return [states[0], next(s for s in states if s[0] is not states[0][0] and s[1] > 0)]


def fix_outcomes(model, monkeypatch, calls: list):
    """Make ``model.step`` give reward 1 for ``SIBLING`` and 0 otherwise, never done, no uncertainty;
    record each call's input latents and actions."""
    inner = model.step

    def step(states, actions, **kwargs):
        calls.append((states.latent.clone(), list(actions)))
        after, predictions = inner(states, actions, **kwargs)
        n = len(actions)
        return after, dataclasses.replace(
            predictions,
            reward=torch.tensor([1.0 if a == SIBLING else 0.0 for a in actions]),
            done=torch.zeros(n, dtype=torch.bool),
            uncertainty=torch.zeros(n),
        )

    monkeypatch.setattr(model, "step", step)


def test_a_group_is_the_real_action_and_g_siblings_from_the_real_states_latent(monkeypatch):
    model, states, policy, calls = tiny_model("hidden_number"), real_states(), Siblings(), []
    fix_outcomes(model, monkeypatch, calls)
    groups = imagine_counterfactual_groups(
        policy,
        model,
        ConstantCritic(0.5),
        "hidden_number",
        {},
        states,
        siblings=3,
        horizon=1,
        gamma=0.9,
        seed=0,
    )
    assert groups.values.shape == (2, 4) and [len(m) for m in groups.members] == [4, 4]
    for (trajectory, t), members in zip(states, groups.members, strict=True):
        for i, member in enumerate(members):
            assert member.branch_turn == t and member.num_turns == t + 1  # horizon 1: one imagined turn
            assert [x.action for x in member.turns[:t]] == [x.action for x in trajectory.turns[:t]]
            assert member.turns[t].action == (trajectory.turns[t].action if i == 0 else SIBLING)
    # The siblings were drawn from the real history (the policy saw exactly it), the real action never.
    expected = [
        ([x.action for x in tr.turns[:t]], tr.turns[t].observation) for tr, t in states for _ in range(3)
    ]
    assert [([x.action for x in turns], obs) for turns, obs in policy.views] == expected
    # One batched model step; each group's members stepped from the latent of their real history.
    assert len(calls) == 1
    latents, actions = calls[0]
    assert actions == [
        states[0][0].turns[states[0][1]].action,
        *[SIBLING] * 3,
        states[1][0].turns[states[1][1]].action,
        *[SIBLING] * 3,
    ]
    for r, (trajectory, t) in enumerate(states):
        prefix = [(x.action, x.next_observation) for x in trajectory.turns[:t]]
        reference = DreamStepper(model).fold(trajectory.turns[0].observation, prefix).latent[0]  # (D,)
        for i in range(4):
            assert torch.allclose(latents[4 * r + i], reference, atol=1e-5)


def test_values_are_the_imagined_return_plus_the_critic_where_cut_off(monkeypatch, model_outcomes):
    model, states = tiny_model("hidden_number"), real_states()
    fix_outcomes(model, monkeypatch, [])
    groups = imagine_counterfactual_groups(
        Siblings(),
        model,
        ConstantCritic(0.5),
        "hidden_number",
        {},
        states,
        siblings=2,
        horizon=2,
        gamma=0.9,
        seed=0,
    )
    # Real action: 0, then the policy's SIBLING: 1, then cut by the horizon: V = 0.5.
    real = 0.0 + 0.9 * 1.0 + 0.81 * 0.5
    sibling = 1.0 + 0.9 * 1.0 + 0.81 * 0.5
    assert groups.values.tolist() == [pytest.approx([real, sibling, sibling])] * 2
    assert all(m.truncated for members in groups.members for m in members)


def test_every_member_with_the_same_value_gives_a_zero_step_advantage(monkeypatch, model_outcomes):
    from imagination.step_groups.advantages import counterfactual_step_advantages

    model, states = tiny_model("hidden_number"), real_states()
    inner = model.step

    def flat(states_, actions, **kwargs):
        after, predictions = inner(states_, actions, **kwargs)
        n = len(actions)
        return after, dataclasses.replace(
            predictions,
            reward=torch.full((n,), 0.25),
            done=torch.ones(n, dtype=torch.bool),
            uncertainty=torch.zeros(n),
        )

    monkeypatch.setattr(model, "step", flat)
    groups = imagine_counterfactual_groups(
        Siblings(),
        model,
        ConstantCritic(9.0),
        "hidden_number",
        {},
        states,
        siblings=4,
        horizon=3,
        gamma=0.9,
        seed=0,
    )
    assert groups.values.tolist() == [[0.25] * 5] * 2  # done after one turn: no bootstrap
    assert counterfactual_step_advantages(groups.values).abs().sum().item() == 0.0


def test_real_transition_uncertainty_is_the_disagreement_on_the_real_outcome():
    model, states = tiny_model("hidden_number"), real_states()
    got = real_transition_uncertainty(model, states)
    for r, (trajectory, t) in enumerate(states):  # reference: one state at a time
        prefix = [(x.action, x.next_observation) for x in trajectory.turns[:t]]
        state = DreamStepper(model).fold(trajectory.turns[0].observation, prefix)
        turn = trajectory.turns[t]
        want = model.disagreement(state, [turn.action], [turn.next_observation])[0]
        assert got[r].item() == pytest.approx(want.item(), rel=1e-4, abs=1e-6)
