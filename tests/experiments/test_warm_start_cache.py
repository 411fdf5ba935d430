"""The warm-start cache: its key reads every input of cloning and nothing else, its files refuse bad
content, and a run that loads its warm start is the run that clones it, number for number."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import experiments.build as build_module
from experiments.config import WarmStartConfig
from experiments.warm_start_cache import (
    CHECKS,
    WEIGHTS,
    load_check_steps,
    load_warm_start,
    save_warm_start,
    warm_start_inputs,
    warm_start_key,
)
from policy.config import PolicyConfig
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import BASE, comparable, same_weights


def inputs(**changes):
    base = dict(env_name="hidden_number", env_kwargs={"low": 1, "high": 16}, policy_config=PolicyConfig(),
                warm_start_config=WarmStartConfig(), max_turns=None, seed=0)
    return warm_start_inputs(**{**base, **changes})


def test_key_changes_with_each_input_of_cloning():
    reference = warm_start_key(inputs())
    assert warm_start_key(inputs()) == reference  # stable within and across processes (no hash())
    changed = [
        inputs(env_name="frozen_lake"),
        inputs(env_kwargs={"low": 1, "high": 17}),
        inputs(policy_config=dataclasses.replace(PolicyConfig(), intermediate_size=PolicyConfig().intermediate_size + 1)),
        inputs(warm_start_config=WarmStartConfig(max_steps=599)),
        inputs(warm_start_config=WarmStartConfig(lr=2e-3)),
        inputs(max_turns=3),
        inputs(seed=1),
    ]
    keys = [warm_start_key(i) for i in changed]
    assert reference not in keys and len(set(keys)) == len(keys)


def test_key_ignores_where_the_cache_lies():
    assert warm_start_key(inputs(warm_start_config=WarmStartConfig(cache_dir="/a"))) == warm_start_key(
        inputs(warm_start_config=WarmStartConfig(cache_dir="/b")))


def small_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def test_round_trip_gives_the_same_tensors(tmp_path):
    saved = small_model(0)
    assert load_warm_start(tmp_path, inputs(), small_model(1)) is None  # nothing cached yet
    folder = save_warm_start(tmp_path, inputs(), saved, check_steps=37)
    assert sorted(p.name for p in folder.iterdir()) == [CHECKS, "inputs.json", WEIGHTS]  # no temporary left behind
    assert load_check_steps(folder) == 37
    loaded = small_model(1)
    assert load_warm_start(tmp_path, inputs(), loaded) == folder
    for (name, a), (_, b) in zip(saved.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert load_warm_start(tmp_path, inputs(seed=1), small_model(1)) is None  # another key


def test_corrupted_or_mismatched_weights_are_refused(tmp_path):
    folder = save_warm_start(tmp_path, inputs(), small_model(0), check_steps=0)
    with pytest.raises(ValueError, match="does not fit|cannot be loaded"):
        load_warm_start(tmp_path, inputs(), torch.nn.Linear(3, 4))
    (folder / WEIGHTS).write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match=f"{WEIGHTS}.*cannot be loaded.*delete"):
        load_warm_start(tmp_path, inputs(), small_model(1))


def test_check_steps_of_an_older_folder_are_unknown_and_a_bad_record_is_refused(tmp_path):
    folder = save_warm_start(tmp_path, inputs(), small_model(0), check_steps=0)
    assert load_check_steps(folder) == 0  # zero is a count, not a missing one
    (folder / CHECKS).unlink()  # as a folder saved before the count was kept
    assert load_check_steps(folder) is None
    for text in ("{not json", '{"steps": 3}', '{"check_steps": -1}', '{"check_steps": 2.5}', "[]"):
        (folder / CHECKS).write_text(text)
        with pytest.raises(ValueError, match=f"{CHECKS}"):
            load_check_steps(folder)


@pytest.mark.slow
def test_a_run_that_loads_its_warm_start_is_the_run_that_clones(tmp_path, monkeypatch):
    overrides = [*BASE, "algo=grpo"]
    cached = [*overrides, f"trainer.warm_start.cache_dir={tmp_path / 'cache'}"]
    train_in_process(overrides, tmp_path / "plain")
    train_in_process(cached, tmp_path / "first")  # clones, then saves
    assert len(list((tmp_path / "cache").iterdir())) == 1

    def no_cloning(*args, **kwargs):
        raise AssertionError("cloned although the warm start was cached")

    monkeypatch.setattr(build_module, "behaviour_clone", no_cloning)
    train_in_process(cached, tmp_path / "loaded")
    reference = comparable(tmp_path / "plain")
    assert comparable(tmp_path / "first") == reference and comparable(tmp_path / "loaded") == reference
    assert any(r.get("losses/grad_norm", 0.0) > 0 for r in reference[1:]), "no update moved the weights"
    assert "models/policy/model.safetensors" in same_weights(tmp_path / "plain", tmp_path / "loaded")
