"""Throughput of one training iteration's phases, each next to the practical limit of the same work.

    python -m benchmarks.throughput [--quick] [--threads 1 2] [--repeats 3] [--experiment quick]

The batches are built the way ``experiments.train`` builds them, on the ``make run`` preset
(``experiment=quick``: the learning_check task with grpo and the small dyna world model): the
policy is warm-started by a short behaviour clone on expert episodes, then one iteration's groups are
collected with ``envs.collect`` and turned into the learner's ``RolloutBatch``. Three figures:

- **Update.** Reverie's update phase as ``experiments.train`` runs it (``build_rollout_batch``,
  advantages, ``PPOLearner.update`` with the preset's length-bucketed, trimmed minibatches and the
  sampling log-probs as old log-probs) against a plain PyTorch loop, forward + backward + AdamW over
  plain shuffled minibatches at the batch's full width, which is what the update cost before those
  two changes could at best be. A second line compares it with that earlier path itself
  (``length_buckets=0``, ``trim_padding=false``, ``old_logp=recompute``). All in non-pad
  (attention-mask) tokens per second, counted as the batch's non-pad tokens times the epochs, so a
  ratio is the ratio of times. The share of padding positions and of trained (response) tokens in
  the batch is printed too, and the padding the update's minibatches still carry after trimming.
- **Collection.** Env steps per second of ``envs.collect`` with the ``LMPolicy`` against a bare
  KV-cache sampling loop of the same model (``past_key_values``, temperature sampling, stop when
  every row has emitted EOS) on the same prompt ids, batched as ``collect`` batched them (one call
  per turn index). The bare loop neither tokenises, decodes text nor steps an env.
- **Imagination.** Imagined steps per second of ``imagination.imagine_groups`` (``DreamEnv`` through
  ``envs.collect``) against real steps per second, and the shares of an imagined step's time spent
  inside the world model (``WorldModel.step``, ``initial_state`` and ``observe``) and inside the
  policy (its ``act``), with their ratio per call.

Every figure is measured for each thread count, with repeats interleaved (repeat, then threads,
then phase, reverie and its reference back to back), in wall time; median and min over the repeats
are printed, a ratio per repeat (reverie / reference, same repeat) so that a busy moment of a shared
machine hits both sides. Writes ``throughput.png`` (the ratios) into ``--out``. A figure, not a
timed test: on a shared CPU the absolute numbers move, the ratios much less.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
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
from envs import Trajectory, count_env_steps
from envs.seeding import derive_seed
from envs.token_positions import position_ids_for
from experiments.world_model_builder import build_world_model
from imagination.branching import sample_branch_points
from imagination.imagine import imagine_groups
from imagination.mixing import split_groups
from policy.advantages.algorithms import group_baseline_token_advantages, turn_rows
from policy.batch import TokenBatch
from policy.learner import PPOLearner
from policy.minibatches import minibatch_indices, padding_columns
from policy.rollout_batch import build_rollout_batch
from world_model.lightning_module import fit_world_model

FIGURES = ("update tok/s", "collection steps/s", "imagination steps/s")
"""One table row per figure and thread count; the imagination row's reference is real collection."""
UPDATE_BEFORE = "update new / before"
"""Not a table row: the update phase (reverie) against its earlier full-width, recomputing path (reference)."""


QUICK = Settings(repeats=2, clone_steps=10, groups=2, fit_steps=0)


def token_shares(attention_mask: torch.Tensor, response_mask: torch.Tensor) -> tuple[int, float, float]:
    """``(non-pad tokens, padding share, trained share)`` of a padded batch; shares of all ``B * L`` positions.

    ``attention_mask`` (B, L): 1 on real tokens; ``response_mask`` (B, L): 1 on trained action tokens.
    """
    positions = attention_mask.numel()
    if positions == 0:
        raise ValueError("token_shares: the batch has no positions")
    non_pad = int(attention_mask.sum())
    return non_pad, 1.0 - non_pad / positions, float(response_mask.sum()) / positions


def idle_decode_share(lengths_per_call: Sequence[Sequence[int]]) -> float:
    """Share of decode slots spent on rows that had already finished, over batched sampling calls.

    A call decodes every row for as many steps as its longest action (``lengths_per_call[c]``: the
    action lengths of call ``c``), so a row of length ``n`` idles ``max - n`` of those steps.
    """
    slots = idle = 0
    for lengths in lengths_per_call:
        if lengths:
            longest = max(lengths)
            slots += longest * len(lengths)
            idle += sum(longest - n for n in lengths)
    if slots == 0:
        raise ValueError("idle_decode_share: no decode slots")
    return idle / slots


@dataclass
class Series:
    """Wall seconds of reverie and of its reference, one pair per repeat; ``work`` units per call."""

    work: float
    reference_work: float
    reverie_s: list[float] = dataclasses.field(default_factory=list)
    reference_s: list[float] = dataclasses.field(default_factory=list)

    def rates(self, which: str) -> tuple[float, float]:
        """``(median, best)`` units per second: from the median and from the min time."""
        times, work = (
            (self.reverie_s, self.work) if which == "reverie" else (self.reference_s, self.reference_work)
        )
        return work / statistics.median(times), work / min(times)

    def ratios(self) -> tuple[float, float]:
        """``(median, min)`` over repeats of reverie's rate / the reference's rate, pairing each repeat."""
        per_repeat = [
            (self.work / r) / (self.reference_work / p)
            for r, p in zip(self.reverie_s, self.reference_s, strict=True)
        ]
        return statistics.median(per_repeat), min(per_repeat)


@dataclass
class Result:
    series: dict[tuple[str, int], Series]
    world_model_share: dict[int, list[float]]
    padding_share: float
    trained_share: float
    idle_decode_share: float
    rows: int
    width: int
    world_model_fitted: bool
    settings: Settings
    update_padding_share: float = float("nan")
    """Padding share of the positions the update's (trimmed) minibatches forward, over all epochs."""
    policy_share: dict[int, list[float]] = dataclasses.field(default_factory=dict)
    """Per thread count, the policy's ``act`` share of each timed imagination call."""


def action_lengths_by_turn(trajectories: Sequence[Trajectory]) -> list[list[int]]:
    """The sampled action lengths, one list per turn index (per ``act`` call, as ``prompts_by_turn``)."""
    lengths: list[list[int]] = []
    for trajectory in trajectories:
        for t, turn in enumerate(trajectory.turns):
            if len(lengths) <= t:
                lengths.append([])
            lengths[t].append(len(turn.sample.action_ids))
    return lengths


def plain_update(
    model: torch.nn.Module,
    batch: TokenBatch,
    advantages: torch.Tensor,
    minibatches: list[torch.Tensor],
    lr: float,
) -> None:
    """Forward + backward + AdamW over ``minibatches`` with a policy-gradient loss: the practical limit."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for idx in minibatches:  # (b,)
        ids, mask, response = batch.input_ids[idx], batch.attention_mask[idx], batch.response_mask[idx]
        logits = model(
            input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask), use_cache=False
        ).logits[:, :-1]  # (b, L-1, V)
        logp = F.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # (b, L-1)
        weight = response[:, 1:] * advantages[idx][:, 1:]  # (b, L-1)
        loss = -(logp * weight).sum() / response.sum().clamp(min=1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


class MethodClock:
    """Sums the wall time spent inside some methods of one object (wrapped on that instance)."""

    WORLD_MODEL = ("step", "initial_state", "observe")
    POLICY = ("act",)

    def __init__(self, owner, methods: Sequence[str]) -> None:
        self.seconds = 0.0
        for name in methods:
            setattr(owner, name, self._wrap(getattr(owner, name)))

    def _wrap(self, method):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return wrapper


def run(settings: Settings = Settings(), progress: Callable[[str], None] | None = None) -> Result:  # noqa: B008
    """Build the batches, then time every figure; torch's thread count is restored afterwards."""
    with num_threads(torch.get_num_threads()):  # each phase sets its own count; the caller's comes back
        return _measure(settings, progress or stderr_progress())


def _measure(settings: Settings, progress: Callable[[str], None]) -> Result:
    run_cfg, env, policy, experts = warm_started(settings, progress)
    trainer, algo, env_kwargs = run_cfg.trainer, run_cfg.algo, dict(run_cfg.env.kwargs)
    env_name, seed = run_cfg.env.name, run_cfg.seed
    groups = settings.groups or trainer.groups_per_iteration

    from experiments.build import learner_config  # the training loop's own builder

    train_seeds = iteration_seeds(run_cfg, groups, 1)

    def collect_real() -> list[Trajectory]:
        return collect_groups(run_cfg, policy, train_seeds)

    trajectories = collect_real()
    world_model = build_world_model(
        run_cfg.world_model,
        env_name,
        env_kwargs,
        env.vocabulary(),
        seed=derive_seed(seed, "world-model-init"),
    )
    if settings.fit_steps:
        progress(f"fitting the world model: {settings.fit_steps} steps")
        fit_world_model(
            experts,
            [],
            world_model,
            max_steps=settings.fit_steps,
            batch_size=run_cfg.imagination.fit_batch_size,
            lr=run_cfg.imagination.fit_lr,
            seed=derive_seed(seed, "world-model-fit", 0),
        )
    world_model.eval()
    clock = MethodClock(world_model, MethodClock.WORLD_MODEL)
    policy_clock = MethodClock(policy, MethodClock.POLICY)

    def imagine(repeat: int, count: int = groups, first_id: int = 0):
        """``count`` imagined groups from the collected episodes (as many as real ones by default)."""
        branches = sample_branch_points(
            trajectories,
            count,
            start_share=run_cfg.imagination.start_share,
            rng=random.Random(derive_seed(seed, "branch-points", repeat)),
        )
        return imagine_groups(
            policy,
            world_model,
            env_name,
            env_kwargs,
            branches,
            group_size=trainer.group_size,
            config=run_cfg.imagination,
            seed=derive_seed(seed, "dream", repeat),
            max_turns=trainer.max_turns,
            first_group_id=first_id,
            first_trajectory_id=first_id,
        )

    # The update's batch as the preset mixes it: its share of imagined groups, weighted as in training.
    n_real, n_imagined = groups, 0
    if run_cfg.imagination.enabled:
        n_real, n_imagined, _ = split_groups(groups, run_cfg.imagination.ratio, 0.0)
    real_part = trajectories[: n_real * trainer.group_size]
    imagined_part = imagine(-1, n_imagined, first_id=len(trajectories)).trajectories if n_imagined else []
    weight = 0.0 if run_cfg.imagination.mode == "value_expansion" else run_cfg.imagination.imagined_weight
    update_trajectories = real_part + imagined_part
    update_weights = [1.0] * len(real_part) + [weight] * len(imagined_part)
    batch = build_rollout_batch(update_trajectories, pad_id=policy.pad_token_id, weights=update_weights)
    _, padding_share, trained_share = token_shares(batch.tokens.attention_mask, batch.tokens.response_mask)
    ppo = learner_config(run_cfg)
    before = dataclasses.replace(ppo, length_buckets=0, trim_padding=False, old_logp="recompute")
    fabric = Fabric(accelerator="cpu", devices=1, precision=trainer.precision)

    def reverie_update(learner: PPOLearner) -> None:
        built = build_rollout_batch(update_trajectories, pad_id=policy.pad_token_id, weights=update_weights)
        rows = turn_rows(
            built.trajectories, built.row_keys, invalid_action_penalty=algo.invalid_action_penalty
        )
        advantages = group_baseline_token_advantages(algo, rows, built.tokens.response_mask)
        old_logp = built.sampling_logp if learner.cfg.old_logp == "sampling" else None  # as experiments.train
        learner.update(built.tokens, advantages, old_logp=old_logp, weights=built.weights)

    rows = turn_rows(batch.trajectories, batch.row_keys, invalid_action_penalty=algo.invalid_action_penalty)
    advantages = group_baseline_token_advantages(algo, rows, batch.tokens.response_mask)  # (B, L)
    update_seed = derive_seed(seed, "minibatches")
    generator = torch.Generator().manual_seed(update_seed)  # the learner's first update shuffles exactly so
    minibatches = [
        idx
        for _ in range(ppo.epochs)
        for idx in torch.randperm(len(batch), generator=generator).split(ppo.minibatch_size)
    ]
    update_tokens = float(batch.tokens.attention_mask.sum()) * ppo.epochs
    full_width = batch.tokens.input_ids.shape[1]
    update_positions = sum(  # what the update's minibatches forward, trimmed to their longest rows
        len(idx)
        * (full_width - (padding_columns(batch.tokens.attention_mask[idx]) if ppo.trim_padding else 0))
        for epoch in minibatch_indices(
            batch.tokens.attention_mask.sum(dim=1),
            epochs=ppo.epochs,
            minibatch_size=ppo.minibatch_size,
            length_buckets=ppo.length_buckets,
            generator=torch.Generator().manual_seed(update_seed),
        )
        for idx in epoch
    )

    prompt_batches = prompts_by_turn(trajectories)
    idle_share = idle_decode_share(action_lengths_by_turn(trajectories))
    real_steps = count_env_steps(trajectories)
    imagined_steps = count_env_steps(imagine(0).trajectories, source="imagined")
    progress(
        f"update batch of {len(batch)} rows ({n_real} real, {n_imagined} imagined groups); {real_steps} real and {imagined_steps} imagined steps per collection"
    )
    series = {}
    for threads in settings.threads:
        series[(FIGURES[0], threads)] = Series(update_tokens, update_tokens)
        series[(UPDATE_BEFORE, threads)] = Series(update_tokens, update_tokens)
        series[(FIGURES[1], threads)] = Series(real_steps, real_steps)
        series[(FIGURES[2], threads)] = Series(imagined_steps, real_steps)
    share: dict[int, list[float]] = {threads: [] for threads in settings.threads}
    policy_share: dict[int, list[float]] = {threads: [] for threads in settings.threads}
    sample_generator = torch.Generator().manual_seed(derive_seed(seed, "bare-sampling"))
    max_tokens, temperature = run_cfg.policy.max_action_tokens, max(run_cfg.policy.temperature, 1e-6)
    eos, pad = policy.tokenizer.eos_token_id, policy.pad_token_id
    cache_key = (
        "cache" if "cache" in inspect.signature(policy.model.forward).parameters else "past_key_values"
    )

    for repeat in range(settings.repeats):
        for threads in settings.threads:
            progress(f"repeat {repeat + 1}/{settings.repeats}, {threads} thread(s)")
            with num_threads(threads):
                # Update: fresh copies of the same weights each time, so every repeat does the same work.
                learner = PPOLearner(fabric, copy.deepcopy(policy.model), ppo, seed=update_seed)
                s = series[(FIGURES[0], threads)]
                s.reverie_s.append(timed(lambda learner=learner: reverie_update(learner)))
                learner = PPOLearner(fabric, copy.deepcopy(policy.model), before, seed=update_seed)
                series[(UPDATE_BEFORE, threads)].reverie_s.append(s.reverie_s[-1])
                series[(UPDATE_BEFORE, threads)].reference_s.append(
                    timed(lambda learner=learner: reverie_update(learner))
                )
                model = copy.deepcopy(policy.model)
                s.reference_s.append(
                    timed(
                        lambda model=model: plain_update(model, batch.tokens, advantages, minibatches, ppo.lr)
                    )
                )
                # Collection: the policy through collect, then the bare loop on the same prompt ids.
                policy.eval()
                s = series[(FIGURES[1], threads)]
                collect_s = timed(collect_real)
                s.reverie_s.append(collect_s)
                with torch.no_grad():
                    s.reference_s.append(
                        timed(
                            lambda: [
                                bare_sample(
                                    policy.model,
                                    prompts,
                                    pad=pad,
                                    eos=eos,
                                    max_tokens=max_tokens,
                                    temperature=temperature,
                                    generator=sample_generator,
                                    cache_key=cache_key,
                                )
                                for prompts in prompt_batches
                            ]
                        )
                    )
                # Imagination: imagined steps against real steps (the collection just timed).
                s = series[(FIGURES[2], threads)]
                clock.seconds = policy_clock.seconds = 0.0
                start = time.perf_counter()
                imagined = imagine(repeat)
                elapsed = time.perf_counter() - start
                steps = count_env_steps(imagined.trajectories, source="imagined")
                s.reverie_s.append(elapsed * imagined_steps / steps)  # scaled to the first call's step count
                s.reference_s.append(collect_s)
                share[threads].append(clock.seconds / elapsed)
                policy_share[threads].append(policy_clock.seconds / elapsed)

    return Result(
        series,
        share,
        padding_share,
        trained_share,
        idle_share,
        len(batch),
        batch.tokens.input_ids.shape[1],
        settings.fit_steps > 0,
        settings,
        update_padding_share=1.0 - update_tokens / update_positions,
        policy_share=policy_share,
    )


def format_table(result: Result) -> str:
    header = (
        f"{'figure':<20} {'threads':>7} {'reverie med':>12} {'reverie best':>12} {'limit med':>11} "
        f"{'limit best':>11} {'ratio med':>9} {'ratio min':>9}"
    )
    lines = [
        f"batch: {result.rows} rows x {result.width} columns; padding {result.padding_share:.1%} of positions, "
        f"trained (response) tokens {result.trained_share:.1%}; collection: "
        f"{result.idle_decode_share:.1%} of decode slots on rows already finished",
        f"world model: {'fitted ' + str(result.settings.fit_steps) + ' steps on expert episodes' if result.world_model_fitted else 'untrained'}; "
        "imagination's reference is real collection (steps/s)",
        header,
    ]
    for figure in FIGURES:
        for threads in result.settings.threads:
            s = result.series[(figure, threads)]
            (rm, rb), (lm, lb), (qm, qmin) = s.rates("reverie"), s.rates("reference"), s.ratios()
            lines.append(
                f"{figure:<20} {threads:>7} {rm:>12.1f} {rb:>12.1f} {lm:>11.1f} {lb:>11.1f} "
                f"{qm:>9.3f} {qmin:>9.3f}"
            )
    lines.append(
        f"update minibatches: padding {result.update_padding_share:.1%} of the positions forwarded (full width: "
        f"{result.padding_share:.1%}); new / before = length buckets, trimming and sampling log-probs / "
        "full width and a recomputing pass:"
    )
    for threads in result.settings.threads:
        s = result.series[(UPDATE_BEFORE, threads)]
        (nm, nb), (bm, bb), (qm, qmin) = s.rates("reverie"), s.rates("reference"), s.ratios()
        lines.append(
            f"{UPDATE_BEFORE:<20} {threads:>7} new {nm:.1f} (best {nb:.1f}) tok/s, before {bm:.1f} "
            f"(best {bb:.1f}) tok/s, ratio med {qm:.3f} min {qmin:.3f}"
        )
    for threads in result.settings.threads:
        values = result.world_model_share[threads]
        lines.append(
            f"{'world model share':<20} {threads:>7} median {statistics.median(values):.3f} "
            f"min {min(values):.3f} (of an imagined step's wall time)"
        )
        policy = result.policy_share.get(threads, [])
        if policy:
            per_call = [w / p for w, p in zip(values, policy, strict=True)]
            lines.append(
                f"{'policy share':<20} {threads:>7} median {statistics.median(policy):.3f} "
                f"min {min(policy):.3f}; world model / policy median {statistics.median(per_call):.2f} "
                f"min {min(per_call):.2f}"
            )
    return "\n".join(lines)


def plot(result: Result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(result.settings.threads)
    for k, threads in enumerate(result.settings.threads):
        medians = [result.series[(figure, threads)].ratios()[0] for figure in FIGURES]
        ax.bar([i + k * width for i in range(len(FIGURES))], medians, width, label=f"{threads} thread(s)")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(
        [i + width * (len(result.settings.threads) - 1) / 2 for i in range(len(FIGURES))],
        ["update / plain loop", "collect / bare loop", "imagined / real"],
    )
    ax.set_ylabel("throughput ratio (median)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> Result:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a short run (2 repeats, 2 groups, untrained world model)"
    )
    parser.add_argument(
        "--threads", type=int, nargs="+", default=None, help="torch thread counts (default 1 2)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats of every figure")
    parser.add_argument(
        "--experiment", default="quick", help="the experiment preset (default: quick, as make run)"
    )
    parser.add_argument("--fit-steps", type=int, default=None, help="world-model fit steps; 0: untrained")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="instead: what torch.compile saves per update (compile_payoff.py)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("outputs/benchmarks"), help="folder of throughput.png"
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else Settings()
    changes = {"experiment": args.experiment}
    if args.threads is not None:
        changes["threads"] = tuple(args.threads)
    if args.repeats is not None:
        changes["repeats"] = args.repeats
    if args.fit_steps is not None:
        changes["fit_steps"] = args.fit_steps
    settings = dataclasses.replace(settings, **changes)
    if args.compile:  # trainer.compile's cost and saving: its own table and compile_payoff.png
        from benchmarks import compile_payoff

        return compile_payoff.report(settings, args.out)
    result = run(settings)
    print(format_table(result))
    args.out.mkdir(parents=True, exist_ok=True)
    plot(result, args.out / "throughput.png")
    print(f"wrote {args.out / 'throughput.png'}")
    return result


if __name__ == "__main__":
    main()
