"""Crash and resume end to end: a run killed with SIGKILL and resumed ends exactly as an uninterrupted one.

Two runs are started in subprocesses and killed; meanwhile the uninterrupted reference runs (same
command, same seed) train inside the test process. Each killed run is then resumed with
``resume=RUN_DIR`` and must end with the reference's metrics (wall and CPU times aside), its weights bit for
bit, and its trajectory store trajectory for trajectory: nothing the killed attempt stored after
its checkpoint is kept twice, nothing before it is lost. The two cases kill:

- model-free GRPO, in the middle of writing the iteration-4 checkpoint (a testing hook SIGKILLs the
  process after the files are written, before they are published), so it resumes from iteration 2,
  through the command line;
- model-based PPO (latent critic, world model, imagined groups), from outside, as soon as iteration 3
  is logged, wherever the process then is; it is resumed inside the test process.

A damaged checkpoint is refused by the command line with one line, a non-zero exit and no
traceback; a resume whose command line changes the config is refused naming the key. Neither
changes anything in the run folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from envs import TrajectoryStore
from experiments.checkpoint import KILL_BEFORE_PUBLISH_ENV
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import WEIGHTS
from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import TINY, assert_ok, finish, read_records, start_train

pytestmark = pytest.mark.slow

ITERATIONS = 5
COMMON = [*TINY, f"trainer.iterations={ITERATIONS}", "trainer.checkpoint_every=2", "trainer.eval_every=3"]
CASES = {
    "model_free": [*COMMON, "algo=grpo"],
    "model_based": [
        *COMMON,
        "algo=ppo_turn",
        "critic=latent",
        "trainer.max_turns=4",
        *SMALL_WORLD_MODEL,
        "imagination=dyna",
        "imagination.ratio=0.5",
        "imagination.gate_threshold=0",
    ],
}
TIMING = ("time/", "charts/elapsed_s")


def comparable(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in read_records(run_dir)]


def kill_when_logged(proc, run_dir: Path, iteration: int, timeout_s: float = 600) -> None:
    """SIGKILL ``proc`` as soon as ``metrics.jsonl`` holds ``iteration`` (line ``iteration + 1``)."""
    deadline = time.monotonic() + timeout_s
    metrics = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_bytes().count(b"\n") > iteration:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()


def folder_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_same_run(resumed: Path, reference: Path) -> None:
    records = comparable(resumed)
    assert [r["iteration"] for r in records] == list(range(ITERATIONS + 1))
    assert records == comparable(reference)
    for name in WEIGHTS:
        if (reference / name).exists():
            a, b = load_file(str(resumed / name)), load_file(str(reference / name))
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    stored, expected = (TrajectoryStore(d / "trajectories").load() for d in (resumed, reference))
    assert [t.trajectory_id for t in stored] == [t.trajectory_id for t in expected]  # none lost or duplicated
    assert stored == expected
    summaries = [json.loads((d / "summary.json").read_text()) for d in (resumed, reference)]
    clocks = ("wall_s", "cpu_seconds")
    assert [{k: v for k, v in s.items() if k not in clocks} for s in summaries][0] == {
        k: v for k, v in summaries[1].items() if k not in clocks
    }
    assert summaries[0]["ledger"]["warm_start_check_steps"] > 0  # kept from the killed part's checkpoint
    assert summaries[0]["cpu_seconds"] > 0  # the killed part's CPU carried on, not unknown
    assert sorted(p.name for p in (resumed / "checkpoints").iterdir()) == [
        "iteration_00002",
        "iteration_00004",
    ]


def start_killed_runs(dirs: dict[str, tuple[Path, Path]]) -> tuple[threading.Thread, list]:
    """Start both killed runs, in ``CASES`` order; a thread (to be joined) kills the model-based one
    and waits for the model-free one to kill itself."""
    os.environ[KILL_BEFORE_PUBLISH_ENV] = "4"  # inherited by the model-free killed run only
    try:
        killed_mf = start_train(*CASES["model_free"], f"hydra.run.dir={dirs['model_free'][1]}")
    finally:
        del os.environ[KILL_BEFORE_PUBLISH_ENV]
    killed_mb = start_train(*CASES["model_based"], f"hydra.run.dir={dirs['model_based'][1]}")

    def kill_and_wait() -> None:
        kill_when_logged(killed_mb, dirs["model_based"][1], 3)
        killed_mf.wait(timeout=600)

    killer = threading.Thread(target=kill_and_wait)
    killer.start()
    return killer, [killed_mf, killed_mb]


def test_killed_runs_resume_exactly(tmp_path):
    # One test, not two sharing a fixture: under pytest-xdist a module fixture would run once per worker.
    dirs = {name: (tmp_path / f"{name}_reference", tmp_path / f"{name}_killed") for name in CASES}
    killer, killed_procs = start_killed_runs(dirs)
    for name in CASES:  # the uninterrupted references, in this process meanwhile
        train_in_process(CASES[name], dirs[name][0])
    killer.join()
    for proc, name in zip(killed_procs, CASES, strict=True):
        assert proc.returncode == -signal.SIGKILL, f"the {name} run was not killed (exit {proc.returncode})"

    # Model-free, killed while writing the iteration-4 checkpoint: resumed through the command line,
    # beside a copy whose checkpoint is damaged, which is refused before anything is touched.
    reference, killed = dirs["model_free"]
    checkpoints = killed / "checkpoints"
    published = sorted(p.name for p in checkpoints.iterdir() if not p.name.startswith(".tmp-"))
    assert published == ["iteration_00002"]
    assert any(p.name.startswith(".tmp-") for p in checkpoints.iterdir())  # the unpublished iteration-4 write
    assert len(read_records(killed)) == 5  # iterations 0 .. 4 were logged before the kill
    damaged = tmp_path / "damaged"
    shutil.copytree(killed, damaged)
    tensors = damaged / "checkpoints" / "iteration_00002" / "state.safetensors"
    tensors.write_bytes(tensors.read_bytes()[: tensors.stat().st_size // 2])
    damaged_before = folder_digest(damaged)
    procs = [start_train(f"resume={damaged}"), start_train(f"resume={killed}")]

    # Model-based, killed from outside once iteration 3 was logged: resumed in this process meanwhile.
    # A command line that changes a key is refused, naming it, and nothing is touched; the same
    # command with resume= added is accepted.
    mb_reference, mb_killed = dirs["model_based"]
    before = folder_digest(mb_killed)
    with pytest.raises(SystemExit, match=r"trainer.group_size: saved 4, now 3"):
        train_in_process([*CASES["model_based"], "trainer.group_size=3", f"resume={mb_killed}"], mb_killed)
    assert folder_digest(mb_killed) == before
    train_in_process([*CASES["model_based"], f"resume={mb_killed}"], mb_killed)
    assert_same_run(mb_killed, mb_reference)
    assert sum(r["imagination/imagined_groups"] for r in read_records(mb_killed)[1:]) > 0  # it did imagine

    refused, resumed = (finish(proc) for proc in procs)
    assert_ok(resumed)
    assert_same_run(killed, reference)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "iteration_00002 is damaged" in refused.stderr and "state.safetensors" in refused.stderr, (
        refused.stderr
    )
    assert folder_digest(damaged) == damaged_before
