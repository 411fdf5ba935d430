"""LoRA on a pretrained policy: the KL reference is the same base with the adapters off, only the adapters
train, and a saved policy holds its adapters (safetensors) and the merged model."""

from __future__ import annotations

import pytest
import torch
from lightning.fabric import Fabric
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

from policy.batch import TokenBatch
from policy.config import LoRAConfig
from policy.learner import PPOConfig, PPOLearner
from policy.logprobs import token_logprobs
from policy.lora import AdaptersOff, add_lora, save_lora_policy

VOCAB = 30
LORA = LoRAConfig(rank=4, alpha=8.0, targets=["q_proj", "v_proj"])


def base_lm() -> LlamaForCausalLM:
    """The same weights every call (a 'separately loaded' copy of the base)."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    return LlamaForCausalLM(config).eval()


def lora_policy(seed: int = 1):
    """A PeftModel on a fresh base, its B matrices made non-zero so the adapters change the outputs."""
    peft = add_lora(base_lm(), LORA, seed=seed)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    return peft


def batch() -> TokenBatch:
    ids = torch.tensor([[0, 0, 5, 6, 7, 8, 9, 3], [4, 5, 6, 7, 8, 9, 10, 3]])
    attention = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]])
    response = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 1, 1]], dtype=torch.float)
    return TokenBatch(ids, attention, response)


def logp_of(model, tokens: TokenBatch) -> torch.Tensor:
    with torch.no_grad():
        return token_logprobs(model, tokens.input_ids, tokens.attention_mask)[0]


def test_the_reference_with_adapters_off_equals_a_separately_loaded_base():
    peft, tokens = lora_policy(), batch()
    base = logp_of(base_lm(), tokens)
    with_adapters = logp_of(peft.base_model.model, tokens)
    assert (with_adapters - base).abs().max() > 1e-3  # the adapters do change the policy
    torch.testing.assert_close(logp_of(AdaptersOff(peft), tokens), base, atol=1e-6, rtol=0)
    torch.testing.assert_close(logp_of(peft.base_model.model, tokens), with_adapters)  # adapters back on after


def test_the_learner_trains_only_the_adapters_and_its_reference_is_no_copy():
    peft, tokens = lora_policy(), batch()
    reference = AdaptersOff(peft)
    assert list(reference.parameters()) == [] and reference.state_dict() == {}  # nothing of its own
    fabric = Fabric(accelerator="cpu", devices=1, precision="32-true")
    model = peft.base_model.model
    learner = PPOLearner(fabric, model, PPOConfig(epochs=1, kl_coef=0.5, lr=1e-2, max_grad_norm=None),
                         seed=0, ref_model=reference)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)  # the learner's freezing of the reference froze nothing
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    advantages = tokens.response_mask * torch.tensor([[1.0], [-1.0]])
    metrics = learner.update(tokens, advantages)
    assert metrics["losses/kl_ref"] > 0  # the adapters were on while the reference had them off
    for name, param in model.named_parameters():
        changed = not torch.equal(param, before[name])
        assert changed == ("lora_" in name), name
    torch.testing.assert_close(logp_of(reference, tokens), logp_of(base_lm(), tokens), atol=1e-6, rtol=0)


def test_adapters_are_drawn_from_their_seed_and_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    first = add_lora(base_lm(), LORA, seed=5).state_dict()
    torch.set_rng_state(state)
    second, third = add_lora(base_lm(), LORA, seed=5).state_dict(), add_lora(base_lm(), LORA, seed=6).state_dict()
    key = next(k for k in first if "lora_A" in k)
    assert torch.equal(first[key], second[key]) and not torch.equal(first[key], third[key])
    torch.set_rng_state(state)
    add_lora(base_lm(), LORA, seed=5)
    base_lm_state = torch.get_rng_state()
    torch.set_rng_state(state)
    base_lm()
    assert torch.equal(base_lm_state, torch.get_rng_state())  # add_lora drew nothing from the global RNG


def test_targets_that_name_no_module_fail_naming_the_key():
    with pytest.raises(ValueError, match=r"^policy\.lora\.targets=\['nope'\]"):
        add_lora(base_lm(), LoRAConfig(rank=4, targets=["nope"]), seed=0)


def test_a_saved_lora_policy_holds_its_adapters_and_the_merged_weights(tmp_path):
    pytest.importorskip("gguf", reason="pip install gguf (make install does)")
    from policy.model import load_local_pretrained, load_pretrained
    from tests.policy.tiny_gguf import write_tiny_gguf

    write_tiny_gguf(tmp_path / "tiny.gguf")
    model, tokenizer = load_pretrained(str(tmp_path / "tiny.gguf"), tmp_path / "cache")
    base_q = model.model.layers[1].self_attn.q_proj.weight.detach().clone()  # (out, in)
    peft = add_lora(model, LoRAConfig(rank=2, alpha=6.0, targets=["q_proj"]), seed=0)
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.normal_()
    save_lora_policy(peft, tokenizer, tmp_path / "policy", save_merged=True)

    adapters = load_file(tmp_path / "policy" / "adapter" / "adapter_model.safetensors")
    a = adapters["base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"]  # (r, in)
    b = adapters["base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight"]  # (out, r)
    merged, _ = load_local_pretrained(tmp_path / "policy")
    expected = base_q + (6.0 / 2) * b @ a  # LoRA's update, alpha / rank times B A
    torch.testing.assert_close(merged.model.layers[1].self_attn.q_proj.weight.detach(), expected, atol=1e-6, rtol=0)
    assert not list((tmp_path / "policy").rglob("*.bin")) and not list((tmp_path / "policy").rglob("*.pt"))
    assert any("lora_A" in n for n, _ in peft.named_parameters())  # the policy keeps its adapters
