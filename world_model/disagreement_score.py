"""One disagreement score per observation from the members' per-token disagreement.

The per-token score is the members' mutual information (``uncertainty.mutual_information``). An
observation has many tokens, and how they are pooled sets the scale of everything that thresholds
the result (an imagined step's halt, its reward penalty, the fallback of counterfactual groups):

- ``"sum"`` (the default): the total over the tokens, the members' disagreement about the whole
  observation (nats). Tokens the members agree on add nothing, so an observation's length does not
  set the scale: one doubtful cell scores the same in a 16-token grid and in a 64-token one, and
  one threshold means the same amount of doubt on a one-line tool answer and on a page. Two
  doubtful tokens score twice one (a repeated pattern counts again). Within an env it ranks
  observations like the mean: as a score for a wrong greedy one-step prediction on frozen_lake's
  random 4x4 maps, both have AUROC 0.836 and the max 0.808 (the default decoder with the copy path
  after 300 fit steps; ``python -m benchmarks.disagreement_scale --env frozen_lake --env-kwargs
  '{"size": 4}' --size default --copy-observation --episodes 300``; docs/algorithms.md has more
  settings). Its caveat: a small disagreement left on every token of a long page adds up.
- ``"max"``: the largest per-token value: an observation is as doubtful as its most doubtful token.
  Padding with agreed tokens and repeating the pattern both leave it unchanged, but it ignores how
  many tokens are doubtful, and ranked frozen_lake's wrong predictions worse.
- ``"mean"``: the mean over the tokens, the score used before. The same single doubtful token
  scores ``u / n`` in an ``n``-token observation, so its scale shrinks with the observation's
  length and a threshold tuned on one env means something else on another.
"""

from __future__ import annotations

import torch

SCORES = ("max", "mean", "sum")
"""The names ``row_score`` accepts."""


def check_score(name: object, key: str = "disagreement") -> str:
    """``name`` if it is one of :data:`SCORES`; a ValueError naming ``key`` otherwise."""
    if name not in SCORES:
        raise ValueError(f"{key} must be one of {SCORES}, got {name!r}")
    return str(name)


def row_score(per_token: torch.Tensor, mask: torch.Tensor, score: str) -> torch.Tensor:
    """``(B, S)`` per-token disagreement (>= 0) and ``(B, S)`` 0/1 mask of the scored tokens -> ``(B,)``.

    A row without a scored token scores 0.
    """
    check_score(score, "score")
    mask = mask.to(per_token.dtype)  # (B, S)
    if per_token.shape[-1] == 0:
        return per_token.new_zeros(per_token.shape[0])
    if score == "max":  # per-token values are >= 0, so a masked 0 changes no maximum
        return (per_token * mask).amax(dim=-1)  # (B,)
    if score == "sum":
        return (per_token * mask).sum(-1)  # (B,)
    return (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)


def scattered_score(per_token: torch.Tensor, rows: torch.Tensor, num_rows: int, score: str) -> torch.Tensor:
    """``(N,)`` per-token disagreement of tokens that belong to ``(N,)`` rows -> ``(num_rows,)``.

    The same pooling as :func:`row_score`, for tokens listed flat (as generation writes them); a row
    with no token scores 0.
    """
    check_score(score, "score")
    zeros = per_token.new_zeros(num_rows)  # (B,)
    if score == "max":  # per-token values are >= 0, so starting from 0 changes no maximum
        return zeros.scatter_reduce(0, rows, per_token, reduce="amax", include_self=True)
    total = zeros.index_add(0, rows, per_token)  # (B,)
    if score == "sum":
        return total
    count = torch.bincount(rows, minlength=num_rows).clamp(min=1)  # (B,)
    return total / count
