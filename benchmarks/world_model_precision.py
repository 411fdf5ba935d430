"""Whether bf16 or ``torch.compile`` pays for the world model's refits on CPU: an env preset's own world
model (the headline's small latent model on hidden_number_10 and frozen_lake) fitted with the loop's
plain fit (``imagination.fit_loop=plain``: a fresh AdamW, seeded shuffling batches), eager float32
against eager under bf16 autocast and against ``torch.compile(dynamic=True)`` of its loss, from the same
initial weights on the same batches.

    OMP_NUM_THREADS=1 python -m benchmarks.world_model_precision --envs hidden_number_10 frozen_lake

Per env and mode: the CPU seconds of the first pass (``--steps`` optimiser steps at the loop's refit
size; for ``compile`` it holds the compiling of every batch shape met), the median CPU milliseconds per
step over ``--repeats`` further passes (``compile`` from an empty Inductor cache), that against eager, and the mean loss of the last pass (bf16
rounds, so its loss may differ from eager's; compile should match eager closely). Then the process's
peak resident memory. CPU time, not wall: the machine is shared. A figure, not a timed test.
"""

from __future__ import annotations

import argparse
import copy
import resource
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from benchmarks.compile_payoff import fresh_compile_cache
from benchmarks.sample_efficiency import IMAGINATION, compose_run
from benchmarks.world_model.data import collect_env_pool
from envs import make
from experiments.world_model_builder import build_world_model
from world_model.data import trainable, trajectory_loader
from world_model.model import WorldModel
from world_model.plain_fit import plain_steps

MODES = ("eager", "bf16", "compile")


def loss_function(model: WorldModel, mode: str) -> Callable[[object], torch.Tensor]:
    """The scalar fit loss of a batch as ``mode`` computes it."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    def loss(batch: object) -> torch.Tensor:
        return model.loss(batch)["loss"]

    if mode == "compile":
        fresh_compile_cache()  # a cold compile, as a run on a fresh machine pays
        return torch.compile(loss, dynamic=True)
    if mode == "bf16":
        def autocast_loss(batch: object) -> torch.Tensor:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return loss(batch)
        return autocast_loss
    return loss


def timed_passes(model: WorldModel, loader, mode: str, steps: int, repeats: int, lr: float) -> dict[str, float]:
    """First-pass CPU seconds, median CPU ms per step of the later passes, the last pass's mean loss."""
    loss_of = loss_function(model, mode)
    losses: list[float] = []

    def recorded(batch: object) -> torch.Tensor:
        value = loss_of(batch)
        losses.append(float(value.detach()))
        return value

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        cpu = time.process_time()
        plain_steps(loader, recorded, optimizer, steps)
        first = time.process_time() - cpu
        per_step = []
        for _ in range(repeats):
            losses.clear()
            cpu = time.process_time()
            plain_steps(loader, recorded, optimizer, steps)
            per_step.append(1000 * (time.process_time() - cpu) / steps)
    return {"first_s": first, "ms_per_step": statistics.median(per_step), "loss": sum(losses) / len(losses)}


def measure(env: str, steps: int, repeats: int, transitions: int) -> dict[str, dict[str, float]]:
    run = compose_run([f"experiment={env}", *IMAGINATION])  # the headline's fit batch and rate
    kwargs = dict(run.env.kwargs)
    vocabulary = make(run.env.name, **kwargs).vocabulary()
    base = build_world_model(run.world_model, run.env.name, kwargs, vocabulary, seed=0)
    pool = trainable(collect_env_pool(run.env.name, kwargs, "train", transitions))

    def loader():  # a fresh seeded loader per mode: each mode meets the same batches in the same order
        return trajectory_loader(pool, base.tokenizer, batch_size=run.imagination.fit_batch_size, shuffle=True, seed=0)

    return {mode: timed_passes(copy.deepcopy(base), loader(), mode, steps, repeats, run.imagination.fit_lr)
            for mode in MODES}


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["| env | mode | first pass CPU s | CPU ms / step | x eager | mean loss, last pass |",
             "|---|---|---:|---:|---:|---:|"]
    for env, modes in results.items():
        eager = modes["eager"]["ms_per_step"]
        for mode, r in modes.items():
            lines.append(f"| {env} | {mode} | {r['first_s']:.1f} | {r['ms_per_step']:.0f} | "
                         f"{r['ms_per_step'] / eager:.2f} | {r['loss']:.4f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["hidden_number_10", "frozen_lake"])
    parser.add_argument("--steps", type=int, default=40, help="optimiser steps per pass (the headline's refit)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes after the first")
    parser.add_argument("--transitions", type=int, default=600, help="turns in the pool (random and expert episodes)")
    args = parser.parse_args(argv)
    if min(args.steps, args.repeats, args.transitions) < 1:
        parser.error("--steps, --repeats and --transitions must be >= 1")
    results = {env: measure(env, args.steps, args.repeats, args.transitions) for env in args.envs}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {args.steps} steps per pass")
    print(table(results))
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
