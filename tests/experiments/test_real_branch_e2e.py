"""``algo=real_branch_gigpo`` end to end in a subprocess: learning_check, 3 iterations, every branch step counted."""

from __future__ import annotations

import json

import pytest

from tests.experiments.test_counterfactual_e2e import STEP_GROUP_RUN
from tests.experiments.test_train_e2e import assert_ok, read_records, run_train

pytestmark = pytest.mark.slow

RUN = ["algo=real_branch_gigpo", *STEP_GROUP_RUN]


def test_real_branch_gigpo_puts_every_oracle_step_on_the_real_step_axis(tmp_path):
    result = run_train(*RUN, f"hydra.run.dir={tmp_path}")
    assert_ok(result)
    records = read_records(tmp_path)[1:]
    assert len(records) == 3
    previous = 0
    for record in records:
        # One group per real step (a real row each); the x-axis moves by those steps plus the oracle's.
        steps = record["charts/real_env_steps"] - previous
        groups, branch, replay = (
            record[k] for k in ("counterfactual/groups", "oracle/branch_env_steps", "oracle/replay_env_steps")
        )
        assert steps == groups + branch + replay and record["oracle/env_steps"] == branch + replay
        assert 4 * groups <= branch <= 4 * 2 * groups  # 4 members of 1 .. h = 2 turns each
        assert 0 <= replay < groups  # each episode replayed once, to its last turn
        assert record["counterfactual/fallback_share"] == 0.0  # the real env is never distrusted
        previous = record["charts/real_env_steps"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["real_env_steps"] == previous
    assert not (tmp_path / "models" / "world_model").exists()  # the oracle builds no world model
