"""Train an LM agent with PPO or a group-baseline method on real and imagined rollouts.

    python -m experiments.train env=hidden_number algo=gigpo seed=1
    python -m experiments.train env=hidden_number algo=grpo imagination=dyna imagination.ratio=0.75

Read top to bottom: build the env, tokenizer and policy and warm-start by behaviour cloning (the
builders are in ``experiments/build.py``); then each iteration split the update's groups into real
and imagined ones, collect the real ones and append them to the store, score and refit the world
model on the newest real data, imagine the rest from recent real states, estimate advantages over
both, take a clipped policy update, and log against the number of real environment steps. Each
phase returns a record of what it did (steps taken, ids used, ledger entries) and only
``train_on_rank`` applies it to the loop's counters (``experiments/phase_record.py``). With
``imagination.ratio=0`` (the default ``imagination=model_free``) no world model is built and the run
is the model-free one. Everything lands in Hydra's run directory: the resolved config,
``metrics.jsonl``, TensorBoard events, the final policy (and critic, world model), and a ``done``
or ``failed`` marker.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from lightning.fabric import Fabric
from omegaconf import DictConfig

from envs import Trajectory, count_env_steps, make
from envs.seeding import derive_seed
from envs.strict_json import strict_dumps
from experiments.advantage_estimation import estimate_advantages
from experiments.build import RunParts, build_run, fit_on_experts
from experiments.config import Resolved, register_configs, validate
from experiments.distributed import any_rank, check_multi_process, launch_ranks, world_size
from experiments.eval_schedule import evaluation_due, mark_metrics
from experiments.evaluation import render_transcript
from experiments.fitted_on import Source, write_fitted_on
from experiments.gap_warning import GapWatch, warn_gap
from experiments.held_out_evaluation import evaluate_policy
from experiments.init_models import Imported, fitted_on_record, model_tokenizers
from experiments.ledger import ledger_summary
from experiments.loop_progress import LoopProgress
from experiments.markers import run_job
from experiments.phase_record import PhaseRecord
from experiments.phase_timer import PhaseTimer
from experiments.policy_folder import save_policy
from experiments.policy_update import clipped_update
from experiments.progress_bar import LoopBar, bar_plan
from experiments.real_collection import collect_real, rollout_metrics
from experiments.resume import resume_config
from experiments.run_checkpoint import restore_parts, save_run_checkpoint
from experiments.run_layout import model_dir
from experiments.world_model_step import model_based_step
from imagination.imagine import ImaginedGroups
from imagination.metrics import format_imagination_summary, imagination_summary
from imagination.mixing import budget_spent, scheduled_ratio, split_groups
from imagination.value_expansion import policy_batch
from policy.advantages.cut_episodes import is_cut_imagined

register_configs()


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
    rank gathers them all (``experiments.distributed``); only rank 0 writes into ``run_dir``. The
    phases only read ``progress``: each returns a ``PhaseRecord`` and only this function applies one.
    ``progress.timer`` (a clock, not a counter) is handed to the phases that charge their time to it."""
    trainer = run.trainer
    parts, warm, checkpoint = build_run(fabric, run, run_dir)  # the builders, with 1. the warm start
    progress = LoopProgress.fresh(run.imagination, branch_seed=derive_seed(run.seed, "branch-points"),
                                  warm_start_env_steps=count_env_steps(warm.experts),
                                  warm_start_check_steps=warm.check_steps)
    timer = progress.timer
    if parts.world_model is not None and warm.experts and run.imagination.fit_on_warm_start:  # (never when resuming)
        with timer.phase("wm_fit"):  # charged to iteration 1, as the first evaluation is
            progress.apply(fit_on_experts(parts, progress, warm.experts))
    progress.start_clocks()
    if checkpoint is None:
        progress.apply(evaluate_start(parts, timer))
        first_iteration = 1
    else:  # every counter, weight and RNG stream as they were after the checkpoint's iteration
        progress.restore(checkpoint.loop, parts.store)
        first_iteration = restore_parts(parts, progress, checkpoint)
    progress.apply(PhaseRecord(imported_steps=imported_steps(parts.imported)))  # *.init; after any restore
    gap_watch = GapWatch(run.imagination.gap_warning, run.imagination.gap_warning_iterations)  # reads, never trains
    # Every iteration runs phases 2-7, numbered as in the README's diagram of the loop.
    plan = bar_plan(trainer.iterations, trainer.max_env_steps, first_iteration, progress.real_env_steps)
    bar = LoopBar(f"{run.env.name}/{run.algo.name}", plan, real_env_steps=progress.real_env_steps,
                  enabled=trainer.progress and parts.rank0)
    for iteration in range(first_iteration, trainer.iterations + 1):  # the bar: real env steps against a budget
        with timer.phase("other"):  # what no named phase takes: planning, bookkeeping, logging
            iteration_start = time.monotonic()
            n_real, n_imagined, planned = plan_groups(parts, progress, iteration)  # 2.
            progress.apply(planned)
            real, rollout, collected = collect_real(parts, progress, iteration, n_real, timer)  # 3.
            progress.apply(collected)
            collect_s = time.monotonic() - iteration_start
            model_metrics, imagined, modelled = model_based_step(parts, progress, iteration, real, n_imagined,  # 4.
                                                                 timer)
            progress.apply(modelled)
            update_start = time.monotonic()
            trajectories, update_metrics, updated = update_policy(parts, progress, iteration, real.kept, imagined,
                                                                  timer)  # 5.-6.
            progress.apply(updated)
            update_s = time.monotonic() - update_start
            metrics = {
                **rollout_metrics(rollout, real),
                **({"charts/budget_cut": 1.0} if collected.budget_cut is not None else {}),
                "charts/elapsed_s": time.monotonic() - progress.start,
                "time/collect_s": collect_s,
                "time/update_s": update_s,
                **model_metrics,
                **update_metrics,
            }
            progress.apply(log_iteration(parts, progress, iteration, metrics, trajectories, timer))  # 7.
            timer.reset()  # the next iteration's phases from here
        watch_gap(parts, progress, gap_watch, metrics)
        bar.advance(progress.real_env_steps, success=f"{rollout.success_rate:.2f}", iteration=iteration)
        stop, stopping = stop_here(parts, progress, iteration, timer, evaluated="eval/success_rate" in metrics)
        progress.apply(stopping)
        if parts.rank0 and trainer.checkpoint_every and iteration % trainer.checkpoint_every == 0:
            save_run_checkpoint(parts, progress, iteration, stopped=stop)
        if stop:
            break
    bar.close()
    return finish(parts, progress)


def watch_gap(parts: RunParts, progress: LoopProgress, gap_watch: GapWatch, metrics: dict[str, float]) -> None:
    """Warn (rank 0) when the imagined-minus-real return gap has stayed large; the watch trains nothing."""
    gap = metrics.get("imagination/return_gap", float("nan"))  # NaN: nothing imagined
    if gap_watch.observe(gap) and parts.rank0:
        warn_gap(parts.logger, gap_watch, gap, real_env_steps=progress.real_env_steps)


def imported_steps(imported: dict[str, Imported]) -> dict[str, int]:
    """The ledger's ``imported_*`` entries of the saved models the run started from."""
    return {f"imported_{name}_{kind}_steps": getattr(saved.fitted_on, f"{kind}_steps")
            for name, saved in imported.items() for kind in ("real", "expert")}


def save_models(parts: RunParts, progress: LoopProgress) -> None:
    """The final models under ``models/``, each critic and world model with its ``fitted_on.json``: the
    saved model it started from, if any, then this run's steps by the ledger."""
    run, ledger = parts.run, progress.ledger
    save_policy(parts.policy, model_dir(parts.run_dir, "policy"))  # under models/ (experiments/run_layout.py)
    collected_by = f"experiments.train {parts.run_dir} (algo={run.algo.name}, seed {run.seed})"
    own = {"critic": Source(collected_by, ledger.critic_real_steps, 0),
           "world_model": Source(collected_by, ledger.world_model_real_steps, ledger.world_model_expert_steps)}
    for name, model in (("critic", parts.critic), ("world_model", parts.world_model)):
        if model is None:
            continue
        folder = model_dir(parts.run_dir, name)
        model.save_pretrained(folder)  # safetensors + config.json, loadable without the training stack
        write_fitted_on(folder, fitted_on_record(parts.imported.get(name), run.env.name, parts.env_kwargs,
                                                 model_tokenizers(model, parts.policy.tokenizer), own[name]))


def evaluate_start(parts: RunParts, timer: PhaseTimer) -> PhaseRecord:
    """The starting policy's evaluation, logged at step 0: the first row of the history (its time is
    charged to iteration 1's ``eval`` phase)."""
    metrics, env_steps = evaluate_policy(parts, timer)
    parts.logger.log(metrics, real_env_steps=0, iteration=0)
    return PhaseRecord(evaluations=[env_steps], history_row={"iteration": 0, "charts/real_env_steps": 0, **metrics})


def plan_groups(parts: RunParts, progress: LoopProgress, iteration: int) -> tuple[int, int, PhaseRecord]:
    """2. How many of the update's groups are real and how many imagined: all real until the gate
    opens; then a fully imagined warm-up if asked, then the (scheduled) ratio, with fractional real
    groups carried over so the long-run share is the configured one."""
    trainer, imagination = parts.run.trainer, parts.run.imagination
    if parts.world_model is None or not progress.gate.is_open:
        return trainer.groups_per_iteration, 0, PhaseRecord()
    if progress.warmup_left > 0:
        return 0, trainer.groups_per_iteration, PhaseRecord(warmup_iterations=1)
    spent = budget_spent(iteration, trainer.iterations, progress.real_env_steps, trainer.max_env_steps)
    ratio = scheduled_ratio(imagination.ratio, imagination.ratio_end, spent)
    n_real, n_imagined, real_credit = split_groups(trainer.groups_per_iteration, ratio, progress.real_credit)
    return n_real, n_imagined, PhaseRecord(real_credit=real_credit)


def update_policy(
    parts: RunParts, progress: LoopProgress, iteration: int, kept: list[Trajectory], imagined: ImaginedGroups,
    timer: PhaseTimer,
) -> tuple[list[Trajectory], dict[str, float], PhaseRecord]:
    """5. Advantages and 6. a clipped update on the kept real and the imagined episodes. Returns the
    episodes the update trained on, its figures (an algorithm's own first, then the learner's), and
    the record of the real steps it took (real_branch_gigpo's branches) and fed the critic. ``timer``:
    the two steps are charged to its ``advantages`` and ``update`` phases."""
    imagination = parts.run.imagination
    dreamt = imagined.trajectories
    if parts.critic is None and parts.counterfactual is None:  # a group estimator: cut dreams score nothing
        dreamt = [t for t in dreamt if not is_cut_imagined(t)]  # so they stay out of the loss (policy.advantages.cut_episodes)
    # Imagined rows weigh imagined_weight; with value_expansion they stay out and only shape the critic's targets.
    trajectories, weights = policy_batch(kept, dreamt, mode=imagination.mode,
                                         imagined_weight=imagination.imagined_weight)
    if not trajectories:  # empty only when dynamic sampling found no informative group
        return trajectories, {}, PhaseRecord()
    with timer.phase("advantages"):
        batch, advantages, value, advantage_metrics = estimate_advantages(parts, iteration, trajectories, weights,
                                                                          imagined, gate_open=progress.gate.is_open)
    branch_steps = int(advantage_metrics.get("oracle/env_steps", 0))  # played in the real env: on the x-axis
    with timer.phase("update"):
        stats = clipped_update(parts, iteration, batch, advantages, value,
                               real_env_steps=progress.real_env_steps + branch_steps)
    # With a critic, it was fitted on this update's real turns (and any imagined ones).
    record = PhaseRecord(real_env_steps=branch_steps, critic_real_steps=0 if value is None else count_env_steps(kept))
    return trajectories, {**advantage_metrics, **stats}, record


def log_iteration(
    parts: RunParts, progress: LoopProgress, iteration: int, metrics: dict[str, float], trajectories: list[Trajectory],
    timer: PhaseTimer,
) -> PhaseRecord:
    """7. Log against real env steps, with an evaluation when one is due, now and then a transcript
    of the update's first episode, and ``timer``'s phases so far. Returns the record of the logged row."""
    trainer, logger = parts.run.trainer, parts.logger
    due, marks = evaluation_due(iteration, last_iteration=trainer.iterations, eval_every=trainer.eval_every,
                                eval_every_steps=trainer.eval_every_steps,
                                steps_before=progress.history[-1]["charts/real_env_steps"],
                                steps_after=progress.real_env_steps)
    evaluations = []
    if due:
        eval_metrics, env_steps = evaluate_policy(parts, timer)
        evaluations.append(env_steps)
        metrics.update({**eval_metrics, **mark_metrics(marks)})
    if iteration % trainer.transcripts_every == 0 and trajectories:
        logger.log_text("samples/transcript", render_transcript(trajectories[0]), real_env_steps=progress.real_env_steps)
    metrics.update(timer.metrics())  # the iteration's phases so far (its evaluation included)
    logger.log(metrics, real_env_steps=progress.real_env_steps, iteration=iteration)
    return PhaseRecord(evaluations=evaluations,
                       history_row={"iteration": iteration, "charts/real_env_steps": progress.real_env_steps, **metrics})


def stop_here(
    parts: RunParts, progress: LoopProgress, iteration: int, timer: PhaseTimer, *, evaluated: bool
) -> tuple[bool, PhaseRecord]:
    """Whether to stop here (out of time or real steps), evaluating first if ``iteration`` was not;
    returns it and the record of that evaluation (empty if none)."""
    trainer = parts.run.trainer
    out_of_time = trainer.time_budget_s is not None and time.monotonic() - progress.start > trainer.time_budget_s
    out_of_steps = trainer.max_env_steps is not None and progress.real_env_steps >= trainer.max_env_steps
    out_of_steps = out_of_steps or progress.budget_cut is not None  # a rank's share ran out: all agreed on it
    stop = any_rank(parts.fabric, out_of_time or out_of_steps)  # rank clocks differ: stop together
    if not stop or evaluated:
        return stop, PhaseRecord()
    final, env_steps = evaluate_policy(parts, timer)
    parts.logger.log(final, real_env_steps=progress.real_env_steps, iteration=iteration)
    return stop, PhaseRecord(evaluations=[env_steps], final_figures=final)


def finish(parts: RunParts, progress: LoopProgress) -> dict[str, Any]:
    """Save the final models (rank 0) and return the run's summary, also written to ``summary.json``."""
    run, history = parts.run, progress.history
    parts.logger.close()
    if parts.rank0:
        save_models(parts, progress)
    summary = {
        "env": run.env.name, "algo": run.algo.name, "seed": run.seed, "iterations": history[-1]["iteration"],
        "real_env_steps": progress.real_env_steps, "warm_start_env_steps": progress.warm_start_env_steps,
        "initial_success": history[0]["eval/success_rate"], "final_success": history[-1].get("eval/success_rate"),
        "wall_s": time.monotonic() - progress.start, "cpu_seconds": progress.cpu_seconds(),
        "ledger": ledger_summary(progress.ledger, real_env_steps=progress.real_env_steps,
                                 warm_start_expert_steps=progress.warm_start_env_steps,
                                 warm_start_check_steps=progress.warm_start_check_steps),
    }
    if parts.imported:  # world_model.init, critic.init: where from, and the weights' hash as loaded
        summary["imported"] = {name: saved.as_record() for name, saved in parts.imported.items()}
    if progress.budget_cut is not None:  # trainer.max_env_steps stopped the last collection short
        summary["budget_cut"] = progress.budget_cut
    if parts.world_model is not None:
        summary["imagination"] = imagination_summary(history)
        if parts.rank0:
            print(format_imagination_summary(summary["imagination"]))
    if parts.rank0:
        (parts.run_dir / "summary.json").write_text(strict_dumps(summary, indent=2))
    return summary


@hydra.main(config_path="conf", config_name="train", version_base=None)
def main(cfg: DictConfig) -> None:
    if cfg.resume is not None:  # the saved config, or a refusal naming the keys the command line changes
        cfg = resume_config(cfg, list(HydraConfig.get().overrides.task), validate)
    run_job(cfg, validate, train)


if __name__ == "__main__":
    main()
