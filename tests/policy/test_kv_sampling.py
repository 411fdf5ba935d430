"""The KV-cache sampling loop: finished rows leave the batch without changing what any row gets.

References are worked out independently: greedy tokens from a plain loop that runs the full,
unpadded, uncached model on one prompt at a time; log-probs from one full forward pass over prompt +
action; categorical draws from the running sums by hand.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.batch import TokenBatch
from policy.config import PolicyConfig
from policy.encode import encode_prompts, left_pad
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer, load_local_pretrained
from tests.policy.fake_envs import WORDS
from world_model.kv_sampling import cache_keyword, sample_with_cache
from world_model.sampling import draw_categorical

TOKENIZER = build_tiny_tokenizer(WORDS)
EOS, PAD = TOKENIZER.eos_token_id, TOKENIZER.pad_token_id
# Prompts of 2 to 13 words (so rows start at different positions), and a past turn with an error.
PROMPTS = [" ".join(WORDS[:i]) + f"\nsay {w}\n>" for i, w in enumerate(WORDS)] + [
    "say red\n> red\nsay moon\n> fish\nsay sun\n>",
    "invalid : reply with one word\nsay dog\n>",
]
MAX_TOKENS = 6


def make_model(arch="llama", eos_bias=2.0):
    """A tiny seeded model whose EOS logit is raised by ``eos_bias``, so rows stop at different steps."""
    cfg = PolicyConfig(arch=arch, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    model = build_tiny_lm(cfg, TOKENIZER, seed=1).eval()
    with torch.no_grad():
        model.lm_head.weight[EOS] += eos_bias * model.lm_head.weight[EOS] / model.lm_head.weight[EOS].norm()
    return model


def stop_at_positions(model, every=4):
    """Make EOS the argmax wherever the next token's position is a multiple of ``every``: rows with
    prompts of different lengths then stop at different steps under greedy decoding."""

    def hook(module, args, kwargs, out):
        logits = out.logits  # (B, L', V), L' = 1 with logits_to_keep=1
        positions = kwargs.get("position_ids")
        if positions is None:  # an unpadded, uncached call over all positions: 0..L-1
            positions = torch.arange(logits.shape[1])[None, :]
        next_positions = positions[:, -logits.shape[1] :] + 1  # (B or 1, L')
        stop = (next_positions % every == 0).expand(logits.shape[:2])  # (B, L')
        logits[..., EOS] = torch.where(stop, logits.max(dim=-1).values + 1.0, logits[..., EOS])
        return out

    return model.register_forward_hook(hook, with_kwargs=True)


def batch_sizes(model):
    """Record the batch size of every forward call (to see rows leave the batch)."""
    sizes = []
    handle = model.register_forward_hook(
        lambda module, args, kwargs, out: sizes.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    return sizes, handle


def prompts_batch():
    return encode_prompts(TOKENIZER, PROMPTS, max_prompt_tokens=64)  # (B, P) each


def sample(model, *, greedy, drop=True, seed=0, prompts=None):
    input_ids, attention_mask = prompts if prompts is not None else prompts_batch()
    probs = lambda logits: torch.softmax(logits.float(), dim=-1)  # noqa: E731 - temperature 1
    uniforms = torch.rand((len(input_ids), MAX_TOKENS), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return sample_with_cache(
            model,
            input_ids,
            attention_mask,
            max_tokens=MAX_TOKENS,
            eos=EOS,
            pad=PAD,
            weights=None if greedy else probs,
            uniforms=None if greedy else uniforms,
            drop_finished=drop,
        )


def reference_greedy(model, prompt):
    """One prompt, no padding, no cache: the full model each step, argmax, stop at EOS."""
    ids, _ = encode_prompts(TOKENIZER, [prompt], max_prompt_tokens=64)
    produced = []
    with torch.no_grad():
        for _ in range(MAX_TOKENS):
            token = int(model(ids).logits[0, -1].argmax())
            produced.append(token)
            if token == EOS:
                break
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return produced


def full_forward_logprobs(model, prompts, decoded):
    """Log-prob of each sampled token from one forward pass over the left-padded prompt + action rows."""
    heads, _ = prompts
    rows = [
        head[head != PAD].tolist() + tokens[:n].tolist()
        for head, tokens, n in zip(heads, decoded.token_ids, decoded.lengths.tolist(), strict=True)
    ]
    ids, mask = left_pad(rows, PAD)
    policy = LMPolicy(model, TOKENIZER, PolicyConfig(), seed=0)
    with torch.no_grad():
        logp, _ = policy.log_probs(TokenBatch(ids, mask, mask.float()))
    return [logp[b, ids.shape[1] - n :] for b, n in enumerate(decoded.lengths.tolist())]


def test_rows_leave_the_batch_and_greedy_tokens_match_a_plain_uncached_loop():
    model = make_model(eos_bias=0.0)
    stopper = stop_at_positions(model)
    sizes, handle = batch_sizes(model)
    out = sample(model, greedy=True)
    handle.remove()
    lengths = out.lengths.tolist()
    assert min(lengths) < max(lengths) <= MAX_TOKENS  # rows stopped at different steps
    assert min(sizes) < len(PROMPTS)  # and finished rows left the decode batch
    for b, prompt in enumerate(PROMPTS):
        expected = reference_greedy(model, prompt)
        assert out.token_ids[b, : len(expected)].tolist() == expected
        assert lengths[b] == len(expected)
    for b, expected in enumerate(full_forward_logprobs(model, prompts_batch(), out)):
        assert torch.allclose(out.logprobs[b, : lengths[b]], expected, atol=1e-5, rtol=0)
    kept = sample(model, greedy=True, drop=False)  # every row decoded to the end, as a plain loop does
    assert torch.equal(kept.token_ids, out.token_ids) and torch.equal(kept.lengths, out.lengths)
    stopper.remove()


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_sampled_logprobs_equal_a_full_forward_when_rows_finish_early(arch):
    model = make_model(arch)
    prompts = prompts_batch()
    sizes, handle = batch_sizes(model)
    out = sample(model, greedy=False, seed=3, prompts=prompts)
    handle.remove()
    lengths = out.lengths.tolist()
    assert min(lengths) < max(lengths) and min(sizes) < len(PROMPTS)  # some rows finished and left the batch
    assert (out.token_ids == EOS).any(dim=1).sum() >= 2
    for b, expected in enumerate(full_forward_logprobs(model, prompts, out)):
        n = lengths[b]
        assert torch.allclose(out.logprobs[b, :n], expected, atol=1e-5, rtol=0)
    # The same uniforms give the same tokens whether finished rows leave the batch or stay in it.
    kept = sample(model, greedy=False, seed=3, drop=False, prompts=prompts)
    assert torch.equal(kept.token_ids, out.token_ids)
    assert torch.allclose(kept.logprobs, out.logprobs, atol=1e-5, rtol=0)


def test_finished_rows_hold_pad_and_zero_after_their_eos():
    out = sample(make_model(), greedy=False, seed=5)
    width = out.token_ids.shape[1]
    assert width == int(out.lengths.max())
    early = 0
    for row, logp, n in zip(out.token_ids, out.logprobs, out.lengths.tolist(), strict=True):
        assert EOS not in row[: n - 1].tolist()
        if n < width:
            early += 1
            assert int(row[n - 1]) == EOS
            assert row[n:].tolist() == [PAD] * (width - n)
            assert logp[n:].tolist() == [0.0] * (width - n)
        assert bool((logp[:n] < 0).all())  # a real log-prob on every produced token
    assert early >= 2


def test_same_seed_same_tokens_and_another_seed_other_tokens():
    model = make_model()
    policy_cfg = PolicyConfig(max_action_tokens=MAX_TOKENS)
    first = LMPolicy(model, TOKENIZER, policy_cfg, seed=11).generate(PROMPTS)
    again = LMPolicy(model, TOKENIZER, policy_cfg, seed=11).generate(PROMPTS)
    other = LMPolicy(model, TOKENIZER, policy_cfg, seed=12).generate(PROMPTS)
    assert torch.equal(first.token_ids, again.token_ids) and torch.equal(first.logprobs, again.logprobs)
    assert first.texts == again.texts
    assert not torch.equal(first.token_ids, other.token_ids)


def test_a_saved_model_directory_that_pads_with_eos_samples_as_the_model_did(tmp_path):
    """policy=pretrained: a model and tokenizer read back from a folder, padding with EOS (no pad token)."""
    model = make_model(eos_bias=0.0)
    tokenizer = build_tiny_tokenizer(WORDS)
    tokenizer.pad_token = None
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, loaded_tokenizer = load_local_pretrained(tmp_path)
    assert loaded_tokenizer.pad_token_id == EOS
    policy = LMPolicy(loaded, loaded_tokenizer, PolicyConfig(max_action_tokens=MAX_TOKENS), seed=0)
    stoppers = [stop_at_positions(loaded), stop_at_positions(model)]
    greedy = policy.generate(PROMPTS, greedy=True)
    sampled = policy.generate(PROMPTS)
    for b, prompt in enumerate(PROMPTS):
        expected = reference_greedy(model, prompt)  # the model it was saved from
        assert greedy.token_ids[b, : len(expected)].tolist() == expected
        assert int(greedy.lengths[b]) == len(expected)
    assert int(greedy.lengths.min()) < int(greedy.lengths.max())
    for b, expected in enumerate(full_forward_logprobs(loaded, prompts_batch(), sampled)):
        assert torch.allclose(sampled.logprobs[b, : int(sampled.lengths[b])], expected, atol=1e-5, rtol=0)
    for stopper in stoppers:
        stopper.remove()


def test_empty_batch_and_model_errors():
    model = make_model()
    empty = sample(
        model,
        greedy=True,
        prompts=(torch.zeros((0, 3), dtype=torch.long), torch.zeros((0, 3), dtype=torch.long)),
    )
    assert empty.token_ids.shape == (0, 0) and empty.lengths.shape == (0,)
    ids, mask = prompts_batch()
    with pytest.raises(ValueError, match="uniforms of shape"):
        sample_with_cache(
            model, ids, mask, max_tokens=3, eos=EOS, pad=PAD, weights=torch.softmax, uniforms=None
        )
    handle = model.lm_head.register_forward_hook(
        lambda module, args, logits: torch.full_like(logits, math.nan)
    )
    with pytest.raises(ValueError, match="non-finite logits"):
        sample(model, greedy=False)
    handle.remove()


def test_cache_keyword_is_looked_up_once_per_model_class(monkeypatch):
    import world_model.kv_sampling as kv_sampling

    class OldStyle(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None):
            return input_ids

    calls = []
    real = kv_sampling.inspect.signature
    monkeypatch.setattr(kv_sampling.inspect, "signature", lambda fn: calls.append(fn) or real(fn))
    assert cache_keyword(OldStyle()) == "past_key_values"
    assert cache_keyword(OldStyle()) == "past_key_values"
    assert len(calls) == 1
    assert cache_keyword(make_model()) in ("cache", "past_key_values")


def test_draw_categorical_takes_the_first_running_sum_reaching_the_target():
    weights = torch.tensor([[0.2, 0.0, 0.5, 0.3]] * 6)  # running sums 0.2, 0.2, 0.7, 1.0
    fractions = torch.tensor([1.0, 0.71, 0.69, 0.21, 0.19, 0.001])  # targets: fraction x total 1.0
    assert draw_categorical(weights, fractions).tolist() == [3, 3, 2, 2, 0, 0]
    unnormalised = torch.tensor([[0.0, 2.0, 0.0, 6.0]])  # running sums 0, 2, 2, 8: probabilities 1/4 and 3/4
    assert draw_categorical(unnormalised, torch.tensor([0.3])).tolist() == [3]  # target 0.3 x 8 = 2.4
    assert draw_categorical(unnormalised, torch.tensor([0.2])).tolist() == [1]  # target 1.6


def test_draw_categorical_on_an_even_grid_gives_the_weights_as_counts():
    weights = torch.tensor([1.0, 0.0, 3.0, 2.0, 0.0, 2.0])  # out of 8
    n = 800
    fractions = 1.0 - (torch.arange(n) + 0.5) / n  # 1 - u for u on an even grid of [0, 1)
    counts = torch.bincount(draw_categorical(weights.expand(n, -1), fractions), minlength=6)
    assert counts.tolist() == [100, 0, 300, 200, 0, 200]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1e-30, 1e-6, 0.3, 1.0, 7.0]), min_size=1, max_size=12).filter(
        lambda w: sum(w) > 0
    ),
    st.sampled_from([0.0, 1e-7, 0.5, 1 - 2**-24, 0.99999]),
)
def test_draw_categorical_never_draws_a_zero_weight(weights, u):
    drawn = int(draw_categorical(torch.tensor([weights]), 1.0 - torch.tensor([u]))[0])
    assert 0 <= drawn < len(weights) and weights[drawn] > 0
