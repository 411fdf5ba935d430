"""Dream envs sharing a stepper are stepped with one WorldModel.step per lock-step round.

What the seed controls: a ``DreamStepper``'s generator, seeded once, draws every sample of every env
it steps. A collect call is therefore a fixed function of the stepper's seed, the starts and the
agent's actions. A batch of several envs shares the generator's draws, so it does not reproduce the
envs stepped one at a time (those would draw row after row); a batch of one does.
"""

from __future__ import annotations

import pytest
import torch

from envs import collect
from imagination import DreamEnv, DreamEnvFactory, DreamStepper
from tests.envs.fake_env import ScriptedAgent
from world_model import WorldState


def guess_by_turn(view):
    return f"guess({2 + 3 * len(view.turns)})"


def imagined(model, seed, **kwargs):
    factory = DreamEnvFactory(model, "hidden_number", seed=seed, **kwargs)
    return collect(ScriptedAgent(guess_by_turn), factory, group_size=3, n_groups=2, seed=5, source="imagined",
                   progress=False)


def test_one_model_step_per_round_for_all_envs(hn_model, patch_steps):
    steps = patch_steps(hn_model, done=False)
    agent = ScriptedAgent(guess_by_turn)
    factory = DreamEnvFactory(hn_model, "hidden_number", {"max_turns": 4}, seed=0)
    trajs = collect(agent, factory, env_kwargs={"max_turns": 4}, group_size=3, n_groups=2, seed=5,
                    source="imagined", progress=False)
    assert len(trajs) == 6 and all(t.num_turns == 4 for t in trajs)
    assert steps.batch_sizes == [6, 6, 6, 6] == agent.batch_sizes


def test_rounds_shrink_as_episodes_end(hn_model, patch_steps):
    steps = patch_steps(hn_model, done=lambda b: torch.arange(b) == 0)  # the first env of each round ends
    agent = ScriptedAgent(guess_by_turn)
    factory = DreamEnvFactory(hn_model, "hidden_number", seed=0, outcome="model")
    collect(agent, factory, group_size=4, n_groups=2, seed=5, source="imagined", progress=False)
    assert steps.batch_sizes == agent.batch_sizes  # one call per round, with every episode still running
    assert len(set(steps.batch_sizes)) > 1


def test_the_same_seed_gives_the_same_collect_and_another_seed_differs(hn_model):
    first, again = imagined(hn_model, seed=11), imagined(hn_model, seed=11)
    assert first == again
    other = imagined(hn_model, seed=12)
    assert [t.turns for t in other] != [t.turns for t in first]


def test_a_batch_is_one_model_step_on_the_stacked_states(hn_model):
    stepper = DreamStepper(hn_model, seed=4)
    envs = [DreamEnv(hn_model, "hidden_number", stepper=stepper) for _ in range(3)]
    for seed, env in enumerate(envs):
        env.reset(seed)
    env_states = [env.world_state for env in envs]
    actions = ["guess(1)", "guess(9)", "nonsense"]
    results = stepper.step_batch(envs, actions)
    stacked = WorldState(torch.cat([s.latent for s in env_states]), sum((s.observations for s in env_states), ()))
    after, predictions = hn_model.step(stacked, actions, generator=torch.Generator().manual_seed(4))
    assert [r.observation for r in results] == predictions.observations
    assert [r.info["model_reward"] for r in results] == predictions.reward.tolist()
    assert [r.info["model_done"] for r in results] == predictions.done.tolist()
    assert [r.info["uncertainty"] for r in results] == predictions.uncertainty.tolist()
    for row, env in enumerate(envs):
        assert torch.equal(env.world_state.latent, after.latent[row : row + 1])
    assert [r.info["valid"] for r in results] == [True, True, False]


def test_a_batch_of_one_equals_the_unbatched_step(hn_model):
    alone = DreamEnv(hn_model, "hidden_number", seed=0)
    shared = DreamEnv(hn_model, "hidden_number", stepper=DreamStepper(hn_model))
    alone.reset(2)
    shared.reset(2)
    alone.batch_stepper.reseed(21)  # both generators in the same state
    shared.batch_stepper.reseed(21)
    for action in ["guess(8)", "guess(4)", "guess(6)"]:
        a = alone.step(action)
        b = shared.batch_stepper.step_batch([shared], [action])[0]
        assert a == b
        if a.done:
            break


def test_step_batch_refuses_foreign_or_repeated_envs(hn_model):
    stepper = DreamStepper(hn_model)
    mine = DreamEnv(hn_model, "hidden_number", stepper=stepper)
    other = DreamEnv(hn_model, "hidden_number", seed=0)
    mine.reset(0)
    other.reset(0)
    for envs in ([mine, other], [mine, mine]):
        with pytest.raises(ValueError):
            stepper.step_batch(envs, ["guess(1)"] * len(envs))
    assert mine.world_state is not None and not mine.done  # nothing was stepped


def test_greedy_stepping_ignores_the_seed(hn_model):
    def greedy(seed):
        factory = DreamEnvFactory(hn_model, "hidden_number", seed=seed, greedy=True)
        return collect(ScriptedAgent(guess_by_turn), factory, group_size=2, n_groups=1, seed=5,
                       source="imagined", progress=False)

    assert greedy(0) == greedy(1)
