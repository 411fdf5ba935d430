"""The LM policy: config checks, model builders, batched sampling with a KV cache, log-probs that agree."""

import pytest
import torch

from envs.agent import Agent, AgentView, SampledAction
from envs.tokenizer import build_word_tokenizer
from policy.batch import TokenBatch
from policy.config import PolicyConfig
from policy.encode import encode_prompts, left_pad, turn_samples
from policy.lm_policy import LMPolicy, top_p_filter
from policy.model import build_tiny_lm, build_tiny_tokenizer, count_parameters, load_local_pretrained
from policy.render import render_text
from tests.policy.fake_envs import EchoEnv, rollout

ENV = EchoEnv()
TOKENIZER = build_tiny_tokenizer(ENV.vocabulary())
SMALL = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
PROMPTS = ["say cat\n>", "say red\n> red\nsay moon\n> fish\nsay sun\n>", "invalid : reply with one word\nsay dog\n>"]


def make_policy(seed=0, arch="llama", **overrides):
    cfg = PolicyConfig(arch=arch, **{**SMALL, "max_action_tokens": 6, **overrides})
    return LMPolicy(build_tiny_lm(cfg, TOKENIZER, seed=1).eval(), TOKENIZER, cfg, seed=seed)


def eos_bias(policy, bias):
    """Make EOS likelier by adding ``bias`` to its logit (a hook both generation and log_probs see)."""
    eos = policy.tokenizer.eos_token_id

    def hook(module, inputs, logits):
        logits = logits.clone()
        logits[..., eos] += bias
        return logits

    return policy.model.lm_head.register_forward_hook(hook)


@pytest.mark.parametrize(
    "field, value",
    [("arch", "gpt2"), ("hidden_size", 0), ("num_heads", 3), ("history_window", -1), ("max_prompt_tokens", 1),
     ("max_action_tokens", 0), ("temperature", -0.5), ("top_p", 0.0), ("top_p", 1.5), ("pretrained", "")],
)
def test_config_rejects_out_of_range_fields_by_name(field, value):
    with pytest.raises(ValueError, match=f"PolicyConfig.{field}"):
        PolicyConfig(**{field: value})


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tiny_lm_matches_tokenizer_and_config(arch):
    tokenizer = build_tiny_tokenizer([f"w{i}" for i in range(100)])
    cfg = PolicyConfig(arch=arch)
    model = build_tiny_lm(cfg, tokenizer, seed=0)
    assert type(model).__name__ == {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[arch]
    assert model.config.vocab_size == len(tokenizer) == 106  # 100 words, 4 specials, newline, ">"
    assert (model.config.pad_token_id, model.config.bos_token_id, model.config.eos_token_id) == (0, 2, 3)
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()  # tied
    assert model.config.max_position_embeddings >= cfg.max_prompt_tokens + cfg.max_action_tokens + 1
    # embeddings once (tied) + per layer: q,k,v,o + gate,up,down + two norms; + final norm
    h, m, v = 128, 384, 106
    per_layer = 4 * h * h + 3 * h * m + 2 * h + (3 * h if arch == "qwen2" else 0)  # qwen2: q,k,v biases
    assert count_parameters(model) == v * h + 3 * per_layer + h
    assert 500_000 <= count_parameters(model) <= 3_000_000


def test_seeded_init_is_reproducible_and_leaves_the_global_rng_alone():
    cfg = PolicyConfig(**SMALL)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_tiny_lm(cfg, TOKENIZER, seed=7)
    assert torch.equal(torch.rand(1), before)
    b = build_tiny_lm(cfg, TOKENIZER, seed=7)
    c = build_tiny_lm(cfg, TOKENIZER, seed=8)
    assert torch.equal(a.model.embed_tokens.weight, b.model.embed_tokens.weight)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_load_local_pretrained_round_trips_and_fixes_padding(tmp_path):
    tokenizer = build_word_tokenizer(["say cat dog"])
    tokenizer.pad_token = None
    tokenizer.padding_side = "right"
    model = build_tiny_lm(PolicyConfig(**SMALL), build_word_tokenizer(["say cat dog"]), seed=0).eval()
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    loaded, loaded_tokenizer = load_local_pretrained(tmp_path / "m")
    assert loaded_tokenizer.pad_token == "</s>" and loaded_tokenizer.padding_side == "left"
    ids = torch.tensor([[2, 5, 6, 4]])
    assert torch.allclose(loaded(ids).logits, model(ids).logits, atol=1e-6)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        load_local_pretrained(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_local_pretrained(tmp_path / "empty")


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.15, 0.5, 0.05, 0.3]])
    assert torch.allclose(top_p_filter(probs, 0.7), torch.tensor([[0.0, 0.625, 0.0, 0.375]]))
    assert torch.allclose(top_p_filter(probs, 0.5), torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    assert torch.allclose(top_p_filter(probs, 0.9), torch.tensor([[0.15, 0.5, 0.0, 0.3]]) / 0.95)
    assert torch.equal(top_p_filter(probs, 1.0), probs)


def test_act_returns_one_action_per_view_from_the_rendered_history():
    policy = make_policy()
    assert isinstance(policy, Agent)
    trajectory = rollout(make_policy(), EchoEnv, [3])[0]
    views = [AgentView(ENV, [], "say cat"), AgentView(ENV, trajectory.turns[:2], trajectory.turns[2].observation)]
    assert policy.prompts(views) == ["say cat\n>", render_text(trajectory.turns[:2], trajectory.turns[2].observation, 2)]
    actions = policy.act(views)
    assert len(actions) == 2 and all(isinstance(a, SampledAction) for a in actions)
    assert all("</s>" not in a.text for a in actions)  # the closing EOS is not part of the text
    for action, prompt in zip(actions, policy.prompts(views), strict=True):
        ids, _ = encode_prompts(TOKENIZER, [prompt], max_prompt_tokens=policy.cfg.max_prompt_tokens)
        assert list(action.prompt_ids) == ids[0].tolist()  # the ids it conditioned on, no padding
        assert len(action.logprobs) == len(action.action_ids) >= 1
        assert action.ended == (action.action_ids[-1] == TOKENIZER.eos_token_id)


def test_action_text_keeps_sampled_special_tokens():
    # The env judges the text: a sampled <unk> or <pad> must show in it (and make the action
    # malformed), not vanish; with a word-level tokenizer the text encodes back to the sampled ids.
    policy = make_policy(seed=3)
    with torch.no_grad():  # make special tokens likely so the round trip is exercised on them
        policy.model.lm_head.weight[[0, 1]] += 3.0 * policy.model.lm_head.weight.norm(dim=1).max()
    generation = policy.generate([f"say {w}\n>" for w in ENV.words] * 4)
    eos = policy.tokenizer.eos_token_id
    sampled_specials = 0
    for ids, n, text in zip(generation.token_ids, generation.lengths.tolist(), generation.texts, strict=True):
        sampled = [i for i in ids[:n].tolist() if i != eos]
        sampled_specials += sum(i in (0, 1) for i in sampled)
        assert policy.tokenizer(text, add_special_tokens=False).input_ids == sampled
    assert sampled_specials > 0
    assert policy.act([]) == []


def test_same_seed_same_actions_and_different_seed_different_actions():
    views = [AgentView(ENV, [], f"say {w}") for w in ENV.words]
    first = make_policy(seed=5).act(views)
    assert make_policy(seed=5).act(views) == first
    assert make_policy(seed=6).act(views) != first
    policy = make_policy(seed=5)
    assert policy.act(views) == first and policy.act(views) != first  # the generator advances


def test_greedy_is_deterministic_and_matches_an_uncached_unpadded_reference():
    policy = make_policy(max_action_tokens=5)
    batched = policy.generate(PROMPTS, greedy=True)
    assert policy.generate(PROMPTS, greedy=True).texts == batched.texts
    assert make_policy(seed=99, temperature=0.0, max_action_tokens=5).generate(PROMPTS).texts == batched.texts
    eos = TOKENIZER.eos_token_id
    for b, prompt in enumerate(PROMPTS):  # one prompt at a time, full forward each step, no cache, no padding
        ids, _ = encode_prompts(TOKENIZER, [prompt], max_prompt_tokens=policy.cfg.max_prompt_tokens)
        produced = []
        with torch.no_grad():
            for _ in range(5):
                token = int(policy.model(ids).logits[0, -1].argmax())
                produced.append(token)
                if token == eos:
                    break
                ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        assert batched.token_ids[b, : len(produced)].tolist() == produced
        assert int(batched.lengths[b]) == len(produced)


def test_generation_stops_at_eos_and_pads_finished_rows():
    policy = make_policy(seed=3, max_action_tokens=6)
    handle = eos_bias(policy, 2.5)
    out = policy.generate(PROMPTS * 8)
    handle.remove()
    eos, pad = TOKENIZER.eos_token_id, TOKENIZER.pad_token_id
    assert out.token_ids.shape[1] <= 6
    assert 1 <= int(out.lengths.min()) < int(out.lengths.max())  # some rows stopped early
    for row, n in zip(out.token_ids, out.lengths.tolist(), strict=True):
        assert eos not in row[: n - 1].tolist()
        if n < out.token_ids.shape[1]:
            assert int(row[n - 1]) == eos and row[n:].tolist() == [pad] * (len(row) - n)
    assert all(not text.endswith("</s>") for text in out.texts)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_log_probs_of_generated_tokens_equal_the_sampling_distribution(arch):
    """At temperature 1 the cached, left-padded sampling loop and token_logprobs score each token alike."""
    policy = make_policy(seed=4, arch=arch, max_action_tokens=6)
    handle = eos_bias(policy, 2.0)  # rows of different lengths
    out = policy.generate(PROMPTS * 4)
    heads, _ = encode_prompts(TOKENIZER, PROMPTS * 4, max_prompt_tokens=policy.cfg.max_prompt_tokens)
    rows = [h[h != TOKENIZER.pad_token_id].tolist() + t[:n].tolist()
            for h, t, n in zip(heads, out.token_ids, out.lengths.tolist(), strict=True)]
    ids, mask = left_pad(rows, TOKENIZER.pad_token_id)
    with torch.no_grad():
        logp, entropy = policy.log_probs(TokenBatch(ids, mask, mask.float()))
    handle.remove()
    for b, n in enumerate(out.lengths.tolist()):
        assert torch.allclose(logp[b, -n:], out.logprobs[b, :n], atol=1e-4)
        assert torch.all(out.logprobs[b, n:] == 0)
    assert torch.all(entropy[mask.bool()][1:] >= 0)


def test_sampling_frequencies_follow_the_tempered_distribution():
    policy = make_policy(seed=0, max_action_tokens=1, temperature=0.5)
    with torch.no_grad():
        ids, _ = encode_prompts(TOKENIZER, ["say cat\n>"], max_prompt_tokens=64)
        expected = torch.softmax(policy.model(ids).logits[0, -1] / 0.5, dim=-1)  # (V,)
    out = policy.generate(["say cat\n>"] * 4000)
    counts = torch.bincount(out.token_ids[:, 0], minlength=len(expected)).float() / 4000
    assert (counts - expected).abs().max() < 0.03  # ~4 standard errors for p ~ 0.05


def test_encode_and_log_probs_cover_every_turn_with_gradients():
    policy = make_policy(history_window=1)
    trajectories = rollout(policy, EchoEnv, [0, 1])
    batch, samples = policy.encode(trajectories)
    assert samples == turn_samples(trajectories, 1, TOKENIZER)
    assert len(batch) == sum(t.num_turns for t in trajectories) == 6
    policy.train()
    assert policy.model.training
    logp, entropy = policy.log_probs(batch)
    assert logp.shape == entropy.shape == batch.input_ids.shape
    (logp * batch.response_mask).sum().backward()
    assert policy.model.model.embed_tokens.weight.grad.abs().sum() > 0
    policy.eval()
    assert not policy.model.training



def test_a_policy_config_read_back_as_plain_dicts_rebuilds_its_lora_section():
    """A saved run's config comes back as plain containers: the nested LoRA section must become its dataclass."""
    from policy.config import LoRAConfig

    cfg = PolicyConfig(lora={"rank": 0, "alpha": 8.0})
    assert isinstance(cfg.lora, LoRAConfig) and (cfg.lora.rank, cfg.lora.alpha) == (0, 8.0)
