"""The ensemble as one causal LM for ``world_model.kv_sampling.sample_with_cache``.

``MixtureLM`` answers the sampling loop's calls (``input_ids``, ``attention_mask``, ``position_ids``,
``use_cache``, ``logits_to_keep`` and a cache) by running every member on the same tokens with its
own KV cache and returning the log of the members' mean next-token distribution, banned ids
removed: the distribution the latent model's ensemble samples from too. Its cache holds the
members' caches and drops rows from each (``reorder_cache``), so finished rows leave every member.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from world_model.kv_sampling import cache_keyword
from world_model.lm.members import Members


class EnsembleCache:
    """The members' KV caches, one per member, selected by batch row together."""

    def __init__(self, caches: list) -> None:
        self.caches = caches

    def reorder_cache(self, rows: torch.Tensor) -> None:
        for cache in self.caches:
            cache.reorder_cache(rows)


class MixtureOutput(dict):
    """What a Hugging Face causal LM returns, as far as the sampling loop reads it."""

    @property
    def logits(self) -> torch.Tensor:
        return self["logits"]


def mixture_logprobs(member_logits: torch.Tensor, banned: torch.Tensor | None) -> torch.Tensor:
    """``(K, ..., V)`` member logits -> ``(..., V)`` log of the mean of the members' softmax, each
    renormalised without the ``banned`` ids (which get -inf)."""
    logits = member_logits.float()
    if banned is not None and banned.numel():
        logits = logits.index_fill(-1, banned.to(logits.device), float("-inf"))
    return torch.logsumexp(torch.log_softmax(logits, dim=-1), dim=0) - math.log(logits.shape[0])


class MixtureLM(torch.nn.Module):
    """Members' mixture as one causal LM (see the module docstring); holds no weights of its own."""

    def __init__(self, members: Members, banned_ids: Sequence[int]) -> None:
        super().__init__()
        self._members = [members]  # a list: not a submodule, nothing is saved or moved twice
        device = next(members.parameters()).device
        self.banned = torch.tensor(sorted(set(banned_ids)), dtype=torch.long, device=device)

    def forward(self, input_ids, attention_mask, position_ids, use_cache=True, logits_to_keep=1,
                past_key_values=None) -> MixtureOutput:
        members = self._members[0]
        caches, logits = [], []
        for k in range(members.num_members):
            model = members.model(k)
            key = cache_keyword(model)
            extra = {} if past_key_values is None else {key: past_key_values.caches[k]}
            out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                        use_cache=True, logits_to_keep=logits_to_keep, **extra)
            caches.append(out[key])
            logits.append(out.logits[:, -1])  # (A, V)
        mixed = mixture_logprobs(torch.stack(logits), self.banned)  # (A, V)
        return MixtureOutput(logits=mixed[:, None], past_key_values=EnsembleCache(caches))
