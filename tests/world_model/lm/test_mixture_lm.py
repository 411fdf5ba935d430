"""``MixtureLM`` as a causal LM: it hands the caller's position ids to every member and always asks each
for its KV cache; the reference mixes the members' own outputs by hand."""

from __future__ import annotations

import torch

from tests.world_model.lm.conftest import tiny_lm_world_model
from tests.world_model.lm.test_lm_world_model import mixture_by_hand
from world_model.kv_sampling import cache_keyword


def test_the_mixture_uses_the_callers_positions_and_asks_every_member_for_its_cache():
    model = tiny_lm_world_model(members=2, seed=3)
    for k in range(model.members.num_members):  # a config that would not return a cache unless asked
        model.members.model(k).config.use_cache = False
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])  # (B=2, P=4)
    mask = torch.ones_like(ids)
    # Position ids no default would give (all 0, and a reversed row): Llama's RoPE sees only their
    # differences, so a shifted arange would not tell them apart, but these do.
    positions = torch.tensor([[0, 0, 0, 0], [3, 2, 1, 0]])
    banned = sorted(set(model.codec.banned_ids))
    with torch.no_grad():
        out = model.mixture(ids, mask, positions, use_cache=True, logits_to_keep=1)
        member_logits = torch.stack([
            model.members.model(k)(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1]
            for k in range(model.members.num_members)])  # (K, B, V)
    assert out.logits.shape == (2, 1, member_logits.shape[-1])
    for b in range(2):
        want = mixture_by_hand(member_logits[:, b], banned)  # (V,)
        allowed = torch.isfinite(want)
        assert torch.allclose(out.logits[b, 0][allowed].double(), want[allowed], atol=1e-5)
        assert torch.isinf(out.logits[b, 0][~allowed]).all()
    caches = out["past_key_values"].caches
    assert len(caches) == 2 and all(cache is not None for cache in caches)
    assert cache_keyword(model.members.model(0)) in ("cache", "past_key_values")
