"""Micro-batches of a PPO minibatch: which rows each holds, and its share of each loss's denominator.

A minibatch too large for memory is cut into contiguous micro-batches of at most ``micro_batch_size`` rows
(neighbours in a length-bucketed minibatch have similar lengths, so each trims little padding). Each is run
forward and backward on its own and the gradients add up, so each micro-batch's loss is scaled by its share
of the minibatch's denominator: the loss of a micro-batch is a mean over its own rows or tokens, and
``sum_i share_i * mean_i`` is the mean over the whole minibatch. Which denominator a term has depends on
how it is aggregated (``policy.losses.aggregate``):

- ``token-mean`` terms and every token statistic (approx_kl, clipfrac, entropy): response tokens;
- ``seq-mean-*`` terms: sequences with at least one response token (``seq-mean-token-sum-norm``'s
  divisor is a constant, ``loss_scale_factor``, so it does not change the share);
- the sequence- and turn-level value losses: rows with value mask 1.

A micro-batch whose denominator is empty has loss 0 (the losses never divide by 0), and an empty
minibatch gives every micro-batch share 0, matching the minibatch's loss of 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Which share each per-step metric of the learner is combined with (see ``metric_share``).
TOKEN_METRICS = ("losses/approx_kl", "losses/clipfrac", "losses/clipfrac_lower", "losses/entropy")
AGG_METRICS = ("losses/policy_loss", "losses/kl_ref")


@dataclass(frozen=True)
class Shares:
    """One micro-batch's fraction of its minibatch's denominators."""

    tokens: float
    """Its response tokens / the minibatch's."""
    sequences: float
    """Its rows with at least one response token / the minibatch's."""
    value_rows: float
    """Its rows with value mask 1 / the minibatch's (0 without a value mask)."""

    def of_agg(self, agg: str) -> float:
        """The share of a term aggregated with ``agg`` over the response tokens."""
        return self.tokens if agg == "token-mean" else self.sequences

    def of_value(self, level: str, agg: str) -> float:
        """The share of the value loss at ``level``: token-level values are aggregated like the policy
        loss; sequence- and turn-level ones are a mean over the value mask's rows."""
        return self.of_agg(agg) if level == "token" else self.value_rows


def micro_rows(idx: torch.Tensor, micro_batch_size: int | None) -> list[torch.Tensor]:
    """``idx`` (b,) cut into contiguous chunks of at most ``micro_batch_size`` rows; all of it when None."""
    if micro_batch_size is None:
        return [idx]
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1 or None, got {micro_batch_size}")
    return list(idx.split(micro_batch_size))


def _fractions(counts: list[float]) -> list[float]:
    total = sum(counts)
    return [count / total if total > 0 else 0.0 for count in counts]


def micro_batch_shares(
    tokens_per_row: torch.Tensor, value_mask: torch.Tensor | None, sizes: list[int]
) -> list[Shares]:
    """The shares of consecutive micro-batches of ``sizes`` rows of one minibatch.

    ``tokens_per_row``: (b,) response tokens per row; ``value_mask``: (b,) 0/1 or None; ``sizes`` sums to b.
    """
    if sum(sizes) != len(tokens_per_row) or any(size < 1 for size in sizes):
        raise ValueError(f"micro-batch sizes {sizes} must be >= 1 and sum to the minibatch's {len(tokens_per_row)} rows")
    tokens = [float(part.sum()) for part in tokens_per_row.double().split(sizes)]
    sequences = [float((part > 0).sum()) for part in tokens_per_row.split(sizes)]
    rows = [0.0] * len(sizes) if value_mask is None else [float(part.sum()) for part in value_mask.double().split(sizes)]
    return [Shares(*share) for share in zip(_fractions(tokens), _fractions(sequences), _fractions(rows), strict=True)]


def metric_share(key: str, shares: Shares, agg: str, value_level: str | None) -> float:
    """The share with which the micro-batch's metric ``key`` adds into its minibatch's.

    Token statistics are token means; the policy loss and KL follow ``agg``; the value loss follows its
    level, and the value clip fraction is a mean over the value loss's mask (response tokens at token
    level, value-mask rows otherwise)."""
    if key in TOKEN_METRICS:
        return shares.tokens
    if key in AGG_METRICS:
        return shares.of_agg(agg)
    if key == "losses/value_loss":
        return shares.of_value(value_level, agg)
    if key == "losses/value_clipfrac":
        return shares.tokens if value_level == "token" else shares.value_rows
    raise KeyError(f"no micro-batch share is defined for the metric {key!r}")
