"""Learning curves of the world model on held-out transitions, against exact answers where known.

    python -m benchmarks.world_model [--models latent lm] [--envs ...]
        [--sizes 300 1000 3000 10000] [--steps 300 600 1200 2000] [--quick] [--out DIR]

``--models`` fits and scores each world model on the same data (``latent``, the default, and/or
``lm``, ``world_model.lm``), one row per model and size; every row also gives ``s/step`` (fit wall
seconds per optimiser step) and ``img/s`` (sampled ``step`` rows per wall second over the held-out
states). Scores go through the world-model seam; only the teacher-forced reads
(``models.teacher_forced``) know which model they ask.

Data. For each env and each number of real training transitions (``--sizes``), episodes are
collected with ``RandomAgent`` and ``ExpertAgent`` (alternating, one episode per seed) on
training-split seeds (``envs.splits``), and held-out episodes the same way (expert first) on
eval-split seeds (disjoint seed ranges; for random maps, rooms and catalogues also disjoint tasks). Smaller training
sets are prefixes of the largest (whole episodes, so a size is reached or slightly exceeded; the
actual count is printed). A fresh ``WorldModel`` is fitted per size for ``--steps`` optimiser
steps (batches of ``--batch-size`` episodes); ``fit_s`` is that fit's wall time.

Measures, on every held-out transition, from the latent of the true history before it:

- ``nll_text``: the model's NLL (nats) of the whole next observation (its words and ``</s>``)
  under the distribution ``WorldModel.step`` samples from (each member's softmax without the ids
  it never emits, averaged over members, token by token).
- ``match`` / ``rew`` / ``done``: ``WorldModel.step(greedy=True)``'s next observation exactly
  equal to the real one (word for word, after the word caps), its reward within half the gap
  between the env's rewards (0.5; minishop 0.1) and its done flag equal to the real one. Those
  heads read the latent after ``step`` folded in its own greedy observation; ``rew_tf`` and
  ``done_tf`` read them after the real observation instead, which tells a wrong head from a
  right head misled by a wrong observation.
- ``auroc``: ``Predictions.uncertainty`` (the members' mutual information on the emitted words of
  the greedy observation, pooled by the model's ``disagreement`` option, by default their sum
  over the words) as a score for the greedy observation being wrong; AUROC computed as the
  Mann-Whitney statistic (ties 1/2); ``-`` when no prediction (or none) was wrong. ``auroc_mean``:
  the same with the mean per word (the older score); ``unc_p50`` / ``unc_p90``: the median and
  90th percentile of ``Predictions.uncertainty``, the scale thresholds on it are set from.

Per env kind (``--envs``):

- ``frozen_lake`` (non-slippery, random 4x4 maps) and ``sokoban`` (6x6, one box), deterministic:
  also open-loop exact match ``ol@k``, k = 1..5: from each real history, the next k logged
  actions replayed through ``step`` (greedy, the model's own observations folded back in); the
  k-th imagined observation against the real one, over starts with k actions left. Targets, from at
  most 5,000 training transitions: one-step match >= 0.99, ``ol@5`` >= 0.95, reward and done accuracy 1.0.
- ``hidden_number`` (noiseless) and ``hidden_number_noisy`` (``noise=0.1``): ``nll_bayes``, the NLL
  of the env's exact Bayes predictive (``predictive_distribution``); the text ``guess k : answer``
  is fixed by the action except for its answer word, so that is also the text's distribution;
  ``nll_ans``, the model's NLL of the answer word alone given the true prefix.
- ``frozen_lake_slippery`` (random 4x4 maps, slippery): ``nll_exact``, the NLL of the env's exact
  next-observation distribution (``transition_probabilities()`` grouped by next cell). The env
  state at each held-out step is rebuilt by resetting with the episode's seed and replaying its
  actions (slips come from the seeded RNG; each replayed observation is checked).
  For both stochastic kinds ``ratio = nll_text / nll_exact``; target ratio <= 1.05 for hidden_number
  (from at most 3,000 transitions) and <= 1.10 for slippery frozen_lake (1.02 the long-term goal). At the largest
  size, the model's probability of every outcome class (hidden_number: each answer word given the
  true prefix; slippery frozen_lake: each reachable cell's whole grid) against whether it happened
  is binned into a reliability diagram, ``world_model_calibration.png`` (ECE in the legend).
- ``minishop``: ``nll_text`` and, on next observations the episode had already shown (back to
  search, an item page again, an option click that leaves the page as it was), ``rv_match``, the
  greedy exact match there, with their count; target >= 0.99.

Policy shift (deterministic envs and minishop): one more model is fitted on random-agent episodes
only (``--shift-size``, ``--shift-steps``) and scored on expert episodes (row ``rand>exp``): its
match and its AUROC, target >= 0.85, as for the curve's AUROC. For every target the report gives
the smallest training size at which it was met and that fit's CPU seconds (noting when the size or
an hour of one CPU thread is over the target's budget), or ``not met (best X at N)``. Writes ``world_model.png`` (the curves) into ``--out``.

Cost, measured in CPU seconds of one thread (``cpu_s``; wall time ``fit_s`` on a busy shared
machine was up to twice that): a fit step (32 episodes, default model) takes about 0.8 s on
hidden_number, 2.8 s on frozen_lake, 3.3 s on sokoban and 12 s on minishop (190-word pages), plus
a loss pass over the training set at the end of each fit. Scoring 500 held-out transitions takes
minutes: greedy decoding recomputes the whole prefix for every word, so minishop's pages and
sokoban's five open-loop steps cost most. The defaults (4100 steps per env, plus a 600-step shift
fit for frozen_lake, sokoban and minishop) come to about 28 CPU hours, 15 of them minishop's: run
envs as separate processes, or give minishop fewer steps. ``--quick`` (tiny sizes, steps and
model) takes seconds per env for hidden_number and frozen_lake and about a minute for sokoban and
minishop, whose untrained decoders write every observation up to the word cap. One fit seed per
size: no error bars.
"""

from benchmarks.world_model.cli import main
from benchmarks.world_model.data import ENVS, collect_pool, prefix, revisits
from benchmarks.world_model.metrics import auroc, reliability
from benchmarks.world_model.report import (
           format_ablation,
           format_costs,
           format_table,
           format_targets,
)
from benchmarks.world_model.run import Result, Row, run

__all__ = ["ENVS", "Result", "Row", "auroc", "collect_pool", "format_ablation", "format_costs",
           "format_table", "format_targets", "main", "prefix", "reliability", "revisits", "run"]
