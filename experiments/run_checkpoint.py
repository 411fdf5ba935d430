"""A training run's checkpoints: what one holds besides the loop's counters, written and read back."""

from __future__ import annotations

import random

import torch

from experiments.budget_extension import pinned_checkpoint
from experiments.build import RunParts
from experiments.checkpoint import Checkpoint, save_checkpoint
from experiments.loop_progress import LoopProgress
from experiments.policy_folder import save_policy
from experiments.resume import (
    CHECKPOINTS,
    capture_rng,
    config_record,
    count_lines,
    restore_rng,
    trajectories_by_id,
)


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
    root = parts.run_dir / CHECKPOINTS
    pinned = pinned_checkpoint(root, iteration, stopped, progress.history, parts.run)  # for a budget extension
    save_checkpoint(root, Checkpoint(config_record(parts.run), loop, state),
                    write_extra=lambda folder: save_policy(parts.policy, folder), pinned=pinned)


def restore_parts(parts: RunParts, progress: LoopProgress, checkpoint: Checkpoint) -> int:
    """Every weight and RNG stream as they were after the checkpoint's iteration (the loop's counters
    are ``LoopProgress.restore``'s); returns the first iteration to run."""
    loop, saved = checkpoint.loop, checkpoint.state
    if parts.counterfactual is not None:  # its critic's data
        parts.counterfactual.recent.extend(trajectories_by_id(parts.store, loop.imagination["counterfactual_recent_ids"]))
    parts.learner.load_state_dict(saved["learner"])
    modules, generators, randoms = checkpointed_state(parts, progress)
    for name, module in modules.items():
        if module is not None:
            module.load_state_dict(saved[name])
    restore_rng(saved["rng"], generators, randoms)
    return parts.run.trainer.iterations + 1 if loop.stopped else loop.iteration + 1
