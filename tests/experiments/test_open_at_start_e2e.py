"""``imagination.open_at_start``: a run started from a saved world model imagines from its first
iteration. A tiny ``python -m experiments.fit_world_model``, then ``experiments.train`` runs from it
side by side, with the key on and off, and the run with it on killed while writing its iteration-2
checkpoint and resumed from iteration 1's (all in subprocesses)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from experiments.checkpoint import KILL_BEFORE_PUBLISH_ENV
from tests.experiments.test_determinism import WEIGHTS
from tests.experiments.test_fit_world_model import TINY as TINY_FIT
from tests.experiments.test_fit_world_model import run_fit
from tests.experiments.test_train_e2e import TINY, assert_ok, finish, read_records, start_train

pytestmark = pytest.mark.slow

WORLD_MODEL = [key for key in TINY_FIT if key.startswith("world_model.")]  # the saved model's sizes
# 2 groups at ratio 0.75: the real credit is 0.5 after iteration 1 (no real group, 2 imagined), then
# 1.0 after iteration 2 (one real group, one imagined); worked out by hand from the carry-over rule.
FROM_SAVED = [*TINY, *WORLD_MODEL, "algo=grpo", "imagination=dyna", "imagination.ratio=0.75",
              "imagination.gate_threshold=0", "imagination.fit_on_warm_start=false",
              "imagination.first_fit_steps=3", "imagination.fit_steps=2",
              "imagination.fit_every=3"]  # a refit on the clock would be after iteration 3: a fit before is a first fit
CLOCKS = ("time/", "charts/elapsed_s", "wall_s", "cpu_seconds")


def without_clocks(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.startswith(CLOCKS)}


def assert_same_run(resumed: Path, reference: Path) -> None:
    """The same metrics, final weights and summary, clocks aside."""
    assert [without_clocks(r) for r in read_records(resumed)] == [without_clocks(r) for r in read_records(reference)]
    for name in WEIGHTS:  # the policy's and the world model's (no critic with grpo)
        if not (reference / name).exists():
            continue
        a, b = load_file(str(resumed / name)), load_file(str(reference / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    summaries = [without_clocks(json.loads((d / "summary.json").read_text())) for d in (resumed, reference)]
    assert summaries[0] == summaries[1]


def test_open_at_start_imagines_from_the_first_iteration_of_a_run_from_a_saved_model(tmp_path):
    fitted = tmp_path / "fit"
    proc = run_fit(fitted, *TINY_FIT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    on, off, killed = tmp_path / "on", tmp_path / "off", tmp_path / "killed"
    from_saved = [*FROM_SAVED, f"world_model.init={fitted}"]
    os.environ[KILL_BEFORE_PUBLISH_ENV] = "2"  # inherited by the killed run only
    try:
        killed_proc = start_train(*from_saved, "imagination.open_at_start=true", "trainer.checkpoint_every=1",
                                  f"hydra.run.dir={killed}")
    finally:
        del os.environ[KILL_BEFORE_PUBLISH_ENV]
    procs = [start_train(*from_saved, f"hydra.run.dir={run_dir}", *extra)
             for run_dir, extra in ((on, ["imagination.open_at_start=true"]), (off, []))]
    for proc in procs:
        assert_ok(finish(proc))
    assert finish(killed_proc).returncode == -signal.SIGKILL
    first_on, second_on = read_records(on)[1:3]
    first_off = read_records(off)[1]
    # Off: the gate opens at the first score, read on iteration 1's real episodes: all of it is real.
    assert first_off["imagination/imagined_groups"] == 0 and first_off["charts/real_env_steps"] >= 8
    # On: iteration 1 imagines both groups from training tasks' start states, playing no real step;
    # the first fit waits for real data (iteration 2's one real group; the clock's next refit would be
    # after iteration 3), then branching is as usual.
    assert first_on["imagination/gate_open"] == 1.0
    assert first_on["imagination/imagined_groups"] == 2 and first_on["charts/imagined_env_steps"] >= 8
    assert first_on["charts/real_env_steps"] == 0 < first_off["charts/real_env_steps"]
    assert "wm/fit_trajectories" not in first_on
    assert second_on["imagination/imagined_groups"] == 1 and second_on["wm/fit_trajectories"] == 4
    assert second_on["charts/real_env_steps"] >= 4
    # The ledger means what it did: the world model's real steps are the real steps the run played.
    ledger = json.loads((on / "summary.json").read_text())["ledger"]
    assert ledger["world_model_real_steps"] == second_on["charts/real_env_steps"]
    # Resumed from iteration 1's checkpoint (gate open, real credit 0.5, no real episode, no fit yet), the
    # killed run ends exactly as the uninterrupted one.
    assert [p.name for p in (killed / "checkpoints").iterdir() if not p.name.startswith(".tmp-")] == [
        "iteration_00001"]
    assert_ok(finish(start_train(f"resume={killed}")))
    assert_same_run(killed, on)
