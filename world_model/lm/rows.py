"""Teacher-forced passes of every member over prompt + target rows: the LM world model's training
losses, outcome heads and disagreement all come from here.

Rows are left-padded (``left_pad``) so every row's last position is its target's last token: the
heads read the hidden state there, and the target tokens are the last ``len(target)`` positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from envs.token_positions import position_ids_for
from world_model.disagreement_score import row_score
from world_model.lm.members import Members
from world_model.lm.mixture import mixture_logprobs
from world_model.uncertainty import entropy


def left_pad(rows: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, T)`` ids and 0/1 mask of ``rows`` padded on the left with ``pad``."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        if row:
            ids[b, width - len(row) :] = torch.tensor(list(row), dtype=torch.long)
            mask[b, width - len(row) :] = 1
    return ids, mask


@dataclass(frozen=True)
class Scored:
    """Every member's reading of B rows."""

    token_nll: torch.Tensor  # (K,) each member's mean NLL per target token over all rows
    rewards: torch.Tensor  # (K, B) each member's reward head
    done_logits: torch.Tensor  # (K, B) each member's done head
    disagreement: torch.Tensor  # (B,) mutual information over the target tokens, pooled (no gradient)
    mixture_logps: torch.Tensor | None = None  # (B, L) log-prob of each target token under the sampled
    # distribution (members' mean softmax without the banned ids), right-aligned; with ``banned`` only


def score_rows(members: Members, heads: nn.ModuleList, prompts: Sequence[Sequence[int]],
               targets: Sequence[Sequence[int]], *, pad: int, device: torch.device,
               banned: torch.Tensor | None = None, score: str = "sum",
               row_weights: torch.Tensor | None = None) -> Scored:
    """Run each member over ``prompts[b] + targets[b]`` (every target non-empty); with ``banned`` (the
    ids sampling never emits) also the target tokens' log-probs under the sampled mixture. ``score``
    pools each row's per-token disagreement (``disagreement_score.row_score``). ``row_weights``
    ``(K, B)``, when given, weight member ``k``'s tokens of row ``b`` in its ``token_nll`` (a weighted
    mean per target token: row ``b`` counted ``row_weights[k, b]`` times)."""
    if len(prompts) != len(targets) or any(not t for t in targets):
        raise ValueError("score_rows needs one non-empty target per prompt")
    ids, mask = left_pad([[*p, *t] for p, t in zip(prompts, targets, strict=True)], pad)  # (B, T)
    ids, mask = ids.to(device), mask.to(device)
    lengths = torch.tensor([len(t) for t in targets], device=device)  # (B,)
    span = int(lengths.max())  # L
    wanted = ids[:, -span:]  # (B, L) target tokens, right-aligned
    scored = (torch.arange(span, device=device)[None, :] >= span - lengths[:, None]).float()  # (B, L)
    nlls, rewards, dones = [], [], []
    mix = torch.zeros(0)
    own_entropy = torch.zeros(0)
    kept = []  # (B, L, V) per member, banned ids removed, for the mixture
    for k in range(members.num_members):
        out = members.run(k, input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask),
                          use_cache=False, output_hidden_states=True, logits_to_keep=span + 1)
        logp = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)  # (B, L, V): predicts each target token
        token = -logp.gather(-1, wanted[..., None]).squeeze(-1)  # (B, L)
        if row_weights is None:
            nlls.append((token * scored).sum() / scored.sum())
        else:
            mass = scored * row_weights[k].to(device)[:, None]  # (B, L)
            nlls.append((token * mass).sum() / mass.sum().clamp(min=1e-12))
        reward, done = heads[k](out.hidden_states[-1][:, -1])  # (B,), (B,)
        rewards.append(reward)
        dones.append(done)
        with torch.no_grad():
            probs = logp.detach().exp()  # (B, L, V)
            mix = probs if k == 0 else mix + probs
            own_entropy = entropy(probs) if k == 0 else own_entropy + entropy(probs)
            if banned is not None:
                kept.append(out.logits[:, :-1].detach().float())
    count = members.num_members
    with torch.no_grad():
        information = (entropy(mix / count) - own_entropy / count).clamp(min=0.0)  # (B, L)
        disagreement = row_score(information, scored, score)  # (B,)
        mixture = None
        if banned is not None:
            logp = mixture_logprobs(torch.stack(kept), banned)  # (B, L, V)
            mixture = logp.gather(-1, wanted[..., None]).squeeze(-1).masked_fill(scored == 0, 0.0)  # (B, L)
    return Scored(torch.stack(nlls), torch.stack(rewards), torch.stack(dones), disagreement, mixture)
