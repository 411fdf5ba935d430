"""A tiny model-based run, then a second run started from its saved world model and critic
(``world_model.init``, ``critic.init``), both ``python -m experiments.train`` in subprocesses."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from tests.experiments.test_fit_world_model import tensors_sha256
from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import TINY, assert_ok, run_train

pytestmark = pytest.mark.slow

MODEL_BASED = [*TINY, *SMALL_WORLD_MODEL, "algo=ppo_turn", "critic=latent", "imagination=dyna",
               "imagination.ratio=0.5", "imagination.gate_threshold=0"]


def test_a_run_starts_from_another_runs_saved_world_model_and_critic(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert_ok(run_train(*MODEL_BASED, f"hydra.run.dir={first}"))
    saved = {name: json.loads((first / "models" / name / "fitted_on.json").read_text())
             for name in ("world_model", "critic")}
    ledger = json.loads((first / "summary.json").read_text())["ledger"]
    # The first run's records are its ledger: what its world model and critic were fitted on.
    assert (saved["world_model"]["real_steps"], saved["world_model"]["expert_steps"]) == (
        ledger["world_model_real_steps"], ledger["world_model_expert_steps"])
    assert (saved["critic"]["real_steps"], saved["critic"]["expert_steps"]) == (ledger["critic_real_steps"], 0)
    assert saved["world_model"]["real_steps"] > 0 and saved["world_model"]["expert_steps"] > 0
    assert saved["critic"]["real_steps"] > 0

    # Another seed: its own fresh weights would differ from the saved ones.
    assert_ok(run_train(*MODEL_BASED, "seed=1", f"world_model.init={first}",
                        f"critic.init={first / 'models' / 'critic'}", f"hydra.run.dir={second}"))
    summary = json.loads((second / "summary.json").read_text())
    for name in ("world_model", "critic"):  # the weights at start are the saved ones
        weights = load_file(first / "models" / name / "model.safetensors")
        assert summary["imported"][name]["weights_sha256"] == tensors_sha256(weights), name
        assert summary["imported"][name]["folder"] == str(first / "models" / name)
    imported = summary["ledger"]
    assert (imported["imported_world_model_real_steps"], imported["imported_world_model_expert_steps"]) == (
        saved["world_model"]["real_steps"], saved["world_model"]["expert_steps"])
    assert (imported["imported_critic_real_steps"], imported["imported_critic_expert_steps"]) == (
        saved["critic"]["real_steps"], 0)
    # Its own saved world model was fitted on both runs' steps: the first's source, then its own.
    again = json.loads((second / "models" / "world_model" / "fitted_on.json").read_text())
    assert again["sources"][0] == saved["world_model"]["sources"][0] and len(again["sources"]) == 2
    assert again["real_steps"] == saved["world_model"]["real_steps"] + imported["world_model_real_steps"]
    assert again["expert_steps"] == saved["world_model"]["expert_steps"] + imported["world_model_expert_steps"]
