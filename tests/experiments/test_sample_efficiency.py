"""The headline benchmark: every method composes into a valid run config, and a sweep started again
keeps finished runs, resumes stopped ones from their checkpoints and starts the rest afresh."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from experiments.benchmarks import sample_efficiency
from experiments.benchmarks.sample_efficiency import ENVS, METHODS, build_parser, job_order, run_overrides
from experiments.config import register_configs, validate

CONF = Path(__file__).resolve().parents[2] / "experiments" / "conf"


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("env", ENVS)
def test_every_method_is_a_valid_run(env, method):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        run = validate(compose("train", overrides=[f"experiment={env}", *METHODS[method]]))
    assert run.env.name == env
    if method.startswith("mb_"):
        ratio = float(method.rsplit("_r", 1)[1])
        assert run.imagination.ratio == ratio and run.imagination.enabled
    else:
        assert not run.imagination.enabled


def test_defaults_are_known_methods():
    args = build_parser().parse_args([])
    assert set(args.methods) <= set(METHODS) and args.seeds == [0, 1, 2]


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
