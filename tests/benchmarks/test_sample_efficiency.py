"""The headline benchmark: every method composes into a valid run config, and a sweep started again
keeps finished runs, resumes stopped ones from their checkpoints and starts the rest afresh."""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from benchmarks import sample_efficiency
from benchmarks.controls import CONTROLS, epochs_and_minibatch
from benchmarks.sample_efficiency import (
    ALL_METHODS,
    ENVS,
    METHODS,
    REFERENCE,
    REPORT_IGNORE,
    build_parser,
    compose_run,
    job_order,
    method_overrides,
    run_overrides,
)
from envs.registry import unavailable
from experiments.config import register_configs, validate
from experiments.reporting.runs import configuration_labels
from tests.benchmarks.benchmark_runs import write_benchmark_run

CONF = Path(__file__).resolve().parents[2] / "experiments" / "conf"
# Presets named after what they change in an env rather than after the env.
PRESET_ENV = {"hidden_number_10": "hidden_number", "lookup": "gym_text"}


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("env", ENVS)
def test_every_method_is_a_valid_run(env, method):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        run = validate(compose("train", overrides=[f"experiment={env}", *METHODS[method]]))
    assert run.env.name == PRESET_ENV.get(env, env)
    if method.startswith("mb_"):
        ratio = float(method.split("_r", 1)[1].split("_")[0])
        assert run.imagination.ratio == ratio and run.imagination.enabled
        # Only the _experts method fits the world model on the warm start's expert episodes.
        assert run.imagination.fit_on_warm_start == method.endswith("_experts")
    else:
        assert not run.imagination.enabled


def test_the_lm_method_imagines_as_the_latent_one_with_the_lm_model():
    latent = compose_run(["experiment=learning_check", *METHODS["mb_grpo_r0.9"]])
    lm = compose_run(["experiment=learning_check", *METHODS["mb_grpo_r0.9_lm"]])
    assert latent.world_model.name != "lm" and lm.world_model.name == "lm"
    assert lm.imagination == latent.imagination  # gate, refits, batches, ratio, real steps only
    assert lm.world_model.num_members == latent.world_model.num_members == 3
    assert lm.world_model.lm == compose_run(["experiment=learning_check", "world_model=lm"]).world_model.lm
    # The window holds the whole episode (3 turns), so the LM model sees all a latent history would.
    assert lm.world_model.lm.history_turns >= lm.env.kwargs["max_turns"]


def test_report_labels_of_the_two_world_models_differ_only_in_the_model():
    def labelled(method):
        return dict(o.split("=", 1) for o in METHODS[method] if o.split("=", 1)[0] not in REPORT_IGNORE)

    latent, lm = labelled("mb_grpo_r0.9"), labelled("mb_grpo_r0.9_lm")
    assert lm == {**latent, "world_model": "lm"}
    assert configuration_labels([latent, lm]) == ["world_model=small", "world_model=lm"]


def by_hand(run) -> tuple[float, float]:
    """Real groups per update and optimizer steps per real step, from the config's numbers: G (1 - r)
    real groups; epochs * G * L / minibatch optimizer steps per update of G * group_size * L rows over
    G (1 - r) * group_size * L real steps (L turns per episode)."""
    G, r = run.trainer.groups_per_iteration, run.imagination.ratio
    real = G * (1 - r)
    L, size = 2.5, run.trainer.group_size  # any episode length: it cancels
    steps = run.algo.ppo.epochs * G * size * L / run.algo.ppo.minibatch_size
    return real, steps / (real * size * L)


@pytest.mark.parametrize("env", [*ENVS, "learning_check"])
def test_the_controls_match_what_they_claim(env):
    reference = compose_run([f"experiment={env}", *METHODS[REFERENCE]])
    real, rate = by_hand(reference)
    controls = {c: compose_run([f"experiment={env}", *method_overrides(env, c)]) for c in CONTROLS}
    for name, run in controls.items():
        assert not run.imagination.enabled and run.algo.name == "grpo", name
        assert run.trainer.group_size == reference.trainer.group_size, name
    small, matched, reuse = (by_hand(controls[c]) for c in CONTROLS)
    # The model-based run's real groups per update, to the whole group (1.6 -> 2 on learning_check).
    assert controls["grpo_small_batch"].trainer.groups_per_iteration == round(real)
    assert abs(small[0] - real) <= 0.5 and matched[0] == small[0]
    assert controls["grpo_small_batch"].algo.ppo == reference.algo.ppo  # nothing else changed
    # Its optimizer steps per real step, exactly; grpo_reuse on the reference's full batch.
    assert matched[1] == pytest.approx(rate, rel=1e-12) and reuse[1] == pytest.approx(rate, rel=1e-12)
    assert controls["grpo_reuse"].trainer.groups_per_iteration == reference.trainer.groups_per_iteration
    assert controls["grpo_reuse"].algo.ppo.epochs > reference.algo.ppo.epochs


def test_learning_check_controls_by_hand():
    # 16 groups at ratio 0.9: 1.6 real groups; 4 epochs of 64-row minibatches: 4 * 16 / (64 * 1.6) = 0.625
    # optimizer steps per real step = 5 epochs of 8-row minibatches at 2 groups, or 40 epochs at 16 groups.
    overrides = {c: method_overrides("learning_check", c) for c in CONTROLS}
    assert "trainer.groups_per_iteration=2" in overrides["grpo_small_batch"]
    assert {"algo.ppo.epochs=5", "algo.ppo.minibatch_size=8"} <= set(overrides["grpo_matched_updates"])
    assert "algo.ppo.epochs=40" in overrides["grpo_reuse"]
    assert epochs_and_minibatch(Fraction(1, 4), 4) == (4, 16) and epochs_and_minibatch(Fraction(5, 8), 4) == (5, 8)


def test_defaults_are_known_methods_with_the_controls_and_their_reference():
    args = build_parser().parse_args([])
    assert set(args.methods) <= set(ALL_METHODS) and args.seeds == [0, 1, 2]
    assert set(CONTROLS) | {REFERENCE} <= set(args.methods)


def test_run_overrides_parse_with_the_run_folder_in_them(tmp_path):
    """The run folder's name (``method=grpo,seed=0``) must reach Hydra as one value."""
    args = build_parser().parse_args(["trainer.eval_episodes=8"])
    run_dir = tmp_path / "hidden_number" / "method=mb_grpo_r0.75,seed=1"
    parsed = OverridesParser.create().parse_overrides(run_overrides("hidden_number", "mb_grpo_r0.75", 1, args, run_dir))
    values = {override.key_or_group: override.value() for override in parsed}
    assert values["hydra.run.dir"] == str(run_dir)
    assert values["trainer.warm_start.cache_dir"] == str(args.out / "warm_starts")  # one per sweep, all envs
    assert values["seed"] == 1 and values["trainer.eval_episodes"] == 8


class RecordedCalls:
    """Stands in for ``subprocess.call``: records each command and the run folder's files at that moment."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.commands: list[list[str]] = []
        self.files_at_start: list[list[str]] = []

    def __call__(self, command, **kwargs):
        self.commands.append(command)
        exists = self.run_dir.exists()
        self.files_at_start.append(sorted(p.name for p in self.run_dir.iterdir()) if exists else [])
        return 0


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    calls = RecordedCalls(run_dir_of(tmp_path))
    monkeypatch.setattr(sample_efficiency.subprocess, "call", calls)
    return calls


def run_dir_of(tmp_path: Path) -> Path:
    return tmp_path / "hidden_number" / "method=grpo,seed=0"


def test_a_run_stopped_after_a_checkpoint_resumes_from_it(tmp_path, recorded):
    args = build_parser().parse_args(["--out", str(tmp_path)])
    run_dir = run_dir_of(tmp_path)
    for name in ("iteration_00010", "iteration_00020", "iteration_00030.tmp"):  # the last one never published
        (run_dir / "checkpoints" / name).mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("{}\n")
    sample_efficiency.run_one("hidden_number", "grpo", 0, args)
    assert recorded.commands[0][-2:] == [f"resume='{run_dir}'", "trainer.progress=false"]
    assert "metrics.jsonl" in recorded.files_at_start[0]  # the resumed run rewinds it itself


def test_a_run_stopped_before_any_checkpoint_starts_over_in_an_empty_folder(tmp_path, recorded):
    args = build_parser().parse_args(["--out", str(tmp_path)])
    run_dir = run_dir_of(tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"iteration": 0}\n')
    sample_efficiency.run_one("hidden_number", "grpo", 0, args)
    command = recorded.commands[0]
    assert not any(part.startswith("resume=") for part in command) and "trainer.checkpoint_every=10" in command
    assert recorded.files_at_start[0] == []


def test_a_finished_run_is_kept_unless_rerun(tmp_path, recorded):
    run_dir = run_dir_of(tmp_path)
    (run_dir / "checkpoints" / "iteration_00010").mkdir(parents=True)
    (run_dir / "done").write_text("")
    sample_efficiency.run_one("hidden_number", "grpo", 0, build_parser().parse_args(["--out", str(tmp_path)]))
    assert recorded.commands == []
    sample_efficiency.run_one("hidden_number", "grpo", 0, build_parser().parse_args(["--out", str(tmp_path), "--rerun"]))
    assert not any(part.startswith("resume=") for part in recorded.commands[0]) and recorded.files_at_start[0] == []


def test_jobs_clone_each_warm_start_once_before_the_other_methods_load_it():
    jobs = job_order(["a", "b"], [0, 1], ["m", "n", "o"])
    assert sorted(jobs) == sorted((e, m, s) for e in "ab" for m in "mno" for s in (0, 1))  # each run once
    assert jobs[:4] == [("a", "m", 0), ("a", "m", 1), ("b", "m", 0), ("b", "m", 1)]
    assert jobs[4:6] == [("a", "n", 0), ("a", "o", 0)]  # then seed by seed, as before


def test_the_headline_takes_the_best_of_all_model_free_methods_and_controls(tmp_path):
    # Marks every 100 steps; each run's held crossing by hand: mb 200, grpo 600, the small-batch control 400.
    curves = {"mb_grpo_r0.9": [0.5, 0.6, 0.85, 0.9, 0.9, 0.9, 0.9, 0.9],
              "grpo": [0.5, 0.6, 0.7, 0.7, 0.9, 0.7, 0.85, 0.9, 0.9],  # the spike at 400 is not held
              "grpo_small_batch": [0.5, 0.6, 0.7, 0.7, 0.85, 0.9, 0.9, 0.9]}
    for method, values in curves.items():
        write_benchmark_run(tmp_path, method, values)
    line = sample_efficiency.headline(tmp_path, 0.8)
    assert line == ("headline: mb_grpo_r0.9 200 (too few seeds to bound) against grpo_small_batch 400 (too few seeds "
                    "to bound) real steps to 0.8: 2.0x fewer (too few seeds to bound: 1 paired seed)")


def test_the_headline_says_which_seeds_are_still_running(tmp_path):
    # Seed 1 of the reference has not held 0.8 yet and is still going: the line must not read as final.
    write_benchmark_run(tmp_path, "mb_grpo_r0.9", [0.5, 0.85, 0.9, 0.9], seed=0)
    write_benchmark_run(tmp_path, "mb_grpo_r0.9", [0.5, 0.6], seed=1, done=False)
    write_benchmark_run(tmp_path, "grpo", [0.5, 0.6, 0.85, 0.9, 0.9])
    line = sample_efficiency.headline(tmp_path, 0.8)
    assert line == ("headline: mb_grpo_r0.9 not reached (1/2) (1 still running) against grpo 200 "
                    "(too few seeds to bound) real steps to 0.8")


def test_the_headline_bounds_the_ratio_when_no_model_free_run_held_the_target(tmp_path):
    # Marks every 100. The reference holds from 200. grpo never holds within 1,000 (its last two marks, 900
    # and 1,000, could still start a crossing: bound 900); the small-batch control stops at 600 with 0.85
    # at its last mark (bound 500). The ratio is at least min(900, 500) / 200 = 2.5.
    curves = {"mb_grpo_r0.9": [0.5, 0.6, 0.85, 0.9, 0.9, 0.9],
              "grpo": [0.5, 0.6, 0.7, 0.7, 0.9, 0.7, 0.85, 0.7, 0.7, 0.7, 0.7],
              "grpo_small_batch": [0.5, 0.6, 0.7, 0.7, 0.7, 0.7, 0.85]}
    for method, values in curves.items():
        write_benchmark_run(tmp_path, method, values)
    line = sample_efficiency.headline(tmp_path, 0.8)
    assert line.startswith("headline: mb_grpo_r0.9 200 (too few seeds to bound) against ")
    assert ": at least 2.5x fewer (no model-free method or control held 0.8 on every seed" in line


def test_the_headline_gives_the_break_even_cost_of_a_real_step(tmp_path):
    # mb: held from 200 real steps, 500 s over its 500 steps (1 s per step); grpo: held from 600, 50 s over
    # 1,000 steps (0.05 s per step). By hand: (200 * 1 - 600 * 0.05) / (600 - 200) = 170 / 400 = 0.425 s.
    runs = {"mb_grpo_r0.9": ([0.5, 0.6, 0.85, 0.9, 0.9, 0.9], 500.0),
            "grpo": ([0.5, 0.6, 0.7, 0.7, 0.7, 0.7, 0.85, 0.9, 0.9, 0.9, 0.9], 50.0)}
    for method, (values, wall) in runs.items():
        write_benchmark_run(tmp_path, method, values, wall_s=wall)
    line = sample_efficiency.headline(tmp_path, 0.8)
    assert line.startswith("headline: mb_grpo_r0.9 200 (too few seeds to bound) against grpo 600 (too few seeds to "
                           "bound) real steps to 0.8: 3.0x fewer (too few seeds to bound: 1 paired seed)")
    assert "once a real step costs 0.42 s or more" in line or "once a real step costs 0.43 s or more" in line
    assert "(compute per real step 1.000 s against 0.050 s)" in line


@pytest.mark.parametrize("method", ["grpo", "gigpo", REFERENCE])
def test_textarena_runs_with_random_actions_and_keeps_its_word_caps(method):
    """The TextArena preset runs without an expert (random well-formed actions), and the model-based
    overrides leave its world-model and critic word caps, which the adapter cannot count by hand."""
    assert "textarena" in build_parser().parse_args(["--envs", "textarena"]).envs
    run = compose_run(["experiment=textarena", *method_overrides("textarena", method)])
    assert run.env.name == "textarena" and run.env.kwargs["game"] == "GuessTheNumber-v0"
    assert run.trainer.warm_start.enabled and run.trainer.warm_start.random_actions
    assert run.imagination.enabled == (method == REFERENCE)
    caps = (run.world_model.max_observation_words, run.world_model.max_action_words)
    assert caps == (160, 8) == (run.critic.latent.max_observation_words, run.critic.latent.max_action_words)


@pytest.mark.skipif(unavailable("textarena") is not None, reason="needs the textarena extra")
def test_textarena_word_caps_hold_the_games_observations():
    """The preset's caps hold the longest observation and action of random GuessTheNumber games."""
    from envs.registry import make
    from envs.tokenizer import split_words

    run = compose_run(["experiment=textarena"])
    env, rng = make("textarena", **run.env.kwargs), random.Random(0)
    longest_observation, longest_action = 0, 0
    for seed in range(8):
        texts = [env.reset(seed)]
        done = False
        while not done:
            action = env.random_action(rng)
            result = env.step(action)
            texts.append(result.observation)
            longest_action, done = max(longest_action, len(split_words(action))), result.done
        longest_observation = max(longest_observation, *(len(split_words(text)) for text in texts))
    assert longest_observation <= run.world_model.max_observation_words
    assert longest_action <= run.world_model.max_action_words


@pytest.mark.slow
def test_the_command_reports_a_finished_sweep(tmp_path):
    """``python -m`` runs the module top to bottom: the report step after the runs needs the functions
    defined below ``main`` (a guard placed above them stopped every sweep with a NameError)."""
    import json
    import subprocess
    import sys

    folder = tmp_path / "learning_check" / "method=grpo,seed=0"  # a finished run: kept, not retrained
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("- seed=0\n- algo=grpo\n")
    (folder / "config.yaml").write_text("trainer:\n  eval_every_steps: 100\n")
    (folder / "metrics.jsonl").write_text("".join(
        json.dumps({"iteration": i, "charts/real_env_steps": 100 * i, "eval/success_rate": v}) + "\n"
        for i, v in enumerate([0.5, 0.9, 0.9, 0.9])))
    (folder / "done").write_text("")
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "benchmarks.sample_efficiency", "--envs", "learning_check",
                           "--methods", "grpo", "--seeds", "0", "--out", str(tmp_path)],
                          cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "kept learning_check/grpo/seed 0" in done.stdout and "| grpo " in done.stdout
    assert "headline: needs a model-based method and a model-free one" in done.stdout
    assert (tmp_path / "learning_check" / "sample_efficiency.png").exists()


def test_the_wall_clock_verdict_names_the_never_and_the_always_cases():
    from experiments.reporting import SummaryRow

    def row(steps: float, seconds: float) -> SummaryRow:
        return SummaryRow(label="x", env=None, seeds=1, failed=0, running=0, steps=[steps], steps_mean=steps,
                          steps_std=None, steps_ci=None, final_mean=None, final_std=None, wall_mean_s=None,
                          step_seconds_mean=seconds)

    assert sample_efficiency.wall_clock_text(row(1400, 0.5), row(1100, 0.03)).startswith("never first in wall-clock")
    assert sample_efficiency.wall_clock_text(row(500, 0.01), row(1100, 0.03)).startswith("first in wall-clock too, whatever")
    assert "costs 0.42 s or more" in sample_efficiency.wall_clock_text(row(200, 1.0), row(600, 0.05)) or \
        "costs 0.43 s or more" in sample_efficiency.wall_clock_text(row(200, 1.0), row(600, 0.05))
