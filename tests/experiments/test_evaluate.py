"""Evaluating a saved run: finding its policy and settings, held-out seeds, greedy play, the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from envs.agent import AgentView
from envs.registry import make
from envs.splits import EVAL_SEEDS, TRAIN_SEEDS
from envs.trajectory import Trajectory, Turn
from experiments import evaluate as cli
from experiments.evaluation import fresh_eval_seeds, render_transcript, summarise, training_eval_seeds
from experiments.saved_run import SavedRunError, find_saved_run, load_policy
from policy.config import PolicyConfig
from policy.model import build_tiny_lm, build_tiny_tokenizer

REPO = Path(__file__).resolve().parents[2]
ENV = {"name": "hidden_number", "kwargs": {"n": 5, "max_turns": 3}}
POLICY = {
    "hidden_size": 32,
    "num_layers": 1,
    "num_heads": 2,
    "intermediate_size": 64,
    "history_window": 1,
    "max_action_tokens": 6,
}


def save_tiny_run(folder: Path, *, seed: int = 3, eval_episodes: int = 6, policy_dir: str = "models/policy") -> Path:
    """A run folder as experiments/train.py leaves it (config.yaml, a saved policy), untrained."""
    folder.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(
        OmegaConf.create(
            {
                "env": ENV,
                "policy": POLICY,
                "seed": seed,
                "trainer": {"eval_episodes": eval_episodes, "max_turns": None},
            }
        ),
        folder / "config.yaml",
    )
    tokenizer = build_tiny_tokenizer(make(ENV["name"], **ENV["kwargs"]).vocabulary())
    model = build_tiny_lm(PolicyConfig(**POLICY), tokenizer, seed=0)
    model.save_pretrained(folder / policy_dir)
    tokenizer.save_pretrained(folder / policy_dir)
    return folder


def turn(reward: float, valid: bool = True) -> Turn:
    return Turn("obs", "act", "next", reward, False, valid, "obs")


def trajectory(seed: int, rewards: list[float], success: bool, invalid: int = 0) -> Trajectory:
    turns = [turn(r, valid=i >= invalid) for i, r in enumerate(rewards)]
    return Trajectory("hidden_number", {}, seed, seed, seed, turns=turns, success=success)


# --- the library: figures, seeds, transcripts -------------------------------------------------------


def test_summarise_counts_by_hand():
    episodes = [
        trajectory(0, [0.0, 1.0], True, invalid=1),
        trajectory(1, [0.0, 0.0, -0.5], False),
        trajectory(2, [1.0], True),
    ]
    result = summarise(episodes)
    assert result.success_rate == pytest.approx(2 / 3)
    assert result.episodic_return == pytest.approx((1.0 + -0.5 + 1.0) / 3)
    assert result.episode_length == pytest.approx(6 / 3)
    assert result.invalid_action_rate == pytest.approx(1 / 6)  # one invalid turn of six
    assert result.env_steps == 6


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**20), count=st.integers(1, 12), excluded=st.integers(0, 12))
def test_fresh_eval_seeds_are_held_out_distinct_and_skip_the_excluded(seed, count, excluded):
    # Exclude seeds the same stream would have drawn first, so a broken exclusion shows.
    exclude = fresh_eval_seeds("hidden_number", {}, seed, excluded)
    seeds = fresh_eval_seeds("hidden_number", {}, seed, count, exclude=exclude)
    assert len(seeds) == len(set(seeds)) == count
    assert not set(seeds) & set(exclude)
    assert all(s in EVAL_SEEDS and s not in TRAIN_SEEDS for s in seeds)
    assert seeds == fresh_eval_seeds("hidden_number", {}, seed, count, exclude=exclude)  # deterministic


def test_fresh_eval_seeds_never_repeat_the_runs_own_evaluation_seeds():
    own = training_eval_seeds("hidden_number", {}, 0, 50)
    fresh = fresh_eval_seeds("hidden_number", {}, 0, 50, exclude=own)
    assert len(fresh) == 50 and not set(fresh) & set(own)


def test_transcripts_alternate_failures_and_successes():
    episodes = [
        trajectory(0, [1.0], True),
        trajectory(1, [0.0], False),
        trajectory(2, [1.0], True),
        trajectory(3, [1.0], True),
        trajectory(4, [0.0], False),
    ]
    assert [t.seed for t in cli.pick_transcripts(episodes, 3)] == [1, 0, 4]
    assert [t.seed for t in cli.pick_transcripts(episodes, 5)] == [1, 0, 4, 2, 3]
    assert [t.seed for t in cli.pick_transcripts(episodes[:1], 3)] == [0]
    assert cli.pick_transcripts(episodes, 0) == []


def test_a_transcript_marks_invalid_actions():
    text = render_transcript(trajectory(7, [0.0, 1.0], True, invalid=1))
    assert text.splitlines() == [
        "seed 7 return 1.00 success True",
        "obs",
        "> act   [invalid action]",
        "obs",
        "> act",
        "next",
    ]


# --- finding and loading a saved run ----------------------------------------------------------------


@pytest.mark.parametrize("saved_at", ["models/policy", "policy"])  # this layout, and runs saved before it
def test_a_run_folder_a_policy_folder_and_a_checkpoint_all_resolve_to_the_run_settings(tmp_path, saved_at):
    run = save_tiny_run(tmp_path / "run", policy_dir=saved_at)
    save_tiny_run(tmp_path / "run", policy_dir="checkpoints/iteration_00002")
    for folder, policy_dir in [
        (run, run / saved_at),
        (run / saved_at, run / saved_at),
        (run / "checkpoints/iteration_00002", run / "checkpoints/iteration_00002"),
    ]:
        saved = find_saved_run(folder)
        assert saved.policy_dir == policy_dir
        assert saved.config_path.resolve() == (run / "config.yaml").resolve()
        assert (saved.env.name, saved.env_kwargs, saved.seed, saved.eval_episodes) == (
            "hidden_number",
            ENV["kwargs"],
            3,
            6,
        )
        assert saved.policy.history_window == 1 and saved.policy.max_action_tokens == 6


def test_greedy_play_ignores_the_sampling_seed_and_sampling_does_not(tmp_path):
    saved = find_saved_run(save_tiny_run(tmp_path / "run"))
    env = make("hidden_number", **ENV["kwargs"])
    views = [AgentView(env, [], env.reset(s)) for s in range(16)]

    def actions(greedy: bool, seed: int) -> list[tuple[int, ...]]:
        return [a.action_ids for a in load_policy(saved, greedy=greedy, seed=seed).act(views)]

    assert load_policy(saved).cfg.temperature == 0.0 and load_policy(saved).model.training is False
    assert actions(True, 0) == actions(True, 1)
    assert actions(False, 0) != actions(False, 1)  # an untrained model: sampling spreads widely


@pytest.mark.parametrize(
    "make_folder, message",
    [
        (lambda p: p / "missing", "is not a folder"),
        (lambda p: p, "is not a run folder (config.yaml and models/policy/) nor a policy folder"),
        (lambda p: (p / "config.yaml").write_text("seed: 0\n") and p, "run folder without a saved policy"),
    ],
)
def test_what_is_not_a_run_is_refused_naming_what_it_lacks(tmp_path, make_folder, message):
    with pytest.raises(SavedRunError, match=message.replace("(", r"\(").replace(")", r"\)")):
        find_saved_run(make_folder(tmp_path))


def test_a_lone_policy_folder_needs_a_config(tmp_path):
    run = save_tiny_run(tmp_path / "run")
    save_tiny_run(tmp_path / "other")
    (tmp_path / "other" / "config.yaml").unlink()
    with pytest.raises(SavedRunError, match="pass --config"):
        find_saved_run(tmp_path / "other" / "models" / "policy")
    assert find_saved_run(tmp_path / "other" / "models" / "policy", config=run / "config.yaml").seed == 3


def test_damaged_files_give_one_clear_error(tmp_path):
    run = save_tiny_run(tmp_path / "run")
    weights = run / "models" / "policy" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:500])
    with pytest.raises(SavedRunError, match="cannot load the saved policy"):
        load_policy(find_saved_run(run))
    config = OmegaConf.load(run / "config.yaml")
    config.policy.history_windw = 2
    OmegaConf.save(config, run / "config.yaml")
    with pytest.raises(SavedRunError, match="history_windw"):
        find_saved_run(run)
    (run / "config.yaml").write_text("env: [\n")
    with pytest.raises(SavedRunError, match="not a readable YAML file"):
        find_saved_run(run)
    OmegaConf.save(OmegaConf.create({"env": {"name": "hidden_numbr"}, "policy": POLICY}), run / "config.yaml")
    with pytest.raises(SavedRunError, match="unknown environment 'hidden_numbr'"):
        find_saved_run(run)


# --- the command line -------------------------------------------------------------------------------


def test_cli_plays_held_out_seeds_and_prints_the_figures(tmp_path, capsys):
    run = save_tiny_run(tmp_path / "run", seed=3, eval_episodes=6)
    out = tmp_path / "result.json"
    assert (
        cli.main([str(run), "--episodes", "5", "--transcripts", "2", "--json", str(out), "--no-progress"])
        == 0
    )
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    seeds = result["env_seeds"]
    assert len(seeds) == 5 and all(s in EVAL_SEEDS for s in seeds)
    assert not set(seeds) & set(training_eval_seeds("hidden_number", ENV["kwargs"], 3, 6))
    for label, key, digits in [
        ("success rate", "success_rate", 3),
        ("mean return", "episodic_return", 3),
        ("mean turns", "episode_length", 2),
        ("invalid action rate", "invalid_action_rate", 3),
    ]:
        assert f"{label.ljust(22)}{result['evaluate/' + key]:.{digits}f}" in printed
    assert printed.count("--- transcript") == 2
    assert "greedy" in printed and "hidden_number (n=5, max_turns=3)" in printed


def test_cli_refuses_a_folder_that_is_not_a_run_in_one_line(tmp_path, capsys):
    assert cli.main([str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith(f"experiments.evaluate: {tmp_path} is not a run folder")


def test_env_plays_the_policy_in_another_env_than_the_runs(tmp_path, capsys):
    # The run trained on n=5 in 3 turns; --env plays it in 2 turns: every episode ends by turn 2.
    run = save_tiny_run(tmp_path / "run")
    out = tmp_path / "result.json"
    argv = [str(run), "--env", "hidden_number", "--env-kwargs", '{"n": 5, "max_turns": 2}', "--episodes", "6",
            "--transcripts", "0", "--json", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    result = json.loads(out.read_text())
    assert (result["env"], result["env_kwargs"]) == ("hidden_number", {"n": 5, "max_turns": 2})
    assert 1 <= result["evaluate/episode_length"] <= 2
    assert "hidden_number (n=5, max_turns=2)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--env", "no_such_env"], "--env no_such_env"),
    (["--env", "hidden_number", "--env-kwargs", '{"size": 3}'], "--env hidden_number --env-kwargs {'size': 3}"),
    (["--env-kwargs", '{"n": 5}'], "--env-kwargs needs --env"),
])
def test_a_bad_env_override_is_refused_in_one_line_naming_the_option(tmp_path, capsys, argv, message):
    run = save_tiny_run(tmp_path / "run")
    capsys.readouterr()  # saving the model writes a progress bar
    assert cli.main([str(run), *argv, "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert message in captured.err


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    for option in (
        "--episodes",
        "--seed",
        "--transcripts",
        "--sample",
        "--config",
        "--device",
        "--env",
        "--env-kwargs",
        "--json",
        "--no-progress",
        "held-out",
    ):
        assert option in text


@pytest.mark.slow
def test_evaluate_a_trained_run_on_tasks_training_never_saw(tmp_path):
    # frozen_lake draws a map per seed: the evaluated maps must be held-out tasks on held-out seeds,
    # none of them a seed the run trained on.
    from envs.splits import task_split
    from envs.store import TrajectoryStore

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = tmp_path / "run"
    trained = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.train",
            "env=frozen_lake",
            "algo=grpo",
            "trainer.iterations=1",
            "trainer.groups_per_iteration=2",
            "trainer.group_size=2",
            "trainer.eval_episodes=4",
            "trainer.warm_start.enabled=false",
            "trainer.progress=false",
            "policy.hidden_size=32",
            "policy.num_layers=1",
            "policy.num_heads=2",
            "policy.intermediate_size=64",
            f"hydra.run.dir={run}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    out = tmp_path / "result.json"
    evaluated = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.evaluate",
            str(run),
            "--episodes",
            "6",
            "--json",
            str(out),
            "--no-progress",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "success rate" in evaluated.stdout and evaluated.stdout.count("--- transcript") == 3
    seeds = json.loads(out.read_text())["env_seeds"]
    trained_on = {t.seed for t in TrajectoryStore(run / "trajectories").load()}
    assert len(seeds) == 6 and trained_on and not set(seeds) & trained_on
    lake_kwargs = dict(OmegaConf.load(run / "config.yaml").env.kwargs)
    for seed in seeds:
        lake = make("frozen_lake", **lake_kwargs)
        lake.reset(seed)
        assert seed in EVAL_SEEDS and task_split(lake) == "eval"
