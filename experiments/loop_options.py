"""Run options the training loop cannot serve together, refused before anything is built."""

from __future__ import annotations

from experiments.config import Resolved
from imagination.value_expansion import check_value_expansion

FULL_PRECISION = ("32-true", "32", "64-true", "64")  # where sampling's log-probs are the learner's (algo.ppo.old_logp)


def check_loop_options(run: Resolved) -> None:
    """Refuse, before anything is built, the combinations the loop cannot serve."""
    algo, trainer = run.algo, run.trainer
    check_value_expansion(run.imagination.mode, run.imagination.enabled, algo.name, algo.value_level,
                          run.imagination.warmup_iterations)
    if algo.ppo.old_logp == "sampling" and trainer.precision not in FULL_PRECISION:
        raise ValueError(f"algo.ppo.old_logp=sampling needs full precision (trainer.precision one of {FULL_PRECISION}), "
                         f"got trainer.precision={trainer.precision}: sampling runs outside the learner's autocast, so "
                         "its log-probs are not the learner's; set algo.ppo.old_logp=recompute")

