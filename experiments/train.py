"""Train an LM agent with PPO or a group-baseline method on real and imagined rollouts.

    python -m experiments.train env=hidden_number algo=gigpo seed=1
    python -m experiments.train env=hidden_number algo=grpo imagination=dyna imagination.ratio=0.75

Read top to bottom: build the env, tokenizer and policy and warm-start by behaviour cloning (the
builders are in ``experiments/build.py``); then each iteration split the update's groups into real
and imagined ones, collect the real ones and append them to the store, score and refit the world
model on the newest real data, imagine the rest from recent real states, estimate advantages over
both, take a clipped policy update, and log against the number of real environment steps. With
``imagination.ratio=0`` (the default ``imagination=model_free``) no world model is built and the run
is the model-free one. Everything lands in Hydra's run directory: the resolved config,
``metrics.jsonl``, TensorBoard events, the final policy (and critic, world model), and a ``done``
or ``failed`` marker.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from lightning.fabric import Fabric
from omegaconf import DictConfig
from tqdm.auto import tqdm

from envs import EnvFailure, Trajectory, TrajectoryStore, collect, count_env_steps, make
from envs.seeding import derive_seed, seed_global_rngs
from envs.strict_json import strict_dumps
from experiments.build import (
    RunParts,
    WarmStart,
    build_critic,
    build_learner,
    build_model_based,
    build_policy,
    fit_on_experts,
    task_seeds,
    warm_start,
    warm_start_skipped,
)
from experiments.checkpoint import Checkpoint, save_checkpoint
from experiments.config import Resolved, register_configs, validate
from experiments.distributed import (
    Collection,
    NullLogger,
    any_rank,
    broadcast_json,
    broadcast_module_,
    check_multi_process,
    check_replicas_agree,
    gather_collection,
    gather_imagined,
    launch_ranks,
    rank_seed,
    rows_of_rank,
    shard,
    value_rows,
    world_size,
)
from experiments.eval_schedule import evaluation_due, mark_metrics
from experiments.evaluation import Evaluation, evaluate, render_transcript, summarise, training_eval_seeds
from experiments.ledger import ledger_summary
from experiments.loop_progress import LoopProgress
from experiments.markers import run_job
from experiments.metrics_logger import MetricsLogger
from experiments.resume import (
    CHECKPOINTS,
    capture_rng,
    config_record,
    count_lines,
    restore_rng,
    resume_config,
    resume_from,
    trajectories_by_id,
)
from imagination.branching import sample_branch_points
from imagination.imagine import ImaginedGroups, imagine_groups
from imagination.metrics import format_imagination_summary, imagination_metrics, imagination_summary
from imagination.mixing import budget_spent, scheduled_ratio, split_groups
from imagination.refit import refit_and_gate
from imagination.value_expansion import (
    check_value_expansion,
    expanded_returns,
    expansion_branches,
    plan_expansion,
    policy_batch,
)
from policy.advantages.algorithms import (
    TurnRows,
    critic_token_advantages,
    first_rows_mask,
    group_baseline_token_advantages,
    turn_rows,
)
from policy.advantages.config import AlgoConfig
from policy.advantages.cut_episodes import is_cut_imagined
from policy.dynamic_sampling import fill_with_informative_groups
from policy.learner import PPOLearner
from policy.lm_policy import LMPolicy
from policy.rollout_batch import RolloutBatch, build_rollout_batch
from policy.value_targets import ValueTargets

register_configs()
log = logging.getLogger(__name__)  # Hydra writes it to the run's train.log, progress bar or not
CHUNK_ROWS = 256  # rows per no-grad forward pass when scoring a batch
FULL_PRECISION = ("32-true", "32", "64-true", "64")  # where sampling's log-probs are the learner's (algo.ppo.old_logp)


def train(run: Resolved, run_dir: Path) -> dict[str, float]:
    """One training run into ``run_dir``: in this process, or in ``trainer.devices`` spawned ones."""
    trainer = run.trainer
    make(run.env.name, **dict(run.env.kwargs))  # a bad env option fails here, before any process starts
    check_multi_process(run)
    fabric = Fabric(accelerator=trainer.accelerator, devices=trainer.devices, num_nodes=trainer.num_nodes,
                    strategy=trainer.strategy, precision=trainer.precision)
    if world_size(trainer) > 1:  # ddp_spawn: the processes run train_on_rank; rank 0's summary comes back
        return launch_ranks(fabric, train_on_rank, run, run_dir)
    return train_on_rank(fabric, run, run_dir)


def train_on_rank(fabric: Fabric, run: Resolved, run_dir: Path) -> dict[str, float]:
    """The loop on one process. With several, each collects its share of the real groups and every
    rank gathers them all (``experiments.distributed``); only rank 0 writes into ``run_dir``."""
    trainer, imagination = run.trainer, run.imagination
    env_kwargs = dict(run.env.kwargs)
    rank0 = fabric.global_rank == 0
    env = make(run.env.name, **env_kwargs)
    check_loop_options(run)
    seed_global_rngs(derive_seed(run.seed, "global"))  # the loop's own streams never read these
    # resume=RUN_DIR: continue from the newest checkpoint, with what the killed run wrote after it undone.
    checkpoint = resume_from(run, run_dir, run_dir / "trajectories") if run.resume else None
    policy = build_policy(run, env.vocabulary(), fabric.global_rank)
    critic = build_critic(run, policy, env.vocabulary())
    logger = (MetricsLogger(run_dir, purge_step=checkpoint.loop.real_env_steps + 1 if checkpoint else None) if rank0
              else NullLogger())
    store = TrajectoryStore(run_dir / "trajectories")  # every real rollout, for the world model
    world_model, counterfactual = build_model_based(run, env_kwargs, env.vocabulary())
    eval_seeds = training_eval_seeds(run.env.name, env_kwargs, run.seed, trainer.eval_episodes)  # the same every time
    warm = WarmStart(experts=[], check_steps=0)  # no warm start: no env steps (a resume restores its own)
    if (skipped := warm_start_skipped(run, resuming=checkpoint is not None)) is None:
        warm = warm_start(run, env_kwargs, policy, progress=trainer.progress and rank0)  # 1.
    else:
        log.info(f"warm start skipped: {skipped}")
    learner, ref_model = build_learner(fabric, run, policy, critic)
    parts = RunParts(fabric, run, run_dir, env_kwargs, policy, critic, learner, ref_model, world_model,
                     counterfactual, store, logger, eval_seeds)
    progress = LoopProgress.fresh(imagination, branch_seed=derive_seed(run.seed, "branch-points"),
                                  warm_start_env_steps=count_env_steps(warm.experts),
                                  warm_start_check_steps=warm.check_steps)
    if world_model is not None and warm.experts and imagination.fit_on_warm_start:  # (never when resuming)
        fit_on_experts(parts, progress, warm.experts)
    first_iteration = start_or_resume(parts, progress, checkpoint)

    # Every iteration runs phases 2-7, numbered as in the README's diagram of the loop.
    bar = tqdm(range(first_iteration, trainer.iterations + 1), desc=f"{run.env.name}/{run.algo.name}",
               initial=first_iteration - 1, total=trainer.iterations, disable=not trainer.progress or not rank0)
    for iteration in bar:
        iteration_start = time.monotonic()
        n_real, n_imagined = plan_groups(parts, progress, iteration)
        real, rollout = collect_real(parts, progress, iteration, n_real)
        collect_s = time.monotonic() - iteration_start
        model_metrics, imagined = model_based_step(parts, progress, iteration, real, n_imagined)
        update_start = time.monotonic()
        trajectories, update_metrics = update_policy(parts, progress, iteration, real.kept, imagined)
        update_s = time.monotonic() - update_start
        metrics = {
            **rollout_metrics(rollout, real),
            "charts/elapsed_s": time.monotonic() - progress.start,
            "time/collect_s": collect_s,
            "time/update_s": update_s,
            **model_metrics,
            **update_metrics,
        }
        log_iteration(parts, progress, iteration, metrics, trajectories)
        bar.set_postfix(success=f"{rollout.success_rate:.2f}", steps=progress.real_env_steps)
        if end_iteration(parts, progress, iteration, evaluated="eval/success_rate" in metrics):
            break
    return finish(parts, progress)


def check_loop_options(run: Resolved) -> None:
    """Refuse, before anything is built, the combinations the loop cannot serve."""
    algo, trainer = run.algo, run.trainer
    check_value_expansion(run.imagination.mode, run.imagination.enabled, algo.name, algo.value_level,
                          run.imagination.warmup_iterations)
    if algo.ppo.old_logp == "sampling" and trainer.precision not in FULL_PRECISION:
        raise ValueError(f"algo.ppo.old_logp=sampling needs full precision (trainer.precision one of {FULL_PRECISION}), "
                         f"got trainer.precision={trainer.precision}: sampling runs outside the learner's autocast, so "
                         "its log-probs are not the learner's; set algo.ppo.old_logp=recompute")


def evaluate_policy(parts: RunParts, progress: LoopProgress) -> dict[str, float]:
    """The ``eval/*`` figures on the run's held-out tasks; their env steps go on the ledger, apart."""
    # Its own sampling stream: evaluating more or less often never changes training. Rank 0 plays every
    # episode and shares the figures, so the number does not depend on the number of processes.
    if not parts.rank0:
        metrics, env_steps = broadcast_json(parts.fabric, None)
    else:
        run = parts.run
        result = evaluate(parts.policy.with_seed(derive_seed(run.seed, "eval-sampling")), run.env.name,
                          parts.env_kwargs, seeds=parts.eval_seeds, max_turns=run.trainer.max_turns)
        log.info(f"evaluation: success {result.success_rate:.3f}, invalid actions {result.invalid_action_rate:.3f} "
                 f"on {len(parts.eval_seeds)} held-out episodes")
        metrics, env_steps = broadcast_json(parts.fabric, [result.as_metrics("eval"), result.env_steps])
    progress.ledger.count_evaluation(env_steps)
    return metrics


def checkpointed_state(
    parts: RunParts, progress: LoopProgress
) -> tuple[dict[str, torch.nn.Module | None], dict[str, torch.Generator], dict[str, random.Random]]:
    """Everything a checkpoint holds besides the counters and the learner: weights and RNG streams."""
    counterfactual = parts.counterfactual
    modules = {"world_model": parts.world_model, "ref_model": parts.ref_model,
               "counterfactual_critic": counterfactual.critic if counterfactual is not None else None}
    return modules, {"sampling": parts.policy.generator}, {"branch_points": progress.branch_rng}


def save_run_checkpoint(parts: RunParts, progress: LoopProgress, iteration: int, stopped: bool) -> None:
    """Everything the loop needs to go on after ``iteration``; also a policy folder to evaluate."""
    counterfactual = parts.counterfactual
    loop = progress.loop_state(iteration, stopped=stopped, metrics_lines=count_lines(parts.logger.jsonl_path),
                               store_trajectories=len(parts.store),
                               counterfactual_recent=None if counterfactual is None else counterfactual.recent)
    modules, generators, randoms = checkpointed_state(parts, progress)
    state = {"learner": parts.learner.state_dict(), "rng": capture_rng(generators, randoms),
             **{name: None if module is None else module.state_dict() for name, module in modules.items()}}
    save_checkpoint(parts.run_dir / CHECKPOINTS, Checkpoint(config_record(parts.run), loop, state),
                    write_extra=lambda folder: save_policy(parts.policy, folder))


def start_or_resume(parts: RunParts, progress: LoopProgress, checkpoint: Checkpoint | None) -> int:
    """Start the clock and return the first iteration to run: 1 after logging the starting policy's
    evaluation, or, resumed, the one after the checkpoint's with every counter, weight and RNG stream
    as they were after it."""
    progress.start_clocks()
    if checkpoint is None:
        metrics = evaluate_policy(parts, progress)
        parts.logger.log(metrics, real_env_steps=0, iteration=0)
        progress.history = [{"iteration": 0, "charts/real_env_steps": 0, **metrics}]
        return 1
    loop, saved = checkpoint.loop, checkpoint.state
    progress.restore(loop, parts.store)
    if parts.counterfactual is not None:  # its critic's data
        parts.counterfactual.recent.extend(trajectories_by_id(parts.store, loop.imagination["counterfactual_recent_ids"]))
    parts.learner.load_state_dict(saved["learner"])
    modules, generators, randoms = checkpointed_state(parts, progress)
    for name, module in modules.items():
        if module is not None:
            module.load_state_dict(saved[name])
    restore_rng(saved["rng"], generators, randoms)
    return parts.run.trainer.iterations + 1 if loop.stopped else loop.iteration + 1


def plan_groups(parts: RunParts, progress: LoopProgress, iteration: int) -> tuple[int, int]:
    """2. How many of the update's groups are real and how many imagined: all real until the gate
    opens; then a fully imagined warm-up if asked, then the (scheduled) ratio, with fractional real
    groups carried over so the long-run share is the configured one."""
    trainer, imagination = parts.run.trainer, parts.run.imagination
    n_real, n_imagined = trainer.groups_per_iteration, 0
    if parts.world_model is not None and progress.gate.is_open:
        if progress.warmup_left > 0:
            n_real, n_imagined, progress.warmup_left = 0, trainer.groups_per_iteration, progress.warmup_left - 1
        else:
            spent = budget_spent(iteration, trainer.iterations, progress.real_env_steps, trainer.max_env_steps)
            ratio = scheduled_ratio(imagination.ratio, imagination.ratio_end, spent)
            n_real, n_imagined, progress.real_credit = split_groups(trainer.groups_per_iteration, ratio,
                                                                    progress.real_credit)
    return n_real, n_imagined


def collect_real(
    parts: RunParts, progress: LoopProgress, iteration: int, n_real: int
) -> tuple[Collection, Evaluation]:
    """3. Collect real rollouts on training tasks; groups share their start state. Every env step
    counts, also those of groups that dynamic sampling drops. Each process plays its share of the
    groups (ids counted from 0), then all gather the iteration's episodes. Returns them and what the
    policy achieved on them."""
    run, trainer, algo, fabric = parts.run, parts.run.trainer, parts.run.algo, parts.fabric
    local = Collection(collected=[], kept=[], faults=[], groups_used=0, trajectories_used=0, rounds=0)
    my_groups = shard(n_real, fabric.world_size, fabric.global_rank)

    def sample(round_index: int) -> list[Trajectory]:
        seeds = task_seeds(run, parts.env_kwargs, "train", n_real, "train", iteration, round_index)
        failures: list[EnvFailure] = []  # episodes whose env raised (trainer.on_env_error=skip)
        trajectories = collect(
            parts.policy, run.env.name, env_kwargs=parts.env_kwargs, group_size=trainer.group_size,
            max_turns=trainer.max_turns, progress=False, group_seeds=[seeds[g] for g in my_groups],
            first_group_id=local.groups_used, first_trajectory_id=local.trajectories_used,
            on_env_error=failures.append if trainer.on_env_error == "skip" else None,
            step_timeout_s=trainer.env_step_timeout_s,
        )
        local.groups_used += len(my_groups)
        local.trajectories_used += len(trajectories) + len(failures)  # a failed episode's id stays used
        local.faults.extend(failures)
        for trajectory in trajectories:
            trajectory.iteration, trajectory.policy_version = iteration, parts.learner.num_updates
        local.collected.extend(trajectories)
        return trajectories

    if not my_groups:
        local.kept, local.rounds = [], 0
    elif algo.dynamic_sampling:
        local.kept, local.rounds = fill_with_informative_groups(sample, len(my_groups),
                                                                max_rounds=1 + algo.max_resample_rounds)
    else:
        local.kept, local.rounds = sample(0), 1
    gathered = gather_collection(fabric, local, first_group=progress.next_ids["group"],
                                 first_trajectory=progress.next_ids["trajectory"], relabelled=algo.dynamic_sampling)
    progress.take_ids(gathered.groups_used, gathered.trajectories_used)
    for fault in gathered.faults if parts.rank0 else []:
        log_fault(parts.logger, parts.run_dir, "faults/env_error", f"iteration {iteration}: {fault}",
                  real_env_steps=progress.real_env_steps)
    if gathered.collected and parts.rank0:
        parts.store.append(gathered.collected)
    rollout = summarise(gathered.collected)  # what the policy achieved, dropped groups included
    progress.real_env_steps += rollout.env_steps
    return gathered, rollout


def model_based_step(
    parts: RunParts, progress: LoopProgress, iteration: int, real: Collection, n_imagined: int
) -> tuple[dict[str, float], ImaginedGroups]:
    """4. Model-based: score the world model on the new real episodes (held out: it has not been
    fitted on them), open or close the gate, refit on the store's newest real episodes, and imagine
    the update's other groups from recent real states. Nothing without a world model."""
    model_metrics: dict[str, float] = {}
    imagined = ImaginedGroups([], [], [])
    world_model, fabric, gate = parts.world_model, parts.fabric, progress.gate
    if world_model is None:
        return model_metrics, imagined
    model_start = time.monotonic()
    progress.recent.extend(real.collected)
    if parts.rank0:  # rank 0 scores and refits on its store; the other ranks take its weights and gate
        model_metrics = refit_and_gate(world_model, gate, parts.store, real.collected, parts.run.imagination, iteration,
                                       first_fit=not progress.world_model_fitted,
                                       new_real_steps=progress.real_env_steps - progress.ledger.steps_at_refit,
                                       fit_seed=derive_seed(parts.run.seed, "world-model-fit", iteration),
                                       log=lambda text, steps=progress.real_env_steps: parts.logger.log_text(
                                           "imagination/gate", text, real_env_steps=steps))
    model_metrics, gate.is_open = broadcast_json(fabric, [model_metrics, gate.is_open])
    broadcast_module_(fabric, world_model)
    if "wm/fit_trajectories" in model_metrics:  # it was refitted: every real step so far is in its data
        progress.ledger.count_fit(progress.real_env_steps)
    progress.world_model_fitted = True
    if n_imagined and gate.is_open:
        imagined = imagine(parts, progress, iteration, real.kept, n_imagined)
    progress.imagined_groups_total += len(imagined.groups)
    progress.groups_total += len(imagined.groups) + len({t.group_id for t in real.kept})
    model_metrics.update(imagination_metrics(imagined, real.kept, real.collected, progress.imagined_groups_total,
                                             progress.groups_total, gate))
    model_metrics["time/model_s"] = time.monotonic() - model_start
    return model_metrics, imagined


def imagine(
    parts: RunParts, progress: LoopProgress, iteration: int, kept: list[Trajectory], n_imagined: int
) -> ImaginedGroups:
    """``n_imagined`` groups' worth of imagined episodes, ids taken after every id used so far."""
    run, fabric = parts.run, parts.fabric
    imagination, group_size = run.imagination, run.trainer.group_size
    if imagination.mode == "value_expansion":  # continue this update's real turns, same episode budget
        branches, group_size = plan_expansion(expansion_branches(kept), n_imagined * group_size, progress.branch_rng)
    else:
        branches = sample_branch_points(list(progress.recent), n_imagined, start_share=imagination.start_share,
                                        rng=progress.branch_rng)
    imagined = imagine_groups(  # this process's share of the branches; ids counted from 0
        parts.policy, parts.world_model, run.env.name, parts.env_kwargs,
        [branches[b] for b in shard(len(branches), fabric.world_size, fabric.global_rank)], group_size=group_size,
        config=imagination, seed=rank_seed(derive_seed(run.seed, "dream", iteration), fabric.global_rank),
        max_turns=run.trainer.max_turns, success_reward=run.env.success_reward,
    )
    imagined = gather_imagined(fabric, imagined, branches, first_group=progress.next_ids["group"],
                               first_trajectory=progress.next_ids["trajectory"])
    progress.take_ids(len(imagined.groups), len(imagined.trajectories))
    for trajectory in imagined.trajectories:
        trajectory.iteration, trajectory.policy_version = iteration, parts.learner.num_updates
    return imagined


def update_policy(
    parts: RunParts, progress: LoopProgress, iteration: int, kept: list[Trajectory], imagined: ImaginedGroups
) -> tuple[list[Trajectory], dict[str, float]]:
    """Advantages and a clipped update on the kept real and the imagined episodes. Returns the
    episodes the update trained on, and its figures (an algorithm's own first, then the learner's)."""
    imagination = parts.run.imagination
    dreamt = imagined.trajectories
    if parts.critic is None and parts.counterfactual is None:  # a group estimator: cut dreams score nothing
        dreamt = [t for t in dreamt if not is_cut_imagined(t)]  # so they stay out of the loss (policy.advantages.cut_episodes)
    # Imagined rows weigh imagined_weight; with value_expansion they stay out and only shape the critic's targets.
    trajectories, weights = policy_batch(kept, dreamt, mode=imagination.mode,
                                         imagined_weight=imagination.imagined_weight)
    if not trajectories:  # empty only when dynamic sampling found no informative group
        return trajectories, {}
    batch, advantages, value, advantage_metrics = estimate_advantages(parts, progress, iteration, trajectories,
                                                                      weights, imagined)
    stats = clipped_update(parts, progress, iteration, batch, advantages, value)
    if value is not None:  # the critic was fitted on this update's real turns (and any imagined ones)
        progress.ledger.critic_real_steps += count_env_steps(kept)
    return trajectories, {**advantage_metrics, **stats}


def estimate_advantages(
    parts: RunParts, progress: LoopProgress, iteration: int, trajectories: list[Trajectory], weights: list[float],
    imagined: ImaginedGroups,
) -> tuple[RolloutBatch, torch.Tensor, ValueTargets | None, dict[str, float]]:
    """5. Advantages: one row per sampled turn, trained on exactly the sampled ids. Returns the batch
    (the counterfactual algorithms may add rows), its token advantages, the critic's targets (None
    without a critic) and the counterfactual algorithms' figures."""
    algo, policy, learner, counterfactual = parts.run.algo, parts.policy, parts.learner, parts.counterfactual
    batch = build_rollout_batch(trajectories, pad_id=policy.pad_token_id, weights=weights)
    rows = turn_rows(batch.trajectories, batch.row_keys, invalid_action_penalty=algo.invalid_action_penalty)
    value, counterfactual_metrics = None, {}
    if counterfactual is not None:
        batch, advantages, counterfactual_metrics = counterfactual.advantages(
            policy, batch, iteration=iteration, gate_open=progress.gate.is_open)
        if counterfactual.critic is not None:  # fitted alike on every rank; rank 0's weights rule
            broadcast_module_(parts.fabric, counterfactual.critic)
        progress.real_env_steps += int(counterfactual_metrics.get("oracle/env_steps", 0))  # the oracle's branches
    elif parts.critic is None:
        advantages = group_baseline_token_advantages(algo, rows, batch.tokens.response_mask)
    else:
        advantages, value = critic_advantages(algo, learner, policy, batch, rows)
        if parts.run.imagination.mode == "value_expansion" and imagined.trajectories:  # MVE targets on real rows
            value = dataclasses.replace(value, returns=expanded_returns(
                value.returns, batch.row_keys, batch.trajectories, imagined, gamma=algo.gamma,
                invalid_action_penalty=algo.invalid_action_penalty,
                end_values=lambda states: learner.critic_values(policy.state_prompts(states), CHUNK_ROWS).cpu()))
    return batch, advantages, value, counterfactual_metrics


def clipped_update(
    parts: RunParts, progress: LoopProgress, iteration: int, batch: RolloutBatch, advantages: torch.Tensor,
    value: ValueTargets | None,
) -> dict[str, float]:
    """6. Clipped policy update. Old log-probs: those recorded while sampling (every row of the batch,
    real or imagined, was sampled by this policy since its last update), or recomputed by the
    learner's own Fabric module (algo.ppo.old_logp)."""
    fabric = parts.fabric
    old_logp = batch.sampling_logp if parts.run.algo.ppo.old_logp == "sampling" else None
    tokens, weights = batch.tokens, batch.weights
    mine = rows_of_rank(fabric, len(batch))  # data-parallel: each process trains on its share of the rows
    if mine is not None:
        tokens, advantages, weights, value = tokens.index(mine), advantages[mine], weights[mine], value_rows(value, mine)
        old_logp = None if old_logp is None else old_logp[mine]
    stats = parts.learner.update(tokens, advantages, old_logp=old_logp, weights=weights, value=value)
    check_replicas_agree(fabric, parts.policy.model, iteration)
    if stats.get("losses/nonfinite_steps"):
        log_fault(parts.logger, parts.run_dir, "faults/nonfinite", f"iteration {iteration}: "
                  f"{stats['losses/nonfinite_steps']:.0f} optimizer steps had a non-finite loss or gradient "
                  "and were skipped", real_env_steps=progress.real_env_steps)
    return stats


def rollout_metrics(rollout: Evaluation, real: Collection) -> dict[str, float]:
    """The ``charts/*`` figures of an iteration's real episodes (the groups dynamic sampling dropped included)."""
    return {
        "charts/success_rate": rollout.success_rate,
        "charts/episodic_return": rollout.episodic_return,
        "charts/episode_length": rollout.episode_length,
        "charts/invalid_action_rate": rollout.invalid_action_rate,
        "charts/truncated_rate": sum(t.truncated for t in real.collected) / max(len(real.collected), 1),
        "charts/collection_rounds": real.rounds,
    }


def log_iteration(
    parts: RunParts, progress: LoopProgress, iteration: int, metrics: dict[str, float], trajectories: list[Trajectory]
) -> None:
    """7. Log against real env steps, with an evaluation when one is due and now and then a
    transcript of the update's first episode."""
    trainer, logger = parts.run.trainer, parts.logger
    due, marks = evaluation_due(iteration, last_iteration=trainer.iterations, eval_every=trainer.eval_every,
                                eval_every_steps=trainer.eval_every_steps,
                                steps_before=progress.history[-1]["charts/real_env_steps"],
                                steps_after=progress.real_env_steps)
    if due:
        metrics.update({**evaluate_policy(parts, progress), **mark_metrics(marks)})
    if iteration % trainer.transcripts_every == 0 and trajectories:
        logger.log_text("samples/transcript", render_transcript(trajectories[0]), real_env_steps=progress.real_env_steps)
    logger.log(metrics, real_env_steps=progress.real_env_steps, iteration=iteration)
    progress.history.append({"iteration": iteration, "charts/real_env_steps": progress.real_env_steps, **metrics})


def end_iteration(parts: RunParts, progress: LoopProgress, iteration: int, *, evaluated: bool) -> bool:
    """Whether to stop here (out of time or real steps), evaluating first if ``iteration`` was not;
    a checkpoint when one is due. Returns True to stop."""
    trainer = parts.run.trainer
    out_of_time = trainer.time_budget_s is not None and time.monotonic() - progress.start > trainer.time_budget_s
    out_of_steps = trainer.max_env_steps is not None and progress.real_env_steps >= trainer.max_env_steps
    stop = any_rank(parts.fabric, out_of_time or out_of_steps)  # rank clocks differ: stop together
    if stop and not evaluated:
        final = evaluate_policy(parts, progress)
        parts.logger.log(final, real_env_steps=progress.real_env_steps, iteration=iteration)
        progress.history[-1].update(final)
    if parts.rank0 and trainer.checkpoint_every and iteration % trainer.checkpoint_every == 0:
        save_run_checkpoint(parts, progress, iteration, stopped=stop)
    return stop


def finish(parts: RunParts, progress: LoopProgress) -> dict[str, Any]:
    """Save the final models (rank 0) and return the run's summary, also written to ``summary.json``."""
    run, history = parts.run, progress.history
    parts.logger.close()
    if parts.rank0:
        save_policy(parts.policy, parts.run_dir / "policy")
        if parts.critic is not None:  # safetensors + config.json, loadable without the training stack
            parts.critic.save_pretrained(parts.run_dir / "critic")
        if parts.world_model is not None:
            parts.world_model.save_pretrained(parts.run_dir / "world_model")
    summary = {
        "env": run.env.name, "algo": run.algo.name, "seed": run.seed, "iterations": history[-1]["iteration"],
        "real_env_steps": progress.real_env_steps, "warm_start_env_steps": progress.warm_start_env_steps,
        "initial_success": history[0]["eval/success_rate"], "final_success": history[-1].get("eval/success_rate"),
        "wall_s": time.monotonic() - progress.start, "cpu_seconds": progress.cpu_seconds(),
        "ledger": ledger_summary(progress.ledger, real_env_steps=progress.real_env_steps,
                                 warm_start_expert_steps=progress.warm_start_env_steps,
                                 warm_start_check_steps=progress.warm_start_check_steps),
    }
    if parts.world_model is not None:
        summary["imagination"] = imagination_summary(history)
        if parts.rank0:
            print(format_imagination_summary(summary["imagination"]))
    if parts.rank0:
        (parts.run_dir / "summary.json").write_text(strict_dumps(summary, indent=2))
    return summary


def log_fault(logger: MetricsLogger, run_dir: Path, tag: str, text: str, *, real_env_steps: int) -> None:
    """A fault the run survived: on stderr now, in TensorBoard, and a line of the run's ``faults.log``."""
    tqdm.write(text, file=sys.stderr)
    logger.log_text(tag, text, real_env_steps=real_env_steps)
    with open(run_dir / "faults.log", "a", encoding="utf-8") as handle:
        handle.write(f"{tag}\t{text}\n")


def critic_advantages(
    algo: AlgoConfig, learner: PPOLearner, policy: LMPolicy, batch: RolloutBatch, rows: TurnRows
) -> tuple[torch.Tensor, ValueTargets]:
    """Critic-based advantages and the critic's targets, bootstrapping truncated episodes.

    The critic values each row's state before the turn (``token`` level: before each action token),
    and, for an episode cut off by the turn cap, the state after its last turn.
    """
    states = batch.critic_states()
    truncated = [(i, trajectory) for i, trajectory in enumerate(batch.trajectories) if trajectory.truncated]
    bootstrap = torch.zeros(len(batch))  # (B,) read on each trajectory's last row
    if truncated and algo.value_level != "sequence":
        ends = policy.state_prompts([(trajectory, trajectory.num_turns) for _, trajectory in truncated])
        end_values = learner.critic_values(ends, CHUNK_ROWS).cpu()  # (T,)
        value_of = {i: float(v) for (i, _), v in zip(truncated, end_values, strict=True)}
        bootstrap = torch.tensor([value_of.get(i, 0.0) for i, _ in batch.row_keys])
    if algo.value_level == "token":
        old_values = learner.critic_token_values(batch.tokens, CHUNK_ROWS).cpu()  # (B, L)
    else:
        old_values = learner.critic_values(states, CHUNK_ROWS).cpu()  # (B,) values, or logits for sppo
    advantages, returns = critic_token_advantages(algo, rows, batch.tokens.response_mask, old_values,
                                                  bootstrap=bootstrap)
    if algo.value_level == "sequence":
        return advantages, ValueTargets("sequence", returns, states=states, mask=first_rows_mask(rows))
    return advantages, ValueTargets(algo.value_level, returns, old_values=old_values,
                                    states=None if algo.value_level == "token" else states)


def save_policy(policy: LMPolicy, folder: Path) -> None:
    """A Hugging Face model directory (safetensors + config + tokenizer): loadable, never unpickled."""
    policy.save(folder)


@hydra.main(config_path="conf", config_name="train", version_base=None)
def main(cfg: DictConfig) -> None:
    if cfg.resume is not None:  # the saved config, or a refusal naming the keys the command line changes
        cfg = resume_config(cfg, list(HydraConfig.get().overrides.task), validate)
    run_job(cfg, validate, train)


if __name__ == "__main__":
    main()
