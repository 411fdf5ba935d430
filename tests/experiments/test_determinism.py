"""The same seed twice gives the same run: metrics (wall times aside) and every saved weight, bit for bit.

Every algorithm under ``experiments/conf/algo/`` is covered (a new one is picked up by its YAML), and
so are model-based runs (a world model fitted in the loop, imagined groups, a latent critic). Both
runs of a pair train inside this process one after the other, so anything that read the global RNG
or leaked state from one run into the next would show; runs in separate processes (different string
hash seeds) are compared in test_train_e2e.py and test_resume_e2e.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.experiments.in_process import CONF, train_in_process
from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import read_records

pytestmark = pytest.mark.slow

# hidden_number over 1 .. 5 in 3 guesses: a briefly cloned tiny policy succeeds often enough that the
# group methods get non-zero advantages, so the updates move the weights.
BASE = [
    "experiment=learning_check",
    "trainer.iterations=2",
    "trainer.groups_per_iteration=2",
    "trainer.group_size=4",
    "trainer.eval_every=2",
    "trainer.eval_episodes=8",
    "trainer.warm_start.max_steps=40",
    "trainer.warm_start.lr=1e-2",
    "trainer.warm_start.expert_episodes=16",
    "trainer.warm_start.eval_every=10",
    "trainer.warm_start.eval_episodes=8",
    "trainer.progress=false",
    "policy.hidden_size=32",
    "policy.num_layers=1",
    "policy.num_heads=2",
    "policy.intermediate_size=64",
    "algo.ppo.epochs=1",
]
SMALL_LATENT_CRITIC = [
    "critic.latent_size=16",
    "critic.latent_embed_size=16",
    "critic.latent_feature_size=16",
    "critic.latent_head_hidden_size=16",
]
MODEL_BASED = [
    *SMALL_WORLD_MODEL,
    "imagination=dyna",
    "imagination.ratio=0.5",
    "imagination.gate_threshold=0",
]
# Algorithms that build a world model and a latent critic of their own get small ones.
SMALL_MODELS = {"counterfactual_gigpo": [*SMALL_WORLD_MODEL, *SMALL_LATENT_CRITIC]}
ALGOS = sorted(path.stem for path in (CONF / "algo").glob("*.yaml"))
CASES = {
    **{algo: [f"algo={algo}", *SMALL_MODELS.get(algo, [])] for algo in ALGOS},
    "model_based_grpo": ["algo=grpo", *MODEL_BASED],
    "model_based_ppo_turn_latent": ["algo=ppo_turn", "critic=latent", *SMALL_LATENT_CRITIC, *MODEL_BASED],
}
TIMING = ("time/", "charts/elapsed_s")
WEIGHTS = ("policy/model.safetensors", "critic/model.safetensors", "world_model/model.safetensors")


def comparable(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in read_records(run_dir)]


@pytest.mark.parametrize("case", list(CASES))
def test_same_seed_same_run(tmp_path, case):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for run_dir in dirs:
        train_in_process([*BASE, *CASES[case]], run_dir)
    first, second = (comparable(d) for d in dirs)
    assert len(first) == 3 and first == second
    assert any(r.get("losses/grad_norm", 0.0) > 0 for r in first[1:]), "no update moved the weights"
    saved = [name for name in WEIGHTS if (dirs[0] / name).exists()]
    assert "policy/model.safetensors" in saved
    if case.startswith("model_based"):
        assert "world_model/model.safetensors" in saved
        assert sum(r["imagination/imagined_groups"] for r in first[1:]) > 0
    for name in saved:
        a, b = (load_file(str(d / name)) for d in dirs)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
