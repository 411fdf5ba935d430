"""Where ``trainer.compile=true`` pays off: ``torch.compile``'s one-off cost against the time it saves.

    python -m benchmarks.throughput --compile [--threads 1 2] [--repeats 5] [--batches 3]

The policy is warm-started and collects ``--batches`` iterations' groups the way ``experiments.train``
does (the ``experiment=quick`` preset by default), each one ``RolloutBatch`` with its own padded width.
Then, per thread count and from a fresh compile cache:

- **Update.** Two learners on copies of the same weights, one eager and one compiled as
  ``trainer.compile=true`` compiles it (``torch.compile(model, dynamic=True)``), take
  ``PPOLearner.update`` on every batch in turn: same rows, same minibatches (same seed, same
  update count), both sides back to back with the order alternating between repeats. The first pass
  over the batches holds the compiling (every shape and mode the update meets is compiled there);
  the compile time is that pass's compiled time less its eager time. Then ``--repeats`` timed passes.
- **Sampling.** The same for the bare KV-cache sampling loop (``throughput.bare_sample``) over the
  prompts of one collection, eager against compiled: the one place a compiled model could serve
  collection, whose cache grows by one column per decoded token.

Printed per figure: compile time, median and min per-update (per-pass) wall time of both, the
saving, and the break-even, the number of updates (or collections) after which the compile time is
paid back. Dynamo recompiles after the first pass are counted: compiling that keeps happening is
never paid back. Wall time on a shared CPU; the pairing per repeat keeps a busy moment on both sides.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from lightning.fabric import Fabric

from benchmarks.harness import (
    Settings,
    bare_sample,
    collect_groups,
    iteration_seeds,
    num_threads,
    prompts_by_turn,
    stderr_progress,
    timed,
    warm_started,
)
from envs.seeding import derive_seed
from policy.advantages.algorithms import group_baseline_token_advantages, turn_rows
from policy.learner import PPOLearner
from policy.rollout_batch import build_rollout_batch

FIGURES = ("update", "sampling")


def break_even(compile_s: float, eager_s: float, compiled_s: float) -> float:
    """Calls after which compiling has paid for itself: ``compile_s / (eager_s - compiled_s)``.

    ``eager_s`` and ``compiled_s`` are the wall seconds of one call each way; infinite when the
    compiled call is no faster (the compile time is never paid back).
    """
    saved = eager_s - compiled_s
    return compile_s / saved if saved > 0 else math.inf


@dataclass
class Timing:
    """One figure at one thread count: the compiling pass, then one (eager, compiled) pair per repeat."""

    calls: int
    """Calls (updates, or sampling passes) per timed pass: the per-call times divide by it."""
    compile_s: float = 0.0
    cached_compile_s: float = math.nan
    """The compile time again with Inductor's on-disk cache warm (update only; nan: not measured)."""
    recompiles: int = 0
    """Dynamo frames compiled after the first pass (0 when every later shape hit a compiled graph)."""
    eager_s: list[float] = dataclasses.field(default_factory=list)
    compiled_s: list[float] = dataclasses.field(default_factory=list)

    def per_call(self, which: str) -> tuple[float, float]:
        """``(median, min)`` seconds of one call, over the repeats."""
        times = [t / self.calls for t in (self.eager_s if which == "eager" else self.compiled_s)]
        return statistics.median(times), min(times)

    def speedups(self) -> tuple[float, float]:
        """``(median, min)`` over repeats of eager time / compiled time, pairing each repeat."""
        ratios = [e / c for e, c in zip(self.eager_s, self.compiled_s, strict=True)]
        return statistics.median(ratios), min(ratios)

    def break_even(self) -> float:
        return break_even(self.compile_s, self.per_call("eager")[0], self.per_call("compiled")[0])


def frames_compiled() -> int:
    """Frames Dynamo has compiled in this process so far (first compiles and recompiles)."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["ok"])


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    """What ``trainer.compile=true`` hands the learner (``experiments/train.py``)."""
    return torch.compile(model, dynamic=True)


def interleave(
    timing: Timing,
    eager: Callable[[], object],
    fast: Callable[[], object],
    repeats: int,
    progress: Callable[[str], None],
) -> None:
    """The compiling pass, then ``repeats`` timed pairs, alternating which side goes first."""
    eager_first = timed(eager)
    timing.compile_s = timed(fast) - eager_first
    progress(f"  compile {timing.compile_s:.1f} s (first pass less the eager pass of {eager_first:.2f} s)")
    before = frames_compiled()
    for repeat in range(repeats):
        if repeat % 2:
            timing.compiled_s.append(timed(fast))
            timing.eager_s.append(timed(eager))
        else:
            timing.eager_s.append(timed(eager))
            timing.compiled_s.append(timed(fast))
        progress(
            f"  repeat {repeat + 1}: eager {timing.eager_s[-1]:.2f} s, compiled {timing.compiled_s[-1]:.2f} s"
        )
    timing.recompiles = frames_compiled() - before


def fresh_compile_cache() -> None:
    """Point Inductor at an empty cache folder: a cold compile, as a machine's first compiled run pays."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="reverie-inductor-")
    torch._dynamo.reset()


def measure(settings: Settings, batches: int, progress: Callable[[str], None] | None = None) -> dict:
    """``{(figure, threads): Timing}`` plus the batches' shapes and minibatch steps per update."""
    progress = progress or stderr_progress()
    run_cfg, env, policy, _ = warm_started(settings, progress)
    trainer, algo, seed = run_cfg.trainer, run_cfg.algo, run_cfg.seed
    groups = settings.groups or trainer.groups_per_iteration

    from experiments.build import learner_config  # the training loop's own builder

    collections = [collect_groups(run_cfg, policy, iteration_seeds(run_cfg, groups, i + 1)) for i in range(batches)]
    updates = []  # (tokens, advantages, weights) per batch, as the training loop hands them to the learner
    for trajectories in collections:
        batch = build_rollout_batch(trajectories, pad_id=policy.pad_token_id)
        rows = turn_rows(
            batch.trajectories, batch.row_keys, invalid_action_penalty=algo.invalid_action_penalty
        )
        updates.append(
            (
                batch.tokens,
                group_baseline_token_advantages(algo, rows, batch.tokens.response_mask),
                batch.weights,
            )
        )
    ppo = learner_config(run_cfg)
    steps = (
        sum(ppo.epochs * math.ceil(len(tokens) / ppo.minibatch_size) for tokens, _, _ in updates) / batches
    )
    shapes = [tuple(tokens.input_ids.shape) for tokens, _, _ in updates]
    progress(f"{batches} update batches of shape {shapes}; {steps:.1f} minibatch steps per update")
    fabric = Fabric(accelerator="cpu", devices=1, precision=trainer.precision)
    update_seed = derive_seed(seed, "minibatches")
    prompts = prompts_by_turn(collections[0])
    eos, pad = policy.tokenizer.eos_token_id, policy.pad_token_id
    temperature = max(run_cfg.policy.temperature, 1e-6)

    def sample_pass(model: torch.nn.Module) -> Callable[[], object]:
        def go() -> None:
            generator = torch.Generator().manual_seed(derive_seed(seed, "bare-sampling"))
            with torch.no_grad():
                for batch_prompts in prompts:
                    bare_sample(
                        model,
                        batch_prompts,
                        pad=pad,
                        eos=eos,
                        max_tokens=run_cfg.policy.max_action_tokens,
                        temperature=temperature,
                        generator=generator,
                    )

        return go

    timings: dict = {}
    for threads in settings.threads:
        with num_threads(threads):
            fresh_compile_cache()  # each thread count compiles cold, as a fresh machine would
            progress(f"{threads} thread(s): update, compiling then {settings.repeats} repeats")
            eager = PPOLearner(fabric, copy.deepcopy(policy.model), ppo, seed=update_seed)
            fast = PPOLearner(fabric, compiled(copy.deepcopy(policy.model)), ppo, seed=update_seed)
            timing = timings[("update", threads)] = Timing(calls=batches)
            interleave(
                timing,
                lambda learner=eager: [learner.update(t, a, weights=w) for t, a, w in updates],
                lambda learner=fast: [learner.update(t, a, weights=w) for t, a, w in updates],
                settings.repeats,
                progress,
            )
            # A later run on the same machine: Dynamo traces again, Inductor reads its on-disk cache.
            torch._dynamo.reset()
            again = PPOLearner(fabric, compiled(copy.deepcopy(policy.model)), ppo, seed=update_seed)
            eager_pass = timed(lambda learner=eager: [learner.update(t, a, weights=w) for t, a, w in updates])
            timing.cached_compile_s = -eager_pass + timed(  # less an eager pass taken just before
                lambda learner=again: [learner.update(t, a, weights=w) for t, a, w in updates]
            )
            progress(f"  compile with a warm Inductor cache {timing.cached_compile_s:.1f} s")
            progress(f"{threads} thread(s): sampling, compiling then {settings.repeats} repeats")
            model = copy.deepcopy(policy.model).eval()
            timing = timings[("sampling", threads)] = Timing(calls=1)
            interleave(timing, sample_pass(model), sample_pass(compiled(model)), settings.repeats, progress)
    return {
        "timings": timings,
        "shapes": shapes,
        "steps_per_update": steps,
        "settings": settings,
        "load": os.getloadavg()[0],  # how shared the CPU was: wall times on a loaded machine stretch
    }


def format_table(result: dict) -> str:
    steps = result["steps_per_update"]
    lines = [
        f"load average at the end {result['load']:.1f} (1 min) on {os.cpu_count()} cores; "
        f"update batches {result['shapes']} (rows x columns), {steps:.1f} minibatch steps per update; "
        "sampling: one collection's prompts through the bare KV-cache loop",
        f"{'figure':<9} {'threads':>7} {'compile s':>9} {'eager med':>9} {'eager min':>9} {'comp med':>9} "
        f"{'comp min':>9} {'speedup med':>11} {'speedup min':>11} {'break-even':>10} {'recompiles':>10} "
        f"{'cached s':>8} {'b-e cached':>10}",
    ]
    for (figure, threads), timing in result["timings"].items():
        (em, emin), (cm, cmin), (sm, smin) = (
            timing.per_call("eager"),
            timing.per_call("compiled"),
            timing.speedups(),
        )
        lines.append(
            f"{figure:<9} {threads:>7} {timing.compile_s:>9.1f} {em:>9.3f} {emin:>9.3f} {cm:>9.3f} {cmin:>9.3f} "
            f"{sm:>11.3f} {smin:>11.3f} {timing.break_even():>10.0f} {timing.recompiles:>10} "
            f"{timing.cached_compile_s:>8.1f} {break_even(timing.cached_compile_s, em, cm):>10.0f}"
        )
    lines.append(
        "seconds per call (update: one PPOLearner.update; sampling: one collection's act calls); break-even in "
        f"calls, for the update also {steps:.1f} x that in minibatch steps; cached: compile again with "
        "Inductor's on-disk cache warm (a later run on the same machine)"
    )
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Cumulative update time against updates, eager and compiled (cold and warm cache), one panel per
    thread count: the lines cross at the break-even."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    update = {threads: t for (figure, threads), t in result["timings"].items() if figure == "update"}
    fig, axes = plt.subplots(1, len(update), figsize=(5 * len(update), 3.5), squeeze=False)
    for ax, (threads, timing) in zip(axes[0], update.items(), strict=True):
        eager, fast = timing.per_call("eager")[0], timing.per_call("compiled")[0]
        horizon = 2 * timing.break_even() if math.isfinite(timing.break_even()) else 100
        n = torch.linspace(0, horizon, 50)
        ax.plot(n, n * eager, label="eager")
        ax.plot(n, timing.compile_s + n * fast, ls="--", label="compiled, cold cache")
        if math.isfinite(timing.cached_compile_s):
            ax.plot(n, timing.cached_compile_s + n * fast, ls=":", label="compiled, warm cache")
        ax.set_title(f"{threads} thread(s)")
        ax.set_xlabel("PPO updates (training iterations)")
        ax.set_ylabel("cumulative update time (s)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report(settings: Settings, out: Path, batches: int = 3) -> dict:
    """Measure, print the table and write ``compile_payoff.png`` into ``out``."""
    result = measure(settings, batches)
    print(format_table(result))
    out.mkdir(parents=True, exist_ok=True)
    plot(result, out / "compile_payoff.png")
    print(f"wrote {out / 'compile_payoff.png'}")
    return result
