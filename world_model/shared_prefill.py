"""The prompt prefill of a batch whose rows repeat prompts: each distinct prompt is run once.

A GRPO group's episodes all start from the same first prompt, and the prefill of a prompt costs far
more than a decode step, so the distinct prompt rows are run through the model alone and their KV
cache and last logits are then copied out to every row that repeats them (the cache's
``reorder_cache``, an index-select of batch rows, with repeated indices). A row's cache and logits are
those of its own prompt either way, so what it samples after does not depend on the sharing.
"""

from __future__ import annotations

import torch


def distinct_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct prompt rows of a left-padded batch: ``(first, source)``.

    ``first`` (D,): the first row of each distinct prompt, in order of appearance. ``source`` (B,): for
    each row, the index into ``first`` of its prompt, so ``input_ids[first][source] == input_ids``.
    Rows are the same prompt when both their ids and their masks agree (a real token may share the
    pad id). Both on ``input_ids``' device.
    """
    batch = input_ids.shape[0]
    rows = torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1)  # (B, 2P)
    _, label = torch.unique(rows, dim=0, return_inverse=True)  # (B,) a distinct prompt's sorted rank
    count = int(label.max()) + 1 if batch else 0
    index = torch.arange(batch, device=input_ids.device)  # (B,)
    first_of_label = torch.full((count,), batch, dtype=torch.long, device=input_ids.device)
    first_of_label = first_of_label.scatter_reduce(0, label, index, reduce="amin")  # (D,) by sorted rank
    order = first_of_label.argsort()  # (D,) sorted ranks in order of first appearance
    rank = torch.empty_like(order)
    rank[order] = torch.arange(count, device=input_ids.device)  # sorted rank -> order of appearance
    return first_of_label[order], rank[label]


def can_select_rows(cache) -> bool:
    """Whether ``cache`` selects batch rows by index (``reorder_cache``, which every ``transformers.Cache`` has)."""
    return callable(getattr(cache, "reorder_cache", None))


def prefill(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
            position_ids: torch.Tensor, *, key: str, share: bool = True) -> tuple[object, torch.Tensor]:
    """The prompt pass of a cached sampling loop: ``(cache, logits)``, the model's KV cache of the B rows
    and their (B, V) next-token logits.

    With ``share``, a batch that repeats prompts is run on its D < B distinct rows only and the cache
    (read under ``key``) and logits are expanded to the B rows. A cache without ``reorder_cache`` cannot
    be expanded: the B rows are then run as well (that distinct pass is wasted, which only a model
    whose cache cannot select rows pays).
    """
    if share:
        first, source = distinct_rows(input_ids, attention_mask)  # (D,), (B,)
        if len(first) < input_ids.shape[0]:
            out = model(input_ids=input_ids[first], attention_mask=attention_mask[first],
                        position_ids=position_ids[first], use_cache=True, logits_to_keep=1)
            cache = out[key]
            if can_select_rows(cache):
                cache.reorder_cache(source)  # (D, ...) -> (B, ...) rows, each its prompt's copy
                return cache, out.logits[:, -1].index_select(0, source)  # (B, V)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                use_cache=True, logits_to_keep=1)
    return out[key], out.logits[:, -1]  # (B, V)
