"""3. Real collection: the iteration's real groups, played on training tasks and gathered from every rank."""

from __future__ import annotations

from envs import EnvFailure, Trajectory, collect
from experiments.build import RunParts, task_seeds
from experiments.distributed import Collection, gather_collection, shard
from experiments.evaluation import Evaluation, summarise
from experiments.fault_log import log_fault
from experiments.loop_progress import LoopProgress
from experiments.phase_record import PhaseRecord
from experiments.phase_timer import PhaseTimer, TimedAgent
from policy.dynamic_sampling import fill_with_informative_groups


def collect_real(
    parts: RunParts, progress: LoopProgress, iteration: int, n_real: int, timer: PhaseTimer
) -> tuple[Collection, Evaluation, PhaseRecord]:
    """3. Collect real rollouts on training tasks; groups share their start state. Every env step
    counts, also those of groups that dynamic sampling drops. Each process plays its share of the
    groups (ids counted from 0), then all gather the iteration's episodes. Returns them, what the
    policy achieved on them, and the record of the steps and ids they took. ``timer``: the policy's
    turns are charged to ``collect_policy``, the env's steps and collect's own work to ``collect_env``."""
    run, trainer, algo, fabric = parts.run, parts.run.trainer, parts.run.algo, parts.fabric
    local = Collection(collected=[], kept=[], faults=[], groups_used=0, trajectories_used=0, rounds=0)
    my_groups = shard(n_real, fabric.world_size, fabric.global_rank)

    def sample(round_index: int) -> list[Trajectory]:
        seeds = task_seeds(run, parts.env_kwargs, "train", n_real, "train", iteration, round_index)
        failures: list[EnvFailure] = []  # episodes whose env raised (trainer.on_env_error=skip)
        with timer.phase("collect_env"):  # the env's steps and collect's own work; the policy apart
            trajectories = collect(
                TimedAgent(parts.policy, timer, "collect_policy"), run.env.name, env_kwargs=parts.env_kwargs,
                group_size=trainer.group_size, max_turns=trainer.max_turns, progress=False,
                group_seeds=[seeds[g] for g in my_groups], first_group_id=local.groups_used,
                first_trajectory_id=local.trajectories_used,
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
    for fault in gathered.faults if parts.rank0 else []:
        log_fault(parts.logger, parts.run_dir, "faults/env_error", f"iteration {iteration}: {fault}",
                  real_env_steps=progress.real_env_steps)
    if gathered.collected and parts.rank0:
        parts.store.append(gathered.collected)
    rollout = summarise(gathered.collected)  # what the policy achieved, dropped groups included
    record = PhaseRecord(real_env_steps=rollout.env_steps, groups=gathered.groups_used,
                         trajectories=gathered.trajectories_used)
    return gathered, rollout, record


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
