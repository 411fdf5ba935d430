"""6. The clipped policy update, each process on its share of the batch's rows."""

from __future__ import annotations

import torch

from experiments.build import RunParts
from experiments.distributed import check_replicas_agree, rows_of_rank, value_rows
from experiments.fault_log import log_fault
from policy.rollout_batch import RolloutBatch
from policy.value_targets import ValueTargets


def clipped_update(
    parts: RunParts, iteration: int, batch: RolloutBatch, advantages: torch.Tensor, value: ValueTargets | None,
    *, real_env_steps: int,
) -> dict[str, float]:
    """6. Clipped policy update. Old log-probs: those recorded while sampling (every row of the batch,
    real or imagined, was sampled by this policy since its last update), or recomputed by the
    learner's own Fabric module (algo.ppo.old_logp). A skipped non-finite step is logged as a
    fault at ``real_env_steps``."""
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
                  "and were skipped", real_env_steps=real_env_steps)
    return stats
