"""Which rows form each PPO minibatch, and cutting a minibatch down to its longest row.

Rows are left-padded to the batch's longest row, and a padded position costs a forward and backward
pass like a real one. Two levers, both pure index arithmetic here:

- **Length buckets.** Each epoch the rows are shuffled, cut into buckets of ``length_buckets``
  minibatches, each bucket is sorted by row length and cut into minibatches, and the order of all
  the minibatches is shuffled. Rows of similar length then share a minibatch, while which rows meet
  stays random (a row's bucket-mates are drawn afresh every epoch). ``length_buckets=0`` is the plain
  shuffle: one random permutation per epoch, cut in order.
- **Trimming.** A minibatch drops its leading columns that are padding in every row, so it is as wide
  as its longest row. Positions come from the attention mask (``envs.token_positions.position_ids_for``)
  and padding is masked out of attention and of every loss, so the values are the same; only float
  rounding may move.
"""

from __future__ import annotations

import torch

from policy.batch import TokenBatch


def minibatch_indices(
    lengths: torch.Tensor,
    *,
    epochs: int,
    minibatch_size: int,
    length_buckets: int,
    generator: torch.Generator,
) -> list[list[torch.Tensor]]:
    """Per epoch, the row indices of its minibatches in the order they are trained; each epoch covers every row once.

    ``lengths``: ``(B,)`` non-pad tokens per row. Each epoch has ``ceil(B / minibatch_size)``
    minibatches; all hold ``minibatch_size`` rows but one, which holds the rest. Every random draw
    comes from ``generator``, so its seed fixes every minibatch. With ``length_buckets=0`` the draws and
    minibatches are exactly ``torch.randperm(B, generator=generator).split(minibatch_size)`` per epoch.
    """
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be (B,), got shape {tuple(lengths.shape)}")
    if epochs < 1 or minibatch_size < 1 or length_buckets < 0:
        raise ValueError(
            f"need epochs >= 1, minibatch_size >= 1 and length_buckets >= 0; got {epochs}, {minibatch_size}, "
            f"{length_buckets}"
        )
    rows = lengths.shape[0]
    lengths = lengths.cpu()
    per_epoch = []
    for _ in range(epochs):
        order = torch.randperm(rows, generator=generator)  # (B,)
        if length_buckets == 0:
            per_epoch.append(list(order.split(minibatch_size)))
            continue
        minibatches: list[torch.Tensor] = []
        for bucket in order.split(length_buckets * minibatch_size):  # (k * b,) rows, in random order
            by_length = torch.sort(lengths[bucket], stable=True).indices  # ties keep their random order
            minibatches.extend(bucket[by_length].split(minibatch_size))
        shuffled = torch.randperm(len(minibatches), generator=generator).tolist()
        per_epoch.append([minibatches[i] for i in shuffled])
    return per_epoch


def padding_columns(attention_mask: torch.Tensor) -> int:
    """How many leading columns of ``attention_mask`` ``(b, L)`` are 0 in every row (0 when no column is real)."""
    real = attention_mask.bool().any(dim=0)  # (L,)
    if not bool(real.any()):
        return 0  # nothing real to keep: leave the minibatch as it is
    return int(real.long().argmax())  # the first column some row uses


def trim_columns(batch: TokenBatch, start: int) -> TokenBatch:
    """``batch`` without its first ``start`` columns, as contiguous tensors (a compiled model would
    otherwise guard on, and recompile for, the column slice's strides and offset)."""
    return TokenBatch(
        input_ids=batch.input_ids[:, start:].contiguous(),
        attention_mask=batch.attention_mask[:, start:].contiguous(),
        response_mask=batch.response_mask[:, start:].contiguous(),
    )
