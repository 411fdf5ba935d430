"""``examples/train_in_dream.py`` end to end with the tiny budget, in a subprocess as a user runs it: the
policy is trained only in ``reverie/Dream-v0`` through the ``gym_text`` adapter, saved, and judged in
the real env; its accounting of real steps is checked against the stores it was fitted on."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs import TrajectoryStore, make

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("gymnasium") is None,
                       reason="the gym extra is not installed: pip install -e '.[gym]'"),
]
REPO = Path(__file__).resolve().parents[2]
DREAM_ID = "imagination.gym_dream:reverie/Dream-v0"
REAL = ("hidden_number", {"n": 5, "max_turns": 3})
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dream")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("HYDRA_FULL_ERROR", None)
    done = subprocess.run([sys.executable, "examples/train_in_dream.py", "--budget", "tiny", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (out / "stdout.txt").write_text(done.stdout)
    return out


def real_replay(trajectory, world_model: Path) -> list[str]:
    """The real env's answers to the trajectory's actions, from the real start the dream drew for its
    seed (``DreamGymEnv.reset(seed=...)`` says which in its info)."""
    from imagination.gym_dream import DreamGymEnv

    _, start = DreamGymEnv(world_model, REAL[0], REAL[1]).reset(seed=trajectory.seed)
    real = make(REAL[0], **REAL[1])
    real.reset(start["env_seed"])
    answers = []
    for turn in trajectory.turns:
        result = real.step(turn.action)
        answers.append(result.observation)
        if result.done:
            break
    return answers


def test_the_recipe_saves_a_policy_trained_in_the_dream_and_judges_it_in_the_real_env(recipe):
    for run in ("before_rl", "dream_run"):
        assert (recipe / run / "done").is_file() and not (recipe / run / "failed").exists(), run
        assert (recipe / run / "models" / "policy" / "config.json").is_file(), run
        for decoding, greedy in (("greedy", True), ("sampled", False)):
            result = json.loads((recipe / f"real_{run}_{decoding}.json").read_text())
            assert (result["env"], result["env_kwargs"], result["episodes"], result["greedy"]) == (*REAL, 4, greedy)
    assert "success in the real env, greedy              before RL" in (recipe / "stdout.txt").read_text()


def test_the_dream_runs_episodes_went_through_the_adapter_not_the_real_env(recipe):
    world_model = recipe / "fit" / "models" / "world_model"
    episodes = TrajectoryStore(recipe / "dream_run" / "trajectories").load()
    assert episodes
    for episode in episodes:
        assert episode.env_name == "gym_text"
        assert episode.env_kwargs["entry_point"] == "gymnasium:make"
        assert episode.env_kwargs["kwargs"]["id"] == DREAM_ID
        assert Path(episode.env_kwargs["kwargs"]["world_model"]) == world_model
    # A model fitted for 6 steps writes other answers than the real env's to the same actions.
    differ = [dreamt.next_observation != real  # the real episode may end first (a "correct")
              for episode in episodes for dreamt, real in zip(episode.turns, real_replay(episode, world_model), strict=False)]
    assert differ and any(differ)


def test_the_real_steps_reported_are_the_fits_and_no_other(recipe):
    figures = json.loads((recipe / "report.json").read_text())
    fitted = [t for part in ("train", "val") for t in TrajectoryStore(recipe / "fit" / "trajectories" / part).load()]
    assert figures["real_steps_fit"] == sum(len(t.turns) for t in fitted)
    summary = json.loads((recipe / "dream_run" / "summary.json").read_text())
    assert summary["env"] == "gym_text"
    # the trainer's own ledger counts the dream as its env; it fitted no world model of its own
    assert summary["ledger"]["world_model_real_steps"] == 0
    assert figures["dream_steps_rl"] == summary["ledger"]["real_env_steps"] > 0
