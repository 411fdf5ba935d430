"""``imagination.open_at_start``: a run started from a saved world model imagines from its first
iteration. A tiny ``python -m experiments.fit_world_model``, then two ``experiments.train`` runs from
it side by side, with the key on and off (all in subprocesses)."""

from __future__ import annotations

import json

import pytest

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


def test_open_at_start_imagines_from_the_first_iteration_of_a_run_from_a_saved_model(tmp_path):
    fitted = tmp_path / "fit"
    proc = run_fit(fitted, *TINY_FIT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    on, off = tmp_path / "on", tmp_path / "off"
    procs = [start_train(*FROM_SAVED, f"world_model.init={fitted}", f"hydra.run.dir={run_dir}", *extra)
             for run_dir, extra in ((on, ["imagination.open_at_start=true"]), (off, []))]
    for proc in procs:
        assert_ok(finish(proc))
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
