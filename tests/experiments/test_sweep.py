"""A Hydra sweep of ``experiments.train`` end to end: a failing job neither stops nor hides the others.

One subprocess runs two tiny jobs, ``env.kwargs.n=0`` first (it composes, then fails inside the job
when the env is built) and ``env.kwargs.n=5`` second (a real, tiny run). The sweep must still run
the second job, name both folders by their overrides, leave ``failed`` / ``done`` markers, end with
the report of the finished job and the list of failed jobs, and exit non-zero.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.experiments.test_train_e2e import TINY as E2E_TINY

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# The end-to-end tests' tiny run, on the sweep's own env kwargs and with GRPO.
TINY = [override for override in E2E_TINY if not override.startswith("env=")] + ["algo=grpo"]


def test_a_failing_job_does_not_stop_or_hide_the_others(tmp_path):
    sweep = tmp_path / "sweep"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("HYDRA_FULL_ERROR", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.train",
            "-m",
            *TINY,
            "env.kwargs.n=0,5",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stderr[-3000:]

    # Folders named by the overrides, sorted by key (trainer.progress left out); fifteen overrides are
    # too long for a file name, so the names stop after the pairs that fit and add the job number.
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert len(names) == 2, names
    for n, name in zip((0, 5), names, strict=True):
        assert name.startswith(f"algo=grpo,env.kwargs.n={n},policy.hidden_size=32,"), name
        assert name.endswith(f"...,job={0 if n == 0 else 1}") and "trainer.progress" not in name
    failed, done = (sweep / name for name in names)

    # The failing job: its resolved config, then the traceback naming the bad option; no done marker.
    assert OmegaConf.load(failed / "config.yaml").env.kwargs.n == 0
    traceback = (failed / "failed").read_text()
    assert "Traceback" in traceback and "n must be an integer >= 1, got 0" in traceback
    assert not (failed / "done").exists()

    # The job after it ran to the end: config, metrics, TensorBoard events, the done marker (its summary).
    assert OmegaConf.load(done / "config.yaml").env.kwargs.n == 5
    assert json.loads((done / "done").read_text())["iterations"] == 2 and not (done / "failed").exists()
    records = [json.loads(line) for line in (done / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [0, 1, 2]
    assert any(p.stat().st_size > 0 for p in (done / "tensorboard").glob("events.out.tfevents.*"))

    # The sweep ends with the report (the finished job's row), TensorBoard, and the failed job.
    out = result.stdout
    assert (sweep / "report.md").is_file() and (sweep / "report.png").stat().st_size > 0
    assert "env.kwargs.n=5" in (sweep / "report.md").read_text()
    assert f"plot: {sweep / 'report.png'}" in out
    assert f"TensorBoard: tensorboard --logdir {sweep}" in out
    tail = out[out.index("2 jobs: 1 done, 1 failed") :]
    assert f"FAILED {failed}" in tail and f"traceback: {failed / 'failed'}" in tail
    assert str(done) not in tail  # a finished job is not listed as failed


def test_sweep_job_names_leave_out_exactly_the_neutral_keys():
    """One list of keys that change no number: the sweep's job names, resumes and reports agree on it."""
    from experiments.neutral_keys import NEUTRAL_KEYS

    train_yaml = OmegaConf.load(Path(__file__).resolve().parents[2] / "experiments" / "conf" / "train.yaml")
    assert list(train_yaml.hydra.job.config.override_dirname.exclude_keys) == list(NEUTRAL_KEYS)
