"""Envs brought from elsewhere train from the command line without new code: a TextArena game (in a
subprocess, as a user runs it), the gymnasium-style toy warm-started from transcripts, a hanging env
step survived, and an env without expert or transcripts refused with the ways out."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from envs import ExpertAgent, collect, export_chat_jsonl
from envs.registry import unavailable
from tests.envs.hanging_env import RELEASE
from tests.experiments.in_process import train_in_process
from tests.experiments.test_train_e2e import TINY, run_train

pytestmark = pytest.mark.slow
NO_TEXTARENA = unavailable("textarena")
NO_GYMNASIUM = importlib.util.find_spec("gymnasium") is None
SMALL = [o for o in TINY if not o.startswith("env=")]


@pytest.mark.skipif(NO_TEXTARENA is not None, reason=str(NO_TEXTARENA))
def test_a_textarena_game_trains_from_the_command_line_and_logs_progress_without_bars(tmp_path):
    run_dir = tmp_path / "run"
    done = run_train("env=textarena", "env.kwargs.game=GuessTheNumber-v0", "algo=grpo", *SMALL,
                     f"hydra.run.dir={run_dir}")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "textarena" and summary["real_env_steps"] > 0 and summary["warm_start_env_steps"] > 0
    log = (run_dir / "train.log").read_text()
    assert "behaviour cloning: step 5/5" in log  # trainer.progress=false: the log still says how cloning goes
    assert log.count("evaluation: success") == 3  # before RL and after each of the 2 iterations


@pytest.mark.skipif(NO_GYMNASIUM, reason="the gym extra is not installed: pip install -e '.[gym]'")
def test_a_registered_gymnasium_env_trains_from_the_command_line(tmp_path):
    run_dir = tmp_path / "run"
    done = run_train("env=gym_text", "env.kwargs.entry_point=gymnasium:make",
                     "+env.kwargs.kwargs.id=tests.envs.gymnasium_toy:GuessNumberText-v0", "+env.kwargs.kwargs.max_episode_steps=8",
                     "algo=grpo", *SMALL, f"hydra.run.dir={run_dir}")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "gym_text" and summary["real_env_steps"] > 0 and summary["warm_start_env_steps"] > 0


def test_the_gym_toy_warm_starts_from_transcripts(tmp_path):
    experts = collect(ExpertAgent(), "gym_text", group_size=1, group_seeds=range(40), progress=False)
    path = tmp_path / "sft.jsonl"
    export_chat_jsonl(experts, path)
    summary = train_in_process(["env=gym_text", "algo=grpo", *SMALL, f"trainer.warm_start.transcripts={path}"],
                               tmp_path / "run")
    assert summary["warm_start_env_steps"] == sum(t.num_turns for t in experts)


@pytest.mark.skipif(NO_TEXTARENA is not None, reason=str(NO_TEXTARENA))
def test_an_env_without_expert_or_transcripts_is_refused_with_the_ways_out(tmp_path):
    with pytest.raises(ValueError, match="no scripted expert.*trainer.warm_start.transcripts.*random_actions=true.*enabled=false"):
        train_in_process(["env=textarena", "env.kwargs.game=Mastermind-v0", "algo=grpo", *SMALL], tmp_path / "run")
    summary = train_in_process(["env=textarena", "env.kwargs.game=Mastermind-v0", "algo=grpo", *SMALL,
                                "trainer.warm_start.enabled=false"], tmp_path / "run2")
    assert summary["warm_start_env_steps"] == 0
    summary = train_in_process(["env=textarena", "env.kwargs.game=Mastermind-v0", "algo=grpo", *SMALL,
                                "trainer.warm_start.random_actions=true"], tmp_path / "run3")
    assert summary["warm_start_env_steps"] > 0  # the format learned from random well-formed guesses


def test_a_hanging_env_step_drops_its_episode_and_the_run_goes_on(tmp_path):
    RELEASE.clear()
    try:
        summary = train_in_process(["env=gym_text", "env.kwargs.entry_point=tests.envs.hanging_env:HangingGym",
                                    "algo=grpo", *SMALL, "trainer.env_step_timeout_s=0.5",
                                    "trainer.warm_start.enabled=false"], tmp_path / "run")
    finally:
        RELEASE.set()
    assert summary["iterations"] == 2
    faults = Path(tmp_path / "run" / "faults.log").read_text()
    assert "faults/env_error" in faults and "did not return within 0.5 s" in faults
