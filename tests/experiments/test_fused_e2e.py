"""``algo=fused`` end to end: a subprocess run of ``python -m experiments.train`` with a tiny budget on
the learning-check task, with the latent critic and with the token critic and EVPO's switch."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tests.experiments.test_train_e2e import TINY, assert_ok, finish, finite, read_records, start_train

pytestmark = pytest.mark.slow

LEARNING_CHECK_TINY = ["experiment=learning_check", *TINY[1:], "trainer.eval_every=2"]


def test_fused_runs_end_to_end_with_both_critics(tmp_path):
    runs = {
        "latent": ["critic=latent"],
        "token_evpo": ["critic=token", "algo.fused.weighting=evpo", "algo.fused.group=gigpo"],
    }
    procs = {
        name: start_train(*LEARNING_CHECK_TINY, "algo=fused", *extra, f"hydra.run.dir={tmp_path / name}")
        for name, extra in runs.items()
    }
    for name, proc in procs.items():  # side by side: most of each run is importing torch
        assert_ok(finish(proc))
        run_dir = tmp_path / name
        assert (run_dir / "done").is_file() and not (run_dir / "failed").exists()
        cfg = OmegaConf.load(run_dir / "config.yaml")
        assert cfg.algo.name == "fused" and cfg.env.kwargs.n == 5 and cfg.trainer.iterations == 2
        records = read_records(run_dir)
        assert [r["iteration"] for r in records] == [0, 1, 2]
        for record in records[1:]:  # the critic is trained on the turn returns, as for ppo_turn
            for key in (
                "losses/policy_loss",
                "losses/value_loss",
                "losses/explained_variance",
                "losses/grad_norm",
            ):
                assert finite(record.get(key)), (name, key, record)
        assert 0.0 <= records[-1]["eval/success_rate"] <= 1.0
        assert (run_dir / "models" / "critic").is_dir() and (run_dir / "models" / "policy").is_dir()
    assert OmegaConf.load(tmp_path / "token_evpo" / "config.yaml").algo.fused.group == "gigpo"
