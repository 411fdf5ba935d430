"""4. Imagination: the update's imagined groups, played by the policy in the world model from real states."""

from __future__ import annotations

from collections.abc import Iterable

from envs import Trajectory
from envs.seeding import derive_seed
from experiments.build import RunParts
from experiments.distributed import gather_imagined, rank_seed, shard
from experiments.loop_progress import LoopProgress
from experiments.phase_timer import PhaseTimer, TimedAgent, TimedWorldModel
from imagination.branching import sample_branch_points
from imagination.dream_starts import task_start_points
from imagination.imagine import ImaginedGroups, imagine_groups
from imagination.value_expansion import expansion_branches, plan_expansion


def imagine(
    parts: RunParts, progress: LoopProgress, iteration: int, kept: list[Trajectory], n_imagined: int,
    recent: Iterable[Trajectory], timer: PhaseTimer,
) -> ImaginedGroups:
    """``n_imagined`` groups' worth of imagined episodes branched from ``recent`` real episodes (or,
    with value_expansion, from this update's ``kept`` ones; with ``imagination.open_at_start`` and no
    real episode with a turn yet, from training tasks' start states), ids taken after every id used so far.
    Branch points are drawn from ``progress.branch_rng``; the ids are the caller's to mark used.
    ``timer``: the policy's turns go to ``imagine_policy``, the model's steps to ``imagine_model``, the
    rest of the imagining to ``imagine_other``."""
    run, fabric = parts.run, parts.fabric
    imagination, group_size = run.imagination, run.trainer.group_size
    if imagination.mode == "value_expansion":  # continue this update's real turns, same episode budget
        branches, group_size = plan_expansion(expansion_branches(kept), n_imagined * group_size, progress.branch_rng)
    elif imagination.open_at_start and not any(t.turns and t.source == "real" for t in recent):
        # nothing real to branch from yet (a run opened at start): the training tasks' start states
        branches = task_start_points(run.env.name, parts.env_kwargs, n_imagined,
                                     seed=derive_seed(run.seed, "task-starts", iteration))
    else:
        branches = sample_branch_points(list(recent), n_imagined, start_share=imagination.start_share,
                                        rng=progress.branch_rng)
    with timer.phase("imagine_other"):  # branching and collect's own work; the policy and the model apart
        imagined = imagine_groups(  # this process's share of the branches; ids counted from 0
            TimedAgent(parts.policy, timer, "imagine_policy"), TimedWorldModel(parts.world_model, timer, "imagine_model"),
            run.env.name, parts.env_kwargs,
            [branches[b] for b in shard(len(branches), fabric.world_size, fabric.global_rank)], group_size=group_size,
            config=imagination, seed=rank_seed(derive_seed(run.seed, "dream", iteration), fabric.global_rank),
            max_turns=run.trainer.max_turns, success_reward=run.env.success_reward,
        )
    imagined = gather_imagined(fabric, imagined, branches, first_group=progress.next_ids["group"],
                               first_trajectory=progress.next_ids["trajectory"])
    for trajectory in imagined.trajectories:
        trajectory.iteration, trajectory.policy_version = iteration, parts.learner.num_updates
    return imagined
