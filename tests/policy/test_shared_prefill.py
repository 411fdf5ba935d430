"""Shared prefill: rows that repeat a prompt are prefilled once, and sample what they would unshared.

References: the distinct rows of a batch by a dict over the rows' tuples; the tokens of the shared
path against the same call with ``share_prefill=False`` (every row prefilled, the path that was
checked against a plain uncached loop in ``test_kv_sampling``), on the same uniforms; log-probs also
against one full forward pass over prompt + action.
"""

from __future__ import annotations

import pytest
import torch

from policy.config import PolicyConfig
from policy.encode import encode_prompts, left_pad, prompt_ids
from policy.lm_policy import LMPolicy
from tests.policy.test_kv_sampling import (
    EOS,
    MAX_TOKENS,
    PAD,
    PROMPTS,
    TOKENIZER,
    batch_sizes,
    full_forward_logprobs,
    make_model,
    stop_at_positions,
)
from world_model.kv_sampling import cache_keyword, sample_with_cache
from world_model.shared_prefill import distinct_rows

# Three groups of prompts of different lengths (8, 10 and 13 tokens), interleaved, one of them alone.
GROUPED = [PROMPTS[3]] * 4 + [PROMPTS[5]] * 3 + [PROMPTS[3], PROMPTS[8], PROMPTS[5]]


def by_hand(input_ids, attention_mask):
    """(first, source) from a dict keyed by each row's (ids, mask) tuple, in order of first appearance."""
    firsts: dict[tuple, int] = {}
    for b, (ids, mask) in enumerate(zip(input_ids.tolist(), attention_mask.tolist(), strict=True)):
        firsts.setdefault((tuple(ids), tuple(mask)), b)
    order = list(firsts)
    source = [order.index((tuple(ids), tuple(mask)))
              for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True)]
    return list(firsts.values()), source


def test_distinct_rows_by_hand():
    # pad 0; row 4 is row 0's ids with its 0 a real token (mask 1): another prompt
    ids = torch.tensor([[0, 5, 6], [7, 5, 6], [0, 5, 6], [9, 9, 9], [0, 5, 6], [7, 5, 6], [9, 9, 9]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]])
    first, source = distinct_rows(ids, mask)
    assert first.tolist() == [0, 1, 3, 4]
    assert source.tolist() == [0, 1, 0, 2, 3, 1, 2]
    assert torch.equal(ids[first][source], ids) and torch.equal(mask[first][source], mask)
    first, source = distinct_rows(ids[[3, 3, 3]], mask[[3, 3, 3]])
    assert first.tolist() == [0] and source.tolist() == [0, 0, 0]


@pytest.mark.parametrize("seed", range(5))
def test_distinct_rows_match_a_dict_over_the_rows(seed):
    generator = torch.Generator().manual_seed(seed)
    pool_ids = torch.randint(0, 3, (4, 5), generator=generator)  # few values: near-duplicate rows
    pool_mask = (torch.arange(5)[None, :] >= torch.randint(0, 3, (4, 1), generator=generator)).long()
    pick = torch.randint(0, 4, (12,), generator=generator)
    ids, mask = pool_ids[pick], pool_mask[pick]
    first, source = distinct_rows(ids, mask)
    assert (first.tolist(), source.tolist()) == by_hand(ids, mask)


def run(model, prompts, *, greedy, share, seed=0):
    ids, mask = encode_prompts(TOKENIZER, prompts, max_prompt_tokens=64)  # (B, P)
    uniforms = torch.rand((len(prompts), MAX_TOKENS), generator=torch.Generator().manual_seed(seed))
    sizes, handle = batch_sizes(model)
    with torch.no_grad():
        out = sample_with_cache(
            model, ids, mask, max_tokens=MAX_TOKENS, eos=EOS, pad=PAD,
            weights=None if greedy else (lambda logits: torch.softmax(logits.float(), dim=-1)),
            uniforms=None if greedy else uniforms, share_prefill=share,
        )
    handle.remove()
    return out, sizes


def assert_same(shared, unshared):
    assert torch.equal(shared.token_ids, unshared.token_ids)
    assert torch.equal(shared.lengths, unshared.lengths)
    assert torch.allclose(shared.logprobs, unshared.logprobs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("greedy", [True, False])
def test_repeated_prompts_are_prefilled_once_and_sample_as_unshared(arch, greedy):
    model = make_model(arch, eos_bias=0.0 if greedy else 2.0)
    stopper = stop_at_positions(model) if greedy else None  # greedy rows stop at different steps too
    shared, shared_sizes = run(model, GROUPED, greedy=greedy, share=True, seed=7)
    unshared, unshared_sizes = run(model, GROUPED, greedy=greedy, share=False, seed=7)
    assert shared_sizes[0] == 3 and unshared_sizes[0] == len(GROUPED)  # the prompt pass: 3 distinct rows
    assert shared_sizes[1:] == unshared_sizes[1:]  # then the rows decode as unshared ones do
    assert min(shared_sizes[1:]) < len(GROUPED)  # finished rows left the copied cache
    assert_same(shared, unshared)
    lengths = shared.lengths.tolist()
    assert min(lengths) < max(lengths)
    if not greedy:  # rows of one prompt drew their own tokens (their own uniforms)
        assert len({tuple(shared.token_ids[b].tolist()) for b in range(4)}) > 1
    ids, mask = encode_prompts(TOKENIZER, GROUPED, max_prompt_tokens=64)
    for b, expected in enumerate(full_forward_logprobs(model, (ids, mask), shared)):
        assert torch.allclose(shared.logprobs[b, : lengths[b]], expected, atol=1e-5, rtol=0)
    if stopper is not None:
        stopper.remove()


def test_a_batch_of_distinct_prompts_is_prefilled_once_as_before():
    model = make_model()
    shared, shared_sizes = run(model, PROMPTS, greedy=False, share=True, seed=4)
    unshared, unshared_sizes = run(model, PROMPTS, greedy=False, share=False, seed=4)
    assert shared_sizes == unshared_sizes and shared_sizes[0] == len(PROMPTS)  # one prompt pass, every row
    assert_same(shared, unshared)


class FixedCache:
    """A KV cache that cannot select rows (no ``reorder_cache``): it wraps the model's own."""

    def __init__(self, inner) -> None:
        self.inner = inner


class Output(dict):
    @property
    def logits(self) -> torch.Tensor:
        return self["logits"]


class NoRowSelection(torch.nn.Module):
    """The model with its cache hidden in a ``FixedCache``."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model, self.key = model, cache_keyword(model)

    def forward(self, input_ids, attention_mask, position_ids, use_cache=True, logits_to_keep=1,
                past_key_values=None):
        extra = {} if past_key_values is None else {self.key: past_key_values.inner}
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         use_cache=use_cache, logits_to_keep=logits_to_keep, **extra)
        return Output(logits=out.logits, past_key_values=FixedCache(out[self.key]))


def test_a_cache_that_cannot_select_rows_prefills_every_row():
    model = make_model()
    wrapped = NoRowSelection(model)
    shared, sizes = run(wrapped, GROUPED, greedy=False, share=True, seed=7)
    assert sizes[:2] == [3, len(GROUPED)]  # the distinct pass could not be copied: all rows run again
    assert min(sizes[1:]) == len(GROUPED)  # and no finished row leaves that cache
    assert_same(shared, run(model, GROUPED, greedy=False, share=False, seed=7)[0])


@pytest.fixture(scope="module")
def gguf_llama(tmp_path_factory):
    """A tiny random Llama written as GGUF and read by transformers, with its own tokenizer."""
    pytest.importorskip("gguf", reason="pip install gguf (make install does)")
    from policy.model import load_pretrained
    from tests.policy.tiny_gguf import write_tiny_gguf

    folder = tmp_path_factory.mktemp("tiny")
    write_tiny_gguf(folder / "tiny.gguf", seed=2)
    return load_pretrained(str(folder / "tiny.gguf"), folder / "cache")


@pytest.mark.parametrize("greedy", [True, False])
def test_lm_policy_samples_a_group_of_one_prompt_as_unshared(gguf_llama, greedy):
    model, tokenizer = gguf_llama
    model.eval()
    cfg = PolicyConfig(max_action_tokens=MAX_TOKENS)
    policy = LMPolicy(model, tokenizer, cfg, seed=7, system_prompt="act")
    prompts = [policy.render([], "find the number"), policy.render([], "guess again please")]
    rows = [prompts[0]] * 5 + [prompts[1]] * 2 + [prompts[0]]
    sizes, handle = batch_sizes(model)
    got = policy.generate(rows, greedy=greedy)
    handle.remove()
    assert sizes[0] == 2  # one prompt pass of the two distinct prompts
    # the unshared reference, on the uniforms the policy drew from its seed
    ids, mask = left_pad(prompt_ids(tokenizer, rows, max_prompt_tokens=cfg.max_prompt_tokens), policy.pad_token_id)
    uniforms = torch.rand((len(rows), MAX_TOKENS), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        want = sample_with_cache(
            model, ids, mask, max_tokens=MAX_TOKENS, eos=tokenizer.eos_token_id, pad=policy.pad_token_id,
            weights=None if greedy else policy._sampling_weights, uniforms=None if greedy else uniforms,
            share_prefill=False,
        )
    assert_same(got, want)
    if not greedy:
        assert len({tuple(got.token_ids[b].tolist()) for b in range(5)}) > 1
