"""3. Real collection: the iteration's real groups, played on training tasks and gathered from every rank."""

from __future__ import annotations

from collections.abc import Callable

from envs import EnvFailure, Trajectory, collect, count_env_steps, make
from experiments.build import RunParts, task_seeds
from experiments.distributed import Collection, any_rank, gather_collection, shard
from experiments.evaluation import Evaluation, summarise
from experiments.fault_log import log_fault
from experiments.loop_progress import LoopProgress
from experiments.phase_record import PhaseRecord
from experiments.phase_timer import PhaseTimer, TimedAgent
from experiments.step_budget import StepBudget, budget_cut_entry, may_reach_budget, rank_step_budget
from policy.dynamic_sampling import fill_with_informative_groups


def collect_real(
    parts: RunParts, progress: LoopProgress, iteration: int, n_real: int, timer: PhaseTimer
) -> tuple[Collection, Evaluation, PhaseRecord]:
    """3. Collect real rollouts on training tasks; groups share their start state. Every env step
    counts, also those of groups that dynamic sampling drops. Each process plays its share of the
    groups (ids counted from 0), then all gather the iteration's episodes. Returns them, what the
    policy achieved on them, and the record of the steps and ids they took. Where the iteration
    could reach ``trainer.max_env_steps``, groups are played one by one and none is started once it
    is reached (``experiments.step_budget``); the record then says whether that cut any. ``timer``:
    the policy's turns are charged to ``collect_policy``, the env's steps and collect's own work to
    ``collect_env``."""
    run, trainer, algo, fabric = parts.run, parts.run.trainer, parts.run.algo, parts.fabric
    local = Collection(collected=[], kept=[], faults=[], groups_used=0, trajectories_used=0, rounds=0)
    my_groups = shard(n_real, fabric.world_size, fabric.global_rank)
    budget = step_budget(parts, progress, n_real)

    def play(group_seeds: list[int]) -> list[Trajectory]:
        failures: list[EnvFailure] = []  # episodes whose env raised (trainer.on_env_error=skip)
        with timer.phase("collect_env"):  # the env's steps and collect's own work; the policy apart
            trajectories = collect(
                TimedAgent(parts.policy, timer, "collect_policy"), run.env.name, env_kwargs=parts.env_kwargs,
                group_size=trainer.group_size, max_turns=trainer.max_turns, progress=False, group_seeds=group_seeds,
                first_group_id=local.groups_used, first_trajectory_id=local.trajectories_used,
                on_env_error=failures.append if trainer.on_env_error == "skip" else None,
                step_timeout_s=trainer.env_step_timeout_s,
            )
        local.groups_used += len(group_seeds)
        local.trajectories_used += len(trajectories) + len(failures)  # a failed episode's id stays used
        local.faults.extend(failures)
        for trajectory in trajectories:
            trajectory.iteration, trajectory.policy_version = iteration, parts.learner.num_updates
        local.collected.extend(trajectories)
        return trajectories

    def sample(round_index: int) -> list[Trajectory]:
        seeds = task_seeds(run, parts.env_kwargs, "train", n_real, "train", iteration, round_index)
        group_seeds = [seeds[g] for g in my_groups]
        return play(group_seeds) if budget is None else play_within(budget, play, group_seeds)

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
    cut = budget is not None and any_rank(fabric, budget.cut)  # the same on every rank
    record = PhaseRecord(real_env_steps=rollout.env_steps, groups=gathered.groups_used,
                         trajectories=gathered.trajectories_used,
                         budget_cut=budget_cut_entry(iteration, trainer.max_env_steps,
                                                     progress.real_env_steps + rollout.env_steps, n_real,
                                                     gathered.groups_used) if cut else None)
    return gathered, rollout, record


def step_budget(parts: RunParts, progress: LoopProgress, n_real: int) -> StepBudget | None:
    """This rank's allowance where the iteration's ``n_real`` groups could reach ``trainer.max_env_steps``;
    None where they cannot (every group is then played at once, as without a budget)."""
    trainer, fabric = parts.run.trainer, parts.fabric
    if trainer.max_env_steps is None:
        return None
    turn_cap = trainer.max_turns if trainer.max_turns is not None else make(parts.run.env.name, **parts.env_kwargs).max_turns
    rounds = 1 + parts.run.algo.max_resample_rounds if parts.run.algo.dynamic_sampling else 1  # most it may play
    if not may_reach_budget(progress.real_env_steps, trainer.max_env_steps, n_real * rounds,
                            trainer.group_size * turn_cap):
        return None
    steps_left = max(trainer.max_env_steps - progress.real_env_steps, 0)
    return StepBudget(allowed=rank_step_budget(steps_left, fabric.world_size, fabric.global_rank))


def play_within(budget: StepBudget, play: Callable[[list[int]], list[Trajectory]],
                group_seeds: list[int]) -> list[Trajectory]:
    """Play the groups one by one, in order, starting none once ``budget`` is spent (a started one finishes)."""
    trajectories: list[Trajectory] = []
    for seed in group_seeds:
        if budget.exhausted():
            budget.cut = True
            break
        played = play([seed])
        budget.spent += count_env_steps(played)
        trajectories.extend(played)
    return trajectories


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
