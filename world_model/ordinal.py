"""Ordinal number embeddings (``world_model.ordinal_numbers``): number words that know their order.

A word-level vocabulary gives "7" and "8" unrelated embeddings, so a rule such as "the hidden
number is above 7" has to be learned number by number. With the option on, every word that is an
integer gets a *thermometer* component added to its learned embedding: sort the distinct integer
values, give each one a learned step vector, and let a word's component be the sum of the steps of
every value up to and including its own. "n > g" is then a linear read-out (the steps above g are
in n's component, not in g's), and whatever one number teaches about order moves its neighbours too.
Steps start at zero, so a fresh model with the option on computes exactly what one without it does.

Non-integer words get no component. ``token_table`` is the one place where a module's effective
embedding table is formed; the encoder and the three decoding paths (plain forward, member-batched
fit, cached sampler) all read it, so they agree by construction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

INTEGER = re.compile(r"-?[0-9]+")
"""A word that is an integer: ASCII digits with an optional minus sign."""


def integer_value(word: str) -> int | None:
    """The integer a word spells (``"12"`` -> 12, ``"-3"`` -> -3), None for any other word."""
    return int(word) if INTEGER.fullmatch(word) else None


def value_ranks(values: Sequence[int | None]) -> list[int]:
    """Per token id, the 1-based rank of its integer value among the distinct values, 0 for non-integers.

    Words spelling the same value (``"7"``, ``"07"``) share a rank, hence a component.
    """
    distinct = sorted({v for v in values if v is not None})
    rank = {v: i + 1 for i, v in enumerate(distinct)}
    return [0 if v is None else rank[v] for v in values]


class OrdinalEmbedding(nn.Module):
    """Learned step vectors over the vocabulary's integer values -> the ``(V, d)`` thermometer component."""

    def __init__(self, values: Sequence[int | None], size: int) -> None:
        super().__init__()
        ranks = value_ranks(values)
        # A function of the vocabulary, rebuilt from the tokenizer: not saved with the weights.
        self.register_buffer("ranks", torch.tensor(ranks, dtype=torch.long), persistent=False)  # (V,)
        self.steps = nn.Parameter(torch.zeros(max(ranks, default=0), size))  # (N, d), zero: starts as off

    def forward(self) -> torch.Tensor:
        """``(V, d)``: row ``v`` is the sum of the steps of ranks ``1..rank(v)`` (zeros for rank 0)."""
        levels = F.pad(self.steps.cumsum(0), (0, 0, 1, 0))  # (N + 1, d), level 0 = no component
        return levels[self.ranks]  # (V, d)


def token_table(tokens: nn.Embedding, ordinal: OrdinalEmbedding | None) -> torch.Tensor:
    """The effective ``(V, d)`` embedding table: the learned word embeddings, plus the ordinal
    component when the option is on (without it, the embedding's own weight, untouched)."""
    if ordinal is None:
        return tokens.weight  # (V, d)
    return tokens.weight + ordinal()  # (V, d)
