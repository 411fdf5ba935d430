"""The same seed twice gives the same run, and a run resumed from a checkpoint ends as it would have.

Every algorithm under ``experiments/conf/algo/`` is covered (a new one is picked up by its YAML), and
so are model-based runs (a world model fitted in the loop, imagined groups, a latent critic), all with
the learner's defaults (length-bucketed, trimmed minibatches; the sampling log-probs as old log-probs).
Per case:

- two runs with one seed, one writing a checkpoint every iteration and one writing none, must give
  the same metrics (wall times aside) and every saved weight bit for bit. They train inside this
  process one after the other, so anything that read the global RNG or leaked state from one run
  into the next would show; runs in separate processes (different string hash seeds) are compared
  in test_train_e2e.py and test_resume_e2e.py;
- the checkpointed run's folder is then turned back into that of a crash after its last iteration
  was logged but before that iteration's checkpoint was published, resumed, and must end as the
  run did: same metrics, weights and stored trajectories. This covers the state each algorithm
  adds (value models and their optimisers, the latent critic, a counterfactual critic and its data,
  world models); real kills are in test_resume_e2e.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from envs import TrajectoryStore
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
    "critic.latent.latent_size=16",
    "critic.latent.embed_size=16",
    "critic.latent.feature_size=16",
    "critic.latent.head_hidden_size=16",
]
SMALL_LM = [  # the LM world model, as small as the latent one above
    "world_model=lm", "world_model.num_members=2", "world_model.lm.hidden_size=16", "world_model.lm.num_heads=2",
    "world_model.lm.intermediate_size=32", "world_model.lm.num_layers=1", "world_model.lm.history_turns=2",
    "imagination.first_fit_steps=3", "imagination.fit_steps=2",
]
MODEL_BASED = [
    *SMALL_WORLD_MODEL,
    "imagination=dyna",
    "imagination.ratio=0.5",
    "imagination.gate_threshold=0",
]
# Algorithms that build a world model and a latent critic of their own get small ones.
SMALL_MODELS = {
    "counterfactual_gigpo": [*SMALL_WORLD_MODEL, *SMALL_LATENT_CRITIC],
    "real_branch_gigpo": SMALL_LATENT_CRITIC,
}
ALGOS = sorted(path.stem for path in (CONF / "algo").glob("*.yaml"))
CASES = {
    **{algo: [f"algo={algo}", *SMALL_MODELS.get(algo, [])] for algo in ALGOS},
    "model_based_grpo": ["algo=grpo", *MODEL_BASED],
    "model_based_grpo_lm_world_model": ["algo=grpo", *SMALL_LM, "imagination=dyna", "imagination.ratio=0.5",
                                        "imagination.gate_threshold=0"],
    "model_based_ppo_turn_latent": ["algo=ppo_turn", "critic=latent", *SMALL_LATENT_CRITIC, *MODEL_BASED],
    # The decoder's copy path: the state carries the latest observation's words through imagination.
    "model_based_grpo_copy_observation": ["algo=grpo", *MODEL_BASED, "world_model.decoder.copy_observation=true"],
    # Every refit rule on: the resumed run must know the iteration of the last fit (which rows are new).
    "model_based_grpo_refit_rules": ["algo=grpo", *MODEL_BASED, "imagination.fit_loop=plain",
                                     "imagination.refit_below=1.0", "imagination.fit_replay=0.5",
                                     "imagination.fit_holdout=0.5", "imagination.fit_eval_every=1"],
    # Several minibatches per epoch, so the length buckets and trimming have rows to sort and columns to cut.
    "grpo_small_minibatches": ["algo=grpo", "algo.ppo.minibatch_size=4"],
}
TIMING = ("time/", "charts/elapsed_s")
WEIGHTS = ("models/policy/model.safetensors", "models/critic/model.safetensors", "models/world_model/model.safetensors")


def comparable(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in read_records(run_dir)]


def same_weights(first: Path, second: Path) -> list[str]:
    """The weight files both folders hold, after checking they are equal bit for bit."""
    saved = [name for name in WEIGHTS if (first / name).exists()]
    for name in saved:
        a, b = (load_file(str(d / name)) for d in (first, second))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    return saved


def crash_after_logging_the_last_iteration(source: Path, target: Path) -> None:
    """A copy of a finished two-iteration run as a kill during iteration 2's checkpoint leaves it: the
    iteration's metrics line and store append are there; its checkpoint, the final models and the
    markers are not."""
    shutil.copytree(source, target)
    for name in ("done", "summary.json", "models", "checkpoints/iteration_00002"):
        path = target / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


@pytest.mark.parametrize("case", list(CASES))
def test_same_seed_same_run_and_exact_resume(tmp_path, case):
    checkpointed, plain, resumed = tmp_path / "checkpointed", tmp_path / "plain", tmp_path / "resumed"
    overrides = [*BASE, *CASES[case]]
    train_in_process([*overrides, "trainer.checkpoint_every=1"], checkpointed)
    train_in_process(overrides, plain)
    first = comparable(checkpointed)
    assert len(first) == 3 and first == comparable(plain)
    assert any(r.get("losses/grad_norm", 0.0) > 0 for r in first[1:]), "no update moved the weights"
    saved = same_weights(checkpointed, plain)
    assert "models/policy/model.safetensors" in saved
    if case.startswith("model_based"):
        assert "models/world_model/model.safetensors" in saved
        assert sum(r["imagination/imagined_groups"] for r in first[1:]) > 0

    crash_after_logging_the_last_iteration(checkpointed, resumed)
    stored = TrajectoryStore(checkpointed / "trajectories").load()
    assert len(TrajectoryStore(resumed / "trajectories")) == len(
        stored
    )  # iteration 2's append is to be undone
    train_in_process([*overrides, "trainer.checkpoint_every=1", f"resume={resumed}"], resumed)
    assert comparable(resumed) == first
    assert TrajectoryStore(resumed / "trajectories").load() == stored
    assert same_weights(checkpointed, resumed) == saved
