"""The training run's ``eval/*`` figures: the policy on its held-out tasks, the same on every rank."""

from __future__ import annotations

import logging

from envs.seeding import derive_seed
from experiments.build import RunParts
from experiments.distributed import broadcast_json
from experiments.evaluation import evaluate
from experiments.phase_timer import PhaseTimer

log = logging.getLogger(__name__)  # Hydra writes it to the run's train.log, progress bar or not


def evaluate_policy(parts: RunParts, timer: PhaseTimer) -> tuple[dict[str, float], int]:
    """The ``eval/*`` figures on the run's held-out tasks, and their env steps (for the ledger, apart);
    rank 0's episodes are charged to ``timer``'s ``eval`` phase."""
    # Its own sampling stream: evaluating more or less often never changes training. Rank 0 plays every
    # episode and shares the figures, so the number does not depend on the number of processes.
    if not parts.rank0:
        metrics, env_steps = broadcast_json(parts.fabric, None)
    else:
        run = parts.run
        with timer.phase("eval"):
            result = evaluate(parts.policy.with_seed(derive_seed(run.seed, "eval-sampling")), run.env.name,
                              parts.env_kwargs, seeds=parts.eval_seeds, max_turns=run.trainer.max_turns)
        log.info(f"evaluation: success {result.success_rate:.3f}, invalid actions {result.invalid_action_rate:.3f} "
                 f"on {len(parts.eval_seeds)} held-out episodes")
        metrics, env_steps = broadcast_json(parts.fabric, [result.as_metrics("eval"), result.env_steps])
    return metrics, env_steps
