"""``run_job``'s verdicts in process: a single run re-raises, a sweep's job records the failure and
returns so the launcher goes on to the next job; Ctrl-C stops a sweep."""

from __future__ import annotations

import copy
import json

import pytest
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import open_dict

from experiments.markers import run_job
from tests.experiments.test_presets import compose_train


@pytest.fixture(autouse=True)
def restore_hydra_config():
    """HydraConfig is a process-wide singleton: leave it as the test found it."""
    saved = HydraConfig.instance().cfg
    yield
    HydraConfig.instance().cfg = saved


def set_hydra(tmp_path, mode: RunMode):
    cfg = copy.deepcopy(compose_train([], hydra=True))  # a copy: the composed config is cached
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
        cfg.hydra.mode = mode
    HydraConfig.instance().set_config(cfg)
    return compose_train([])  # the job's own config, without the hydra node


def boom(run, run_dir):
    raise RuntimeError("planted failure")


def test_a_single_run_records_the_failure_and_raises(tmp_path):
    cfg = set_hydra(tmp_path, RunMode.RUN)
    with pytest.raises(RuntimeError, match="planted failure"):
        run_job(cfg, lambda c: c, boom)
    assert "RuntimeError: planted failure" in (tmp_path / "failed").read_text()
    assert (tmp_path / "config.yaml").is_file() and not (tmp_path / "done").exists()


def test_a_sweep_job_records_the_failure_and_returns(tmp_path, capsys):
    cfg = set_hydra(tmp_path, RunMode.MULTIRUN)
    assert run_job(cfg, lambda c: c, boom) is None
    assert "RuntimeError: planted failure" in (tmp_path / "failed").read_text()
    assert f"traceback in {tmp_path / 'failed'}" in capsys.readouterr().err


def test_ctrl_c_stops_a_sweep(tmp_path):
    def interrupted(run, run_dir):
        raise KeyboardInterrupt

    cfg = set_hydra(tmp_path, RunMode.MULTIRUN)
    with pytest.raises(KeyboardInterrupt):
        run_job(cfg, lambda c: c, interrupted)
    assert (tmp_path / "failed").is_file()


def test_a_finished_job_leaves_its_summary(tmp_path):
    cfg = set_hydra(tmp_path, RunMode.MULTIRUN)
    assert run_job(cfg, lambda c: c, lambda run, run_dir: {"final_success": 0.5}) == {"final_success": 0.5}
    assert json.loads((tmp_path / "done").read_text()) == {"final_success": 0.5}
    assert not (tmp_path / "failed").exists()
