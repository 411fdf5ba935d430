"""snapshot() / restore(): a restored episode continues exactly as the original did, RNG included."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.base import EnvSnapshot, EpisodeDoneError
from envs.registry import make, unavailable

# Noisy hidden_number and slippery frozen_lake draw from their RNG at every step after reset.
CASES = {
    "hidden_number": {"noise": 0.3, "max_turns": 10},
    "frozen_lake": {"size": 4, "is_slippery": True},
    "sokoban": {"dim_room": (6, 6), "num_boxes": 2},
    "minishop": {"num_products": 50},
}

# The adapters snapshot by replay (envs/replay.py); the same properties must hold. Each case: (env name, options).
ADAPTER_CASES = {
    "textarena-GuessTheNumber": ("textarena", {"game": "GuessTheNumber-v0"}),
    "textarena-Mastermind": ("textarena", {"game": "Mastermind-v0"}),
    "textarena-TowerOfHanoi": ("textarena", {"game": "TowerOfHanoi-v0"}),
    "textarena-FrozenLake": ("textarena", {"game": "FrozenLake-v0", "max_turns": 20}),
    "gym_text": ("gym_text", {"entry_point": "envs.gym_toy:GuessNumberText"}),
    "gym_text-taxi": ("gym_text", {"entry_point": "envs.taxi_text:TaxiText"}),
    "gym_text-lookup": ("gym_text", {"entry_point": "envs.lookup_text:LookupText"}),
}
ALL_CASES = {**{name: (name, kwargs) for name, kwargs in CASES.items()}, **ADAPTER_CASES}


def build(case: str):
    name, kwargs = ALL_CASES[case]
    if unavailable(name) is not None:
        pytest.skip(unavailable(name))
    return make(name, **kwargs)


# An action is a recipe, so the same list replays identically on any env instance.
action_recipes = st.one_of(
    st.tuples(st.just("random"), st.integers(0, 2**16)),
    st.tuples(st.just("expert"), st.just(0)),
    st.tuples(st.just("text"), st.text(max_size=12)),
    st.tuples(st.just("text"), st.sampled_from(["guess(", "click[", "Upp", "search[]", "guess(0)", ""])),
)


def act(env, recipe) -> str:
    kind, value = recipe
    if kind == "random" and env.capabilities.random_action:
        return env.random_action(random.Random(value))
    if kind == "expert" and env.capabilities.expert:
        return env.expert_action()
    return value if kind == "text" else "?"


def play(env, recipes) -> list:
    """Step through ``recipes`` until done; per step, what the env showed before and returned."""
    trace = []
    for recipe in recipes:
        before = state_view(env)
        result = env.step(act(env, recipe))
        trace.append((before, result))
        if ended(result):
            break
    return trace


def ended(result) -> bool:
    """Done, or cut off by the env (a gymnasium-style time limit): either way no step follows."""
    return result.done or result.info.get("truncated", False)


def state_view(env) -> tuple:
    """What an agent can read from an env that has not ended: anchor, expert's answer, task
    (each where the env offers it)."""
    expert = env.expert_action() if env.capabilities.expert else None
    return env.anchor_observation(), expert, env.task_key()


@pytest.mark.parametrize("name", sorted(ALL_CASES))
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    prefix=st.lists(action_recipes, max_size=6),
    continuation=st.lists(action_recipes, min_size=1, max_size=12),
)
def test_restore_replays_the_continuation_exactly(name, seed, prefix, continuation):
    env = build(name)
    env.reset(seed)
    for recipe in prefix:
        if ended(env.step(act(env, recipe))):
            env.reset(seed)  # keep a live episode to branch from
            break
    snapshot = env.snapshot()
    pristine = copy.deepcopy(snapshot)
    at_snapshot = state_view(env)

    original = play(env, continuation)
    assert snapshot == pristine  # later steps do not reach into the snapshot

    env.restore(snapshot)
    assert state_view(env) == at_snapshot
    assert play(env, continuation) == original

    fresh = build(name)
    fresh.restore(snapshot)
    assert state_view(fresh) == at_snapshot
    assert play(fresh, continuation) == original
    assert snapshot == pristine  # nor do steps after a restore


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_restore_after_the_end_steps_again_from_the_snapshot(name):
    env = build(name)
    env.reset(5)
    snapshot = env.snapshot()
    action = act(env, ("random", 1))
    first = result = env.step(action)
    while not ended(result):
        result = env.step("not an action")
    with pytest.raises(EpisodeDoneError):
        env.step(action)
    env.restore(snapshot)
    assert env.step(action) == first


# --- the RNG stream, against an independent model of each env's draws -------------------------
def hidden_number_model(seed: int, skip: int, count: int) -> tuple[str, list[bool]]:
    """A guess that always misses, and the lie flags of misses ``skip + 1 .. skip + count``:
    Random(seed) draws the hidden number in 1..16, then one ``random() < noise`` per miss."""
    rng = random.Random(seed)
    hidden = rng.randint(1, 16)
    draws = [rng.random() < 0.4 for _ in range(skip + count)]
    return ("guess(1)" if hidden != 1 else "guess(2)"), draws[skip:]


@pytest.mark.parametrize("seed", range(8))
def test_noisy_hidden_number_resumes_its_rng_stream(seed):
    miss, expected = hidden_number_model(seed, skip=4, count=6)
    env = make("hidden_number", noise=0.4, max_turns=30)
    env.reset(seed)
    for _ in range(4):
        env.step(miss)
    snapshot = env.snapshot()
    original = [env.step(miss).info["lied"] for _ in range(6)]
    assert original == expected

    fresh = make("hidden_number", noise=0.4, max_turns=30)
    fresh.restore(snapshot)
    assert [fresh.step(miss).info["lied"] for _ in range(6)] == original


FROZEN_ROW = ["SFG"]  # "Left" at S: Up and Down hit the border, so every slip stays put and only shows in info


def frozen_lake_directions(seed: int, skip: int, count: int) -> list[str]:
    """Directions taken by ``Left`` at S: each step draws u; u < 1/3 Up, < 2/3 Left, else Down."""
    rng = random.Random(seed)
    draws = [rng.random() for _ in range(skip + count)]
    return ["Up" if u < 1 / 3 else "Left" if u < 2 / 3 else "Down" for u in draws[skip:]]


@pytest.mark.parametrize("seed", range(8))
def test_slippery_frozen_lake_resumes_its_rng_stream(seed):
    env = make("frozen_lake", desc=FROZEN_ROW, is_slippery=True, max_turns=30)
    env.reset(seed)
    for _ in range(4):
        env.step("Left")
    snapshot = env.snapshot()
    original = [env.step("Left").info["direction"] for _ in range(6)]
    assert original == frozen_lake_directions(seed, skip=4, count=6)

    fresh = make("frozen_lake", desc=FROZEN_ROW, is_slippery=True, max_turns=30)
    fresh.restore(snapshot)
    assert [fresh.step("Left").info["direction"] for _ in range(6)] == original


@pytest.mark.parametrize(
    ("name", "kwargs", "action_for", "outcome"),
    [
        ("hidden_number", {"noise": 0.4, "max_turns": 30}, lambda seed: hidden_number_model(seed, 0, 0)[0],
         lambda r: r.info["lied"]),
        ("frozen_lake", {"desc": FROZEN_ROW, "is_slippery": True, "max_turns": 30}, lambda seed: "Left",
         lambda r: r.info["direction"]),
    ],
)
def test_a_snapshot_without_its_rng_state_would_diverge(name, kwargs, action_for, outcome):
    """The planted bug: position restored but the RNG left where it was. Some seed must notice."""
    diverged = 0
    for seed in range(10):
        action = action_for(seed)
        env = make(name, **kwargs)
        env.reset(seed)
        snapshot = env.snapshot()
        original = [outcome(env.step(action)) for _ in range(6)]
        stale = dataclasses.replace(snapshot, state={**snapshot.state, "rng": env.snapshot().state["rng"]})
        env.restore(snapshot)
        assert [outcome(env.step(action)) for _ in range(6)] == original
        env.restore(stale)
        diverged += [outcome(env.step(action)) for _ in range(6)] != original
    assert diverged > 0


# --- refusals ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_restore_refuses_other_options_other_envs_and_other_values(name):
    env = make(name, **CASES[name])
    env.reset(0)
    snapshot = env.snapshot()
    other_options = make(name, **{**CASES[name], "max_turns": 7})
    with pytest.raises(ValueError, match="options"):
        other_options.restore(snapshot)
    other_name = "sokoban" if name != "sokoban" else "minishop"
    with pytest.raises(ValueError, match=f"snapshot of environment '{name}'"):
        make(other_name).restore(snapshot)
    with pytest.raises(ValueError, match="needs an EnvSnapshot"):
        env.restore(snapshot.state)


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_snapshot_needs_an_episode(name):
    with pytest.raises(RuntimeError, match="reset"):
        build(name).snapshot()


def test_snapshot_is_a_frozen_plain_value():
    env = make("frozen_lake", size=4)
    env.reset(3)
    snapshot = env.snapshot()
    assert isinstance(snapshot, EnvSnapshot) and snapshot.env_name == "frozen_lake"
    assert snapshot.options["size"] == 4 and snapshot.state["turn"] == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.env_name = "sokoban"
