"""``import envs`` exposes the public names, builds environments, and stays cheap to import."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import envs

REPO = Path(__file__).resolve().parents[2]
PUBLIC = {
    "make": "envs.registry",
    "collect": "envs.collect",
    "count_env_steps": "envs.collect",
    "Trajectory": "envs.trajectory",
    "Turn": "envs.trajectory",
    "SampledAction": "envs.trajectory",
    "merge_trajectories": "envs.trajectory",
    "TrajectoryStore": "envs.store",
    "ExpertAgent": "envs.agent",
    "RandomAgent": "envs.agent",
    "export_chat_jsonl": "envs.chat",
    "import_chat_jsonl": "envs.chat",
    "split_seeds": "envs.splits",
}


@pytest.mark.parametrize(("name", "module"), sorted(PUBLIC.items()))
def test_public_names_are_the_definitions(name: str, module: str) -> None:
    assert getattr(envs, name) is getattr(importlib.import_module(module), name)
    assert name in envs.__all__ and name in dir(envs)


def test_make_builds_a_working_environment() -> None:
    env = envs.make("sokoban")
    assert env.name == "sokoban"
    assert isinstance(env.reset(0), str)
    assert isinstance(env.step(env.expert_action()).observation, str)


def test_collect_stays_the_function_after_its_submodule_is_imported() -> None:
    import envs.collect  # noqa: F401  (the import system would bind the submodule here)

    assert callable(envs.collect) and envs.collect.__name__ == "collect"
    (traj,) = envs.collect(
        envs.ExpertAgent(), "hidden_number", n_groups=1, group_size=1, seed=0, progress=False
    )
    assert traj.success and envs.count_env_steps([traj]) == traj.num_turns


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        envs.nope  # noqa: B018


@pytest.mark.slow
def test_importing_a_submodule_does_not_load_every_environment_or_datasets() -> None:
    code = "import sys, envs.base; print('envs.registry' in sys.modules, 'datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
