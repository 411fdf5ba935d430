"""Peak resident memory and wall time of one GRPO iteration of ``policy=smollm2`` with LoRA, from outside.

The run is ``python -m experiments.train`` in a child process: hidden_number, no warm start, one
iteration, and the smallest evaluation the trainer allows (one held-out episode; it evaluates before the
first iteration and after the last). Its peak is the child's own high-water mark (``VmHWM``, what
``/usr/bin/time -v`` reports as its maximum resident set size), polled while it runs, so nothing of the
measuring process is counted.
The child is killed once its resident memory passes a limit: with the default minibatch of 64 rows and no
micro-batches, the update's activations (every layer's, for the backward pass, of 64 rows of a few hundred
tokens) fill tens of GB, which on a shared machine would take everyone's memory.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class ChildRun:
    """What the child run cost: its peak resident memory and its wall seconds; ``stopped`` when it passed
    the memory limit and was killed (its peak is then the limit's neighbourhood, not its true peak)."""

    returncode: int
    peak_rss_bytes: int
    wall_s: float
    output_tail: str
    stopped: bool = False


def train_overrides(groups: int, group_size: int, run_dir: str, policy: str = "policy=smollm2",
                    minibatch_size: int | None = None, micro_batch_size: int | None = None) -> list[str]:
    """The ``experiments.train`` overrides of one iteration of ``groups`` x ``group_size`` episodes (and
    ``algo.ppo.minibatch_size`` and ``algo.ppo.micro_batch_size`` when given; the defaults are 64 rows and
    no micro-batches)."""
    overrides = ["env=hidden_number", policy, "algo=grpo", "trainer.iterations=1", "trainer.warm_start.enabled=false",
                 f"trainer.groups_per_iteration={groups}", f"trainer.group_size={group_size}",
                 "trainer.eval_episodes=1", "trainer.progress=false", f"hydra.run.dir={run_dir}"]
    overrides += [] if minibatch_size is None else [f"algo.ppo.minibatch_size={minibatch_size}"]
    return overrides + ([] if micro_batch_size is None else [f"algo.ppo.micro_batch_size={micro_batch_size}"])


def maxrss_bytes(ru_maxrss: int) -> int:
    """``ru_maxrss`` in bytes: kilobytes on Linux, bytes on macOS."""
    return ru_maxrss if sys.platform == "darwin" else ru_maxrss * 1024


def current_rss_bytes(pid: int, field: str = "VmRSS") -> int | None:
    """The resident memory of process ``pid`` now (``VmHWM``: its peak) from Linux ``/proc``; None where it
    cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def run_child(args: list[str], *, limit_bytes: int | None = None, timeout_s: float | None = None) -> ChildRun:
    """``python args...`` in a child process with one thread; its peak RSS and wall time.

    The peak is the child's own ``VmHWM`` (Linux ``/proc``), polled every 0.1 s while it runs: a forked
    child's ``ru_maxrss`` starts at its parent's size (the parent's high-water mark survives the exec), so
    from a process that has loaded a model it would report that model, not the child. Without ``/proc``
    it falls back to ``RUSAGE_CHILDREN``. With ``limit_bytes``, the child is killed once its resident
    memory passes the limit, so a run that would fill a shared machine stops first."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        child = subprocess.Popen([sys.executable, *args], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        peak, stopped = watch(child, limit_bytes, timeout_s)
        wall = time.perf_counter() - start
        log.seek(0)
        tail = log.read()[-2000:]
    if peak is None:
        peak = maxrss_bytes(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return ChildRun(child.returncode, peak, wall, tail, stopped)


def watch(child: subprocess.Popen, limit_bytes: int | None,
          timeout_s: float | None) -> tuple[int | None, bool]:
    """Wait for ``child``: its polled peak RSS (None if unreadable) and whether it was killed for passing
    ``limit_bytes`` (it is killed at ``timeout_s`` too)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    peak = None
    while child.poll() is None:
        seen = current_rss_bytes(child.pid, field="VmHWM")
        peak = peak if seen is None else max(seen, peak or 0)
        over = limit_bytes is not None and seen is not None and seen > limit_bytes
        if over or (deadline is not None and time.monotonic() > deadline):
            child.kill()
            child.wait()
            return peak, over
        time.sleep(0.1)
    return peak, False


def one_iteration(groups: int, group_size: int, *, minibatch_size: int | None = None,
                  micro_batch_size: int | None = None, limit_bytes: int | None = None, timeout_s: float | None = None,
                  policy: str = "policy=smollm2") -> ChildRun:
    """One training iteration in a child process, in a temporary run folder."""
    with tempfile.TemporaryDirectory() as run_dir:
        overrides = train_overrides(groups, group_size, run_dir, policy, minibatch_size, micro_batch_size)
        return run_child(["-m", "experiments.train", *overrides], limit_bytes=limit_bytes, timeout_s=timeout_s)
