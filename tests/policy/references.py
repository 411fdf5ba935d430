"""Brute-force references shared by the advantage tests: loops and dicts, no tensors, written
from the convention text in docs/conventions.md rather than from the implementation."""

import math


def ref_group_norm(values, keys, *, mode, ddof, eps, singleton, stat=None):
    """Per-key (v - mean) / (std + eps) or v - mean; all-equal group -> 0; singleton raw or zero."""
    stat = stat or [True] * len(values)
    members = {}
    for v, k, s in zip(values, keys, stat, strict=True):
        if s:
            members.setdefault(k, []).append(v)
    out = []
    for v, k in zip(values, keys, strict=True):
        vals = members[k]
        n = len(vals)
        if n == 1:
            if singleton == "zero":
                out.append(0.0)
                continue
            mean, std = 0.0, 1.0
        elif max(vals) == min(vals):
            out.append(0.0)
            continue
        else:
            mean = sum(vals) / n
            std = math.sqrt(sum((x - mean) ** 2 for x in vals) / (n - ddof))
        out.append((v - mean) / (std + eps) if mode == "mean_std_norm" else v - mean)
    return out
