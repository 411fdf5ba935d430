"""A TextArena game that ``envs.textarena_games`` does not list trains from the command line with
no code written: LightsOut-v0 (single player, no download, moves ``[row col]``), its random-action
rule given in config, model-free and model-based, in subprocesses as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envs.registry import unavailable
from envs.textarena_games import GAMES, game_family
from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import REPO, TINY, assert_ok, finish, start_train

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable("textarena") is not None, reason=str(unavailable("textarena")))]

GAME = "LightsOut-v0"
UNLISTED = [o for o in TINY if not o.startswith("env=")] + [
    "env=textarena", f"env.kwargs.game={GAME}", "env.kwargs.random_action='[{0-4} {0-4}]'",
    "env.kwargs.max_turns=4", "trainer.warm_start.random_actions=true", "trainer.warm_start.expert_episodes=8",
    "world_model.max_observation_words=120", "world_model.max_action_words=6",
    "critic.latent.max_observation_words=120", "critic.latent.max_action_words=6", "algo=grpo",
]


def test_the_game_is_not_listed():
    assert game_family(GAME) not in GAMES  # else this file tests nothing new


@pytest.mark.parametrize("imagination", [[], ["imagination=dyna", "imagination.ratio=0.5", *SMALL_WORLD_MODEL]],
                         ids=["model_free", "dyna"])
def test_an_unlisted_game_trains_with_its_random_action_rule_from_config(tmp_path, imagination):
    run_dir = tmp_path / "run"
    result = finish(start_train(*UNLISTED, *imagination, f"hydra.run.dir={run_dir}"))
    assert_ok(result)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "textarena" and summary["iterations"] == 2
    # 2 iterations x 2 groups x 4 episodes of at most 4 turns; a model-based run's real share is less
    assert 0 < summary["real_env_steps"] <= 2 * 2 * 4 * 4
    assert summary["warm_start_env_steps"] > 0  # cloned from the config's random moves
    assert ("imagination" in summary) == bool(imagination)


def test_an_unlisted_game_without_a_rule_trains_with_no_warm_start(tmp_path):
    """No random actions known: the tokenizer's probe episodes play the malformed probe only."""
    run_dir = tmp_path / "run"
    plain = [o for o in UNLISTED if not o.startswith(("env.kwargs.random_action", "trainer.warm_start.random"))]
    result = finish(start_train(*plain, "trainer.warm_start.enabled=false", "policy.tokenizer=bpe",
                                f"hydra.run.dir={run_dir}"))
    assert_ok(result)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["iterations"] == 2 and summary["warm_start_env_steps"] == 0


def test_a_users_launcher_script_can_call_main(tmp_path):
    """``from experiments.train import main; main()`` in a script outside the repository finds the configs."""
    script = tmp_path / "launch.py"
    script.write_text("from experiments.train import main\nmain()\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, str(script), "env=textarena", f"env.kwargs.game={GAME}", "--cfg", "job"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"game: {GAME}" in result.stdout
