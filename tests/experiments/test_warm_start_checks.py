"""The warm start's success checks are on the ledger: the env steps of every check episode, counted
once per check, kept beside a cached warm start, and unknown (None) for a cache folder from before.

The warm start runs in this process on a tiny policy (a few cloning steps), so these are fast."""

from __future__ import annotations

import math

import pytest

import experiments.build as build_module
from envs import make
from experiments.config import validate
from experiments.evaluation import play, summarise
from experiments.warm_start_cache import CHECKS
from tests.experiments.in_process import compose_config
from tests.experiments.test_train_e2e import TINY

EPISODES, MAX_STEPS, EVAL_EVERY = 8, 40, 15
CHECKS_RUN = math.ceil(MAX_STEPS / EVAL_EVERY)  # at cloning steps 15, 30 and the last, 40
# target_success=1.0: cloning stops early only if all 8 check episodes succeed, which a policy cloned
# for a few steps does not; every test checks that all CHECKS_RUN checks ran.
CLONE = [f"trainer.warm_start.eval_episodes={EPISODES}", f"trainer.warm_start.max_steps={MAX_STEPS}",
         f"trainer.warm_start.eval_every={EVAL_EVERY}", "trainer.warm_start.target_success=1.0"]


def warm_start(*overrides: str) -> build_module.WarmStart:
    # frozen_lake: a fall into a hole ends an episode early, so check episodes differ in length
    tiny = [item for item in TINY if not item.startswith("env=")]
    run = validate(compose_config([*tiny, "env=frozen_lake", *CLONE, *overrides]))
    env_kwargs = dict(run.env.kwargs)
    policy = build_module.build_policy(run, make(run.env.name, **env_kwargs).vocabulary())
    return build_module.warm_start(run, env_kwargs, policy, progress=False)


@pytest.fixture
def checks(monkeypatch) -> list[int]:
    """The turns of each check's episodes, summed from the episodes themselves as the warm start plays them."""
    played: list[int] = []

    def spy(agent, env_name, env_kwargs=None, *, seeds, max_turns=None, progress=False):
        episodes = play(agent, env_name, env_kwargs, seeds=seeds, max_turns=max_turns)
        assert len(episodes) == EPISODES
        played.append(sum(len(episode.turns) for episode in episodes))
        return summarise(episodes)

    monkeypatch.setattr(build_module, "evaluate", spy)
    return played


def test_one_turn_episodes_count_one_step_per_check_episode():
    # With a cap of one turn every check episode is exactly one env step: checks x episodes in all.
    assert warm_start("trainer.max_turns=1").check_steps == CHECKS_RUN * EPISODES  # 3 x 8 = 24


def test_the_count_is_the_turns_of_every_check_episode(checks):
    warm = warm_start()
    assert len(checks) == CHECKS_RUN
    assert len(set(checks)) > 1  # checks of different lengths: the sum tells them apart
    assert warm.check_steps == sum(checks) and warm.experts


def test_a_run_that_loads_the_cached_warm_start_reports_the_cloning_runs_count(tmp_path, checks, monkeypatch):
    cache = f"trainer.warm_start.cache_dir={tmp_path}"
    cloned = warm_start(cache)
    assert cloned.check_steps == sum(checks) and len(checks) == CHECKS_RUN
    (folder,) = tmp_path.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [CHECKS, "inputs.json", "model.safetensors"]

    def no_cloning(*args, **kwargs):
        raise AssertionError("cloned although the warm start was cached")

    monkeypatch.setattr(build_module, "behaviour_clone", no_cloning)
    loaded = warm_start(cache)
    assert loaded.check_steps == cloned.check_steps and len(checks) == CHECKS_RUN  # no check played again
    (folder / CHECKS).unlink()  # a cache folder saved before the count was kept
    assert warm_start(cache).check_steps is None  # unknown, not 0
