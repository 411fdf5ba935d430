"""Aligning per-position values with a turn's action tokens, on left-padded (prompt, action) rows.

``values[:, t]`` is the value of the state after reading tokens ``<= t``. For a row whose action
occupies columns ``s .. L-1`` (left padding, prompt, action):

- ``turn_values``: ``values[:, s - 1]``, the value of the state before the turn (after the
  prompt); what a turn critic gives.
- ``token_values``: at each response column ``t``, ``values[:, t - 1]``, the value of the
  state before token ``t`` was produced; 0 off the response. Its first response column equals the
  turn value, so token-level and turn-level GAE read the same critic.
"""

from __future__ import annotations

import torch


def first_response_column(response_mask: torch.Tensor) -> torch.Tensor:
    """Column of each row's first response token, ``(B,)`` long; raises if a row has none or starts at 0."""
    has_response = response_mask.bool().any(dim=-1)  # (B,)
    if not bool(has_response.all()):
        rows = (~has_response).nonzero().flatten().tolist()
        raise ValueError(f"response_mask has no response token on rows {rows}")
    first = response_mask.bool().long().argmax(dim=-1)  # (B,) argmax returns the first maximum
    if bool((first == 0).any()):
        rows = (first == 0).nonzero().flatten().tolist()
        raise ValueError(f"response starts at column 0 on rows {rows}: there is no state before the turn")
    return first


def turn_values(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Value of the state before each row's turn: the column just before its first response token.

    ``values`` and ``response_mask`` are ``(B, L)``; returns ``(B,)``.
    """
    before = first_response_column(response_mask) - 1  # (B,)
    return values.gather(1, before.unsqueeze(1)).squeeze(1)  # (B,)


def token_values(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Values aligned for token-level GAE: at response column ``t``, the value at ``t - 1``; 0 elsewhere.

    ``values`` and ``response_mask`` are ``(B, L)``; returns ``(B, L)``.
    """
    shifted = torch.cat([torch.zeros_like(values[:, :1]), values[:, :-1]], dim=1)  # (B, L)
    return shifted * response_mask.to(shifted.dtype)
