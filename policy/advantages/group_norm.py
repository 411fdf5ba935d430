"""Grouping and in-group normalisation shared by GRPO, GiGPO and HGPO.

Keys are arbitrary hashables grouped on the Python side (N is thousands of rows at most); the
statistics themselves are tensor reductions.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

NORM_MODES = ("mean_std_norm", "mean_norm")
SINGLETON_RULES = ("raw", "zero")


def check_option(name: str, value: object, valid: Sequence[object]) -> None:
    """Raise ``ValueError`` naming the option and its valid values when ``value`` is not one of them."""
    if value not in valid:
        raise ValueError(f"{name}={value!r} is not valid; choose one of {tuple(valid)}")


def group_index(keys: torch.Tensor | Sequence[Hashable], device: torch.device | None = None) -> tuple[torch.Tensor, int]:
    """Dense group ids ``0..G-1`` (in order of first appearance) for per-row keys, and ``G``.

    ``keys`` is a 1-D tensor or a sequence of hashables (ints, strings, tuples of them).
    """
    if isinstance(keys, torch.Tensor):
        if keys.dim() != 1:
            raise ValueError(f"group keys must be 1-D, got shape {tuple(keys.shape)}")
        keys = keys.tolist()
    dense: dict[Hashable, int] = {}
    index = [dense.setdefault(key, len(dense)) for key in keys]
    return torch.tensor(index, dtype=torch.long, device=device), len(dense)


def normalise_in_groups(
    values: torch.Tensor,
    keys: torch.Tensor | Sequence[Hashable],
    *,
    mode: str = "mean_std_norm",
    ddof: int = 1,
    eps: float = 1e-6,
    singleton: str = "raw",
    stat_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """Normalise each value against the other values that share its key.

    values: (N,) float. keys: (N,) tensor or length-N sequence of hashables.
    stat_rows: optional (N,) bool; only these rows enter the group statistics (every row, selected
    or not, is normalised with its group's statistics). Every group needs at least one stat row.

    Per group, over its stat rows (n of them):
      - ``mode="mean_std_norm"``: ``(v - mean) / (std + eps)``, std with ``ddof`` (1 = sample std,
        0 = population std), ``eps`` added to the std, not under a square root (verl, verl-agent).
      - ``mode="mean_norm"``: ``v - mean`` (Dr. GRPO; GiGPO/HGPO ``mean_norm``).
      - n == 1, ``singleton="raw"``: verl's rule, mean taken as 0 and std as 1 in the formula above,
        so the row gets ``v`` under ``mean_norm`` and ``v / (1 + eps)`` under ``mean_std_norm``
        (exactly verl's arithmetic; the raw score when ``eps=0``). ``singleton="zero"``: 0.
      - n >= 2 and all stat values equal: every row of the group gets exactly 0 (never NaN, also
        with ``eps=0``, and not the rounding residue of ``v - mean``).

    Statistics are computed in float64 on detached values (advantages carry no gradient); the
    result has the dtype and device of ``values``.
    """
    check_option("mode", mode, NORM_MODES)
    check_option("singleton", singleton, SINGLETON_RULES)
    check_option("ddof", ddof, (0, 1))
    if values.dim() != 1:
        raise ValueError(f"values must be 1-D (N,), got shape {tuple(values.shape)}")
    n_rows = values.shape[0]
    gid, n_groups = group_index(keys, device=values.device)  # (N,)
    if gid.shape[0] != n_rows:
        raise ValueError(f"{gid.shape[0]} keys for {n_rows} values")
    if n_rows == 0:
        return values.clone()
    v = values.detach().to(torch.float64)  # (N,)
    stat = torch.ones(n_rows, dtype=torch.bool, device=v.device) if stat_rows is None else stat_rows.to(v.device).bool()
    w = stat.to(torch.float64)  # (N,)

    count = torch.zeros(n_groups, dtype=torch.float64, device=v.device).index_add_(0, gid, w)  # (G,)
    if bool((count == 0).any()):
        raise ValueError("every group needs at least one row in stat_rows")
    mean = torch.zeros_like(count).index_add_(0, gid, v * w) / count  # (G,)
    sq_dev = (v - mean[gid]) ** 2 * w  # (N,)
    var = torch.zeros_like(count).index_add_(0, gid, sq_dev) / (count - ddof).clamp(min=1)  # (G,)
    std = var.sqrt()  # (G,)
    big = torch.finfo(torch.float64).max
    high = torch.full_like(count, -big).scatter_reduce(0, gid, torch.where(stat, v, -big), "amax")  # (G,)
    low = torch.full_like(count, big).scatter_reduce(0, gid, torch.where(stat, v, big), "amin")  # (G,)

    single = count == 1  # (G,)
    if singleton == "raw":
        mean = torch.where(single, 0.0, mean)
        std = torch.where(single, 1.0, std)
    centred = v - mean[gid]  # (N,)
    out = centred / (std[gid] + eps) if mode == "mean_std_norm" else centred
    zero = (~single & (high == low))[gid]  # (N,) rows of all-equal groups
    if singleton == "zero":
        zero = zero | single[gid]
    out = torch.where(zero, 0.0, out)
    return out.to(values.dtype if values.is_floating_point() else torch.get_default_dtype())
