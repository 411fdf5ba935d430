"""Model-free controls matched to a model-based run: do its gains come from imagination, or from
smaller and more frequent policy updates per real step?

At imagined ratio r an update holds G groups of which G * (1 - r) are real (the loop carries the
fractional group over, so this is the long-run mean), and every update takes ``epochs`` passes of
minibatches of ``minibatch_size`` rows (one row per turn, real or imagined). Per real step that is
``epochs * G / (minibatch_size * G * (1 - r))`` optimizer steps (turns per episode cancel, imagined
episodes being as long as real ones; the last, smaller minibatch of a pass is not counted). The
controls, each model-free GRPO from the same preset:

- ``grpo_small_batch``: the model-based run's real groups per update (rounded to whole groups);
- ``grpo_matched_updates``: those groups, with epochs and minibatch size chosen so that its
  optimizer steps per real step equal the model-based run's exactly;
- ``grpo_reuse``: the preset's groups per update, with more epochs on the same data, as many as
  make its optimizer steps per real step equal the model-based run's.
"""

from __future__ import annotations

from fractions import Fraction

from experiments.config import Resolved

CONTROLS = ("grpo_small_batch", "grpo_matched_updates", "grpo_reuse")
MAX_MINIBATCH = 512  # the largest minibatch a matched control may take, in rows


def real_groups_per_update(run: Resolved) -> Fraction:
    """Real groups in an update, long-run mean: G * (1 - ratio) (all G for a model-free run)."""
    return run.trainer.groups_per_iteration * (1 - Fraction(str(run.imagination.ratio)))


def optimizer_steps_per_real_step(run: Resolved) -> Fraction:
    """``epochs * G / (minibatch_size * real groups)``: optimizer steps per real env step (module docstring)."""
    ppo = run.algo.ppo
    return Fraction(ppo.epochs * run.trainer.groups_per_iteration) / (ppo.minibatch_size * real_groups_per_update(run))


def epochs_and_minibatch(rate: Fraction, epochs: int) -> tuple[int, int]:
    """Integers (epochs, minibatch_size) with epochs / minibatch_size == ``rate`` (a model-free run's
    optimizer steps per real step, per row): ``epochs`` itself when that gives a whole minibatch size,
    else the smallest fraction, scaled to at least ``epochs`` passes."""
    minibatch = Fraction(epochs) / rate
    if minibatch.denominator == 1:
        return epochs, int(minibatch)
    scale = -(-epochs // rate.numerator)  # ceil: at least as many passes as the reference
    if rate.denominator * scale > MAX_MINIBATCH:
        raise ValueError(f"no whole minibatch size up to {MAX_MINIBATCH} gives {rate} optimizer steps per real step")
    return rate.numerator * scale, rate.denominator * scale


def control_overrides(reference: Resolved, control: str) -> list[str]:
    """The overrides that turn the preset into ``control``, matched to the model-based ``reference``."""
    if not reference.imagination.enabled:
        raise ValueError("a control is matched to a model-based run (imagination.ratio > 0)")
    groups = round(real_groups_per_update(reference))
    rate = optimizer_steps_per_real_step(reference)
    base = ["algo=grpo", "imagination=model_free"]
    if control == "grpo_small_batch":
        return [*base, f"trainer.groups_per_iteration={groups}"]
    if control == "grpo_matched_updates":
        epochs, minibatch = epochs_and_minibatch(rate, reference.algo.ppo.epochs)
        return [*base, f"trainer.groups_per_iteration={groups}", f"algo.ppo.epochs={epochs}",
                f"algo.ppo.minibatch_size={minibatch}"]
    if control == "grpo_reuse":
        epochs = rate * reference.algo.ppo.minibatch_size  # at the preset's G groups, all real
        if epochs.denominator != 1:
            raise ValueError(f"grpo_reuse needs a whole number of epochs, got {epochs}")
        return [*base, f"algo.ppo.epochs={int(epochs)}"]
    raise ValueError(f"unknown control {control!r}; one of {CONTROLS}")
