"""Extending a finished run's budget end to end: it ends exactly as one launched with the larger budget.

A run stops at a small real-step budget (``trainer.max_env_steps``) and leaves its ``done`` marker;
``resume=RUN_DIR trainer.max_env_steps=LARGER`` goes on from the newest checkpoint the small budget
did not shape, and must end with the metrics (wall and CPU times aside), weights, trajectory store and
summary of an uninterrupted run launched with the larger budget. The model-free run is extended through
the command line (its ``.hydra/`` record takes the new budget, the original overrides kept beside it);
the model-based one (``imagination=dyna``) in the test process. A smaller budget is refused first, in one
line, with nothing in the folder changed. A run of 4 iterations (whose last one evaluated off the
schedule) extended to 6 ends as a 6-iteration run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from envs import TrajectoryStore
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import WEIGHTS
from tests.experiments.test_resume_e2e import CASES, comparable, folder_digest
from tests.experiments.test_train_e2e import assert_ok, finish, read_records, start_train

pytestmark = pytest.mark.slow

SMALL, LARGE = 70, 130  # real steps; an iteration plays 2 groups of 4 episodes of at most 6 (or 4) turns
ITERATIONS = ["trainer.iterations=6", "trainer.checkpoint_every=1"]  # more than either budget needs


def assert_same_run(extended: Path, reference: Path) -> None:
    assert comparable(extended) == comparable(reference)
    for name in WEIGHTS:
        if (reference / name).exists():
            a, b = load_file(str(extended / name)), load_file(str(reference / name))
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    stored, expected = (TrajectoryStore(d / "trajectories").load() for d in (extended, reference))
    assert stored == expected
    summaries = [json.loads((d / "summary.json").read_text()) for d in (extended, reference)]
    clocks = ("wall_s", "cpu_seconds")
    assert [{k: v for k, v in s.items() if k not in clocks} for s in summaries][0] == {
        k: v for k, v in summaries[1].items() if k not in clocks
    }


def test_a_run_stopped_by_its_budget_extends_exactly(tmp_path):
    model_free = [*CASES["model_free"], *ITERATIONS]
    short, reference = tmp_path / "short", tmp_path / "reference"
    proc = start_train(*model_free, f"trainer.max_env_steps={SMALL}", f"hydra.run.dir={short}")
    train_in_process([*model_free, f"trainer.max_env_steps={LARGE}"], reference)  # meanwhile
    assert_ok(finish(proc))
    assert (short / "done").exists() and "budget_cut" in json.loads((short / "summary.json").read_text())
    stopped_at = read_records(short)[-1]["iteration"]
    assert read_records(reference)[-1]["iteration"] > stopped_at  # the larger budget went further

    before = folder_digest(short)
    refused = finish(start_train(f"resume={short}", f"trainer.max_env_steps={SMALL - 1}"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert f"trainer.max_env_steps can not be lowered on resume: saved {SMALL}, now {SMALL - 1}" in refused.stderr
    assert folder_digest(short) == before

    assert_ok(finish(start_train(f"resume={short}", f"trainer.max_env_steps={LARGE}")))
    assert_same_run(short, reference)
    assert (short / "done").exists()
    for saved in (short / "config.yaml", short / ".hydra" / "config.yaml"):
        assert yaml.safe_load(saved.read_text())["trainer"]["max_env_steps"] == LARGE, saved
    overrides = yaml.safe_load((short / ".hydra" / "overrides.yaml").read_text())
    assert f"trainer.max_env_steps={LARGE}" in overrides and f"trainer.max_env_steps={SMALL}" not in overrides
    original = yaml.safe_load((short / ".hydra" / "overrides.original.yaml").read_text())
    assert f"trainer.max_env_steps={SMALL}" in original


def test_a_model_based_run_extends_exactly(tmp_path):
    model_based = [*CASES["model_based"], *ITERATIONS]
    short, reference = tmp_path / "short", tmp_path / "reference"
    train_in_process([*model_based, f"trainer.max_env_steps={SMALL}"], short)
    train_in_process([*model_based, f"trainer.max_env_steps={LARGE}"], reference)
    assert read_records(reference)[-1]["iteration"] > read_records(short)[-1]["iteration"]
    # several iterations could reach the small budget: the newest unshaped checkpoint was kept beside the newest two
    assert len(list((short / "checkpoints").iterdir())) == 3
    train_in_process([*model_based, f"trainer.max_env_steps={LARGE}", f"resume={short}"], short)
    assert_same_run(short, reference)
    assert sum(r["imagination/imagined_groups"] for r in read_records(short)[1:]) > 0  # it did imagine


def test_more_iterations_extend_exactly(tmp_path):
    # eval_every=3: the 4-iteration run's last iteration evaluated off the schedule, a 6-iteration run's did not
    model_free = [*CASES["model_free"], "trainer.checkpoint_every=1"]
    short, reference = tmp_path / "short", tmp_path / "reference"
    train_in_process([*model_free, "trainer.iterations=4"], short)
    assert "eval/success_rate" in read_records(short)[4]
    train_in_process([*model_free, "trainer.iterations=6"], reference)
    assert "eval/success_rate" not in read_records(reference)[4]
    train_in_process(["trainer.iterations=6", f"resume={short}"], short)  # only the budget on the command line
    assert_same_run(short, reference)
