"""What the world model costs on one CPU thread: a fit step, an imagined step, a tiny model-based run.

    OMP_NUM_THREADS=1 python -m benchmarks.world_model_cost
    OMP_NUM_THREADS=1 python -m benchmarks.world_model_cost --envs hidden_number --steps 3 --runs

Per env, with the default world model (``experiments/conf/world_model/default.yaml``: latent 128, five
members) and the loop's fit batch (``imagination.fit_batch_size``, 32 trajectories) on a pool of
random and expert episodes of the training split:

- ``fit s/step`` and ``fit cpu s/step``: wall and CPU seconds per optimiser step of
  ``fit_world_model`` (batches built, Lightning step, AdamW), from a fit of ``--steps`` steps after
  a warm-up fit of one step; on a shared machine the CPU seconds are the steadier figure;
- ``imagine cpu s/step``: CPU seconds of one batched ``WorldModel.step`` over ``--imagine-rows``
  states (sampled text, fold-in, reward and done), and the same per imagined turn (per row).

``--runs`` adds the tiny loop of the learning check (hidden_number over 1 .. 5, 3 iterations of 2
groups x 4) model-free and with ``imagination=dyna`` and the default world model, and the
``model_based`` preset cut to the same size, as subprocesses: wall and CPU seconds, seconds of the
RL loop, and how long each took before it first imagined (the fit on the warm start's expert
episodes, ``imagination.first_fit_steps`` steps, comes first).

The script reads only interfaces that predate the batched fit, so the same file run in a checkout
of an older commit prints that commit's figures for a before / after comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.world_model.data import ENVS, collect_pool
from envs.trajectory import Trajectory
from world_model.lightning_module import fit_world_model
from world_model.model import WorldModel, WorldModelConfig
from world_model.turn_tokens import TurnTokenizer

COST_ENVS = ("hidden_number", "frozen_lake", "sokoban", "minishop")
TINY_RUN = ["trainer.iterations=3", "trainer.groups_per_iteration=2", "trainer.group_size=4", "trainer.progress=false"]


def default_model(env: str, seed: int = 0) -> WorldModel:
    """The default world model for ``env`` of the world-model benchmark: ``WorldModelConfig``'s own
    defaults, which are the ``world_model/default.yaml`` sizes (a test checks that they agree); read
    this way the script also runs on checkouts older than the nested config group."""
    spec = ENVS[env]
    tk = TurnTokenizer.for_env(spec.name, spec.kwargs)
    return WorldModel(WorldModelConfig.for_tokenizer(tk), tk, seed=seed)


def fit_step_seconds(env: str, pool, steps: int, batch_size: int) -> tuple[float, float]:
    """Wall and CPU seconds per optimiser step of ``fit_world_model`` (after a one-step warm-up fit).

    On a shared machine the CPU seconds are the steadier figure."""
    model = default_model(env)
    fit_world_model(pool, [], model, max_steps=1, batch_size=batch_size, seed=0, score_train=False)
    start, cpu = time.monotonic(), time.process_time()
    fit_world_model(pool, [], model, max_steps=steps, batch_size=batch_size, seed=1, score_train=False)
    return (time.monotonic() - start) / steps, (time.process_time() - cpu) / steps


@torch.no_grad()
def imagine_step_seconds(model: WorldModel, trajectories: Sequence[Trajectory], rows: int, calls: int) -> float:
    """CPU seconds of one batched ``WorldModel.step`` over ``rows`` states (first observations and
    actions of the recorded turns of ``trajectories``, repeated to fill ``rows``); an untrained model
    writes long rows, the upper end of what a step costs."""
    was_training = model.training
    model.eval()
    turns = [turn for t in trajectories for turn in t.turns][:rows]
    turns = (turns * (rows // max(1, len(turns)) + 1))[:rows]
    states = model.initial_state([turn.observation for turn in turns])
    actions = [turn.action for turn in turns]
    generator = torch.Generator().manual_seed(0)
    model.step(states, actions, generator=generator)  # warm-up
    cpu = time.process_time()
    for _ in range(calls):
        model.step(states, actions, generator=generator)
    model.train(was_training)
    return (time.process_time() - cpu) / calls


def imagined(metrics: Path) -> bool:
    """Whether a complete record of ``metrics`` counts imagined groups."""
    if not metrics.exists():
        return False
    lines = metrics.read_text().split("\n")[:-1]  # the last piece may be a line still being written
    return any(json.loads(line).get("imagination/imagined_groups", 0) > 0 for line in lines if line.strip())


@dataclass(frozen=True)
class RunCost:
    """What one ``experiments.train`` subprocess cost."""

    wall_s: float
    cpu_s: float
    """CPU seconds of the subprocess (and its children)."""
    loop_s: float
    """``charts/elapsed_s`` of its last record: seconds since RL began (after the warm start)."""
    first_imagined_s: float
    """Seconds from its start until ``metrics.jsonl`` first held an iteration with imagined groups (an
    upper bound on when it began imagining: records are written after the update); NaN if never."""


def timed_run(overrides: Sequence[str], run_dir: Path) -> RunCost:
    """Run ``experiments.train`` with ``overrides`` on one thread and time it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    metrics, first = run_dir / "metrics.jsonl", float("nan")
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "experiments.train", *overrides, f"hydra.run.dir={run_dir}"],
                                env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        while proc.poll() is None:
            time.sleep(0.25)
            if first != first and imagined(metrics):
                first = time.monotonic() - start
        wall = time.monotonic() - start
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"run {overrides} failed:\n{err.read()[-3000:]}")
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = done.ru_utime + done.ru_stime - cpu.ru_utime - cpu.ru_stime
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return RunCost(wall, cpu_s, records[-1].get("charts/elapsed_s", float("nan")), first)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.world_model_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="*", default=list(COST_ENVS), choices=sorted(ENVS))
    p.add_argument("--steps", type=int, default=5, help="timed optimiser steps per env")
    p.add_argument("--batch-size", type=int, default=32, help="trajectories per fit batch (the loop's default)")
    p.add_argument("--transitions", type=int, default=600, help="real transitions in each env's pool")
    p.add_argument("--imagine-rows", type=int, default=32, help="states per batched imagined step")
    p.add_argument("--imagine-calls", type=int, default=3, help="timed imagined steps per env")
    p.add_argument("--runs", action="store_true",
                   help="also time the tiny learning-check loop: model-free, dyna, the model_based preset")
    args = p.parse_args(argv)
    print(f"torch threads {torch.get_num_threads()}, batch {args.batch_size} trajectories, {args.steps} steps",
          flush=True)
    print(f"{'env':<15}{'trajectories':>13}{'fit s/step':>12}{'fit cpu s/step':>16}{'imagine cpu s/step':>20}"
          f"{'cpu s/imagined turn':>21}", flush=True)
    for env in args.envs:
        pool = collect_pool(env, "train", args.transitions, seed=0)
        fit_s, fit_cpu = fit_step_seconds(env, pool, args.steps, args.batch_size)
        imagine_s = imagine_step_seconds(default_model(env), pool, args.imagine_rows, args.imagine_calls)
        print(f"{env:<15}{len(pool):>13}{fit_s:>12.3f}{fit_cpu:>16.3f}{imagine_s:>20.3f}"
              f"{imagine_s / args.imagine_rows:>21.4f}", flush=True)
    if args.runs:
        with tempfile.TemporaryDirectory() as tmp:
            free = timed_run(["experiment=learning_check", *TINY_RUN, "imagination=model_free"], Path(tmp) / "free")
            dyna = timed_run(["experiment=learning_check", *TINY_RUN, "imagination=dyna"], Path(tmp) / "dyna")
            preset = timed_run(["experiment=model_based", *TINY_RUN], Path(tmp) / "model_based")
        print("tiny run (learning_check, 3 iterations of 2 groups x 4, one thread):")
        for name, run in (("model-free", free), ("dyna", dyna), ("model_based", preset)):
            print(f"  {name:<11} wall {run.wall_s:7.1f} s  cpu {run.cpu_s:7.1f} s  RL loop {run.loop_s:7.1f} s"
                  f"  first imagined after {run.first_imagined_s:.1f} s", flush=True)
        print(f"  dyna / model-free: cpu {dyna.cpu_s / free.cpu_s:.1f}x, RL loop {dyna.loop_s / free.loop_s:.1f}x")


if __name__ == "__main__":
    main()
