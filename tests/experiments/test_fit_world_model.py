"""End-to-end runs of ``python -m experiments.fit_world_model`` in a subprocess, with tiny budgets."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from envs import TrajectoryStore
from world_model import WorldModel

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "env=hidden_number",
    "data.episodes=16",
    "fit.steps=6",
    "fit.batch_size=4",
    "fit.progress=false",
    "world_model.latent_size=32",
    "world_model.num_members=2",
    "world_model.head_hidden=16",
    "world_model.encoder.embed_size=16",
    "world_model.encoder.feature_size=32",
    "world_model.encoder.conv_layers=1",
    "world_model.decoder.model_size=16",
    "world_model.decoder.num_layers=1",
    "world_model.decoder.num_heads=2",
    "world_model.decoder.latent_slots=4",
]


def run_fit(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "-m", "experiments.fit_world_model", *overrides, f"hydra.run.dir={run_dir}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_tiny_fit_writes_model_summary_and_done(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_fit(run_dir, *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (run_dir / "done").is_file() and not (run_dir / "failed").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episodes"] == {"train": 14, "val": 2}
    assert summary["steps"] == 6
    for key in ("val_before", "val_after", "train_after"):
        assert all(math.isfinite(v) for v in summary[key].values()), key
    assert summary["val_after"]["loss"] < summary["val_before"]["loss"]
    model = WorldModel.from_pretrained(run_dir / "models" / "world_model")
    assert model.config.num_members == 2
    train = TrajectoryStore(run_dir / "trajectories" / "train").load()
    val = TrajectoryStore(run_dir / "trajectories" / "val").load()
    assert len(train) == 14 and len(val) == 2
    assert not {t.seed for t in train} & {t.seed for t in val}
    assert all(t.seed < 2**31 for t in train + val)  # training-split seeds only
    assert len({t.trajectory_id for t in train + val}) == 16
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert list((run_dir / "tensorboard" / "version_0").glob("events.out.tfevents.*"))
    # What it was fitted on: the 14 training episodes, the first 7 (ids 0-6) by the scripted expert.
    fitted_on = json.loads((run_dir / "models" / "world_model" / "fitted_on.json").read_text())
    expert = sum(t.num_turns for t in train if t.trajectory_id < 7)
    assert (fitted_on["env"], fitted_on["env_options"]["observation"]) == ("hidden_number", "transcript")
    assert (fitted_on["real_steps"], fitted_on["expert_steps"]) == (sum(t.num_turns for t in train) - expert, expert)

    # A second fit starts from the first one's weights, and its record adds its own steps to the first's.
    again = tmp_path / "again"
    proc = run_fit(again, *TINY, "data.seed=5", f"world_model.init={run_dir}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((again / "summary.json").read_text())
    saved = load_file(run_dir / "models" / "world_model" / "model.safetensors")
    assert summary["imported"]["weights_sha256"] == tensors_sha256(saved)
    second = json.loads((again / "models" / "world_model" / "fitted_on.json").read_text())
    assert second["sources"][0] == fitted_on["sources"][0] and len(second["sources"]) == 2
    assert second["real_steps"] == fitted_on["real_steps"] + second["sources"][1]["real_steps"]


def tensors_sha256(tensors: dict) -> str:
    """sha256 over name, dtype, shape and bytes of each tensor, by sorted name (written apart from the
    code's ``weights_sha256``)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.flatten().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def test_typo_key_fails_at_start(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_fit(run_dir, "fit.stepz=3")
    assert proc.returncode != 0
    assert "fit.stepz" in proc.stderr
    assert not (run_dir / "done").exists()


def test_bad_value_fails_naming_the_key(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_fit(run_dir, "data.expert_fraction=1.5")
    assert proc.returncode != 0
    assert "data.expert_fraction" in proc.stderr
    assert (run_dir / "failed").is_file() and not (run_dir / "done").exists()
