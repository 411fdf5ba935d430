"""A pretrained-format LM as the world model: read from a local folder only, fine-tuned in full or
through LoRA adapters (one per member on one frozen base), saved and reloaded."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from envs import RandomAgent, collect
from envs.registry import make
from envs.tokenizer import build_word_tokenizer
from tests.world_model.lm.conftest import ENV
from world_model.fitting import fit_any
from world_model.lm import LMOptions, LMWorldModel, LMWorldModelConfig
from world_model.turn_tokens import TurnTokenizer


def save_local_model(folder, *, dtype=torch.float32) -> None:
    """A tiny Llama with its own tokenizer (no chat template) saved as a Hugging Face folder."""
    words = [*make(ENV).vocabulary(), "user", "assistant", "tool", ":"]
    tokenizer = build_word_tokenizer(words)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(dtype).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def pretrained_world_model(folder, *, lora_rank: int, members: int = 2, dtype: str = "float32") -> LMWorldModel:
    tk = TurnTokenizer.for_env(ENV, {})
    options = LMOptions(pretrained=str(folder), lora_rank=lora_rank, history_turns=1, dtype=dtype)
    config = LMWorldModelConfig(options, tk.limits.observation, tk.limits.action, len(tk), num_members=members,
                                head_hidden=8)
    return LMWorldModel(config, tk, seed=0)


@pytest.mark.parametrize("lora_rank", [0, 2])
def test_a_local_pretrained_model_is_fitted_sampled_saved_and_reloaded(tmp_path, lora_rank):
    save_local_model(tmp_path / "base")
    model = pretrained_world_model(tmp_path / "base", lora_rank=lora_rank)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    if lora_rank:  # the base is frozen; each member's adapter and head train
        assert trained and all("lora_" in n or n.startswith("heads.") for n in trained)
        assert {n.split("lora_A.")[1].split(".")[0] for n in trained if "lora_A." in n} == {"m0", "m1"}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train = collect(RandomAgent(0), ENV, group_size=4, group_seeds=[3], progress=False)
    fit_any(train, [], model, max_steps=2, batch_size=2, lr=1e-2, seed=0, score_train=False)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    if lora_rank:  # only adapters and heads moved
        assert any("lora_" in n for n in changed)
        assert all("lora_" in n or n.startswith("heads.") for n in changed)
    else:  # every member's weights are trained in full
        assert {n.split(".")[2] for n in changed if ".mlp." in n} == {"0", "1"}
    state = model.initial_state([train[0].turns[0].observation] * 2)
    model.save_pretrained(tmp_path / "wm")
    loaded = LMWorldModel.from_pretrained(tmp_path / "wm")
    for m in (model, loaded):
        m.eval()
    x = model.step(state, ["guess(4)", "guess(9)"], generator=torch.Generator().manual_seed(2))
    y = loaded.step(state, ["guess(4)", "guess(9)"], generator=torch.Generator().manual_seed(2))
    assert x[1].observations == y[1].observations and torch.equal(x[1].reward, y[1].reward)


def test_a_pretrained_path_that_is_not_a_model_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="world_model.lm.pretrained"):
        pretrained_world_model(tmp_path, lora_rank=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bf16_fit_and_sample_on_cuda(tmp_path):
    save_local_model(tmp_path / "base", dtype=torch.bfloat16)
    model = pretrained_world_model(tmp_path / "base", lora_rank=2, dtype="bfloat16").cuda()
    assert model.device.type == "cuda"
    train = collect(RandomAgent(0), ENV, group_size=4, group_seeds=[3], progress=False)
    fit_any(train, [], model, max_steps=2, batch_size=2, lr=1e-3, seed=0, score_train=False)
    assert model.device.type == "cuda"  # still where it was put, after Lightning's teardown
    state = model.initial_state([train[0].turns[0].observation])
    _, pred = model.step(state, ["guess(4)"], generator=torch.Generator(device="cuda").manual_seed(0))
    assert torch.isfinite(pred.reward).all() and torch.isfinite(pred.uncertainty).all()


def test_the_chat_codec_cuts_the_template_where_the_tool_answer_starts(tmp_path):
    save_local_model(tmp_path / "base")
    model = pretrained_world_model(tmp_path / "base", lora_rank=0, members=1)
    codec = model.codec
    codec.tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }}\n{% endfor %}"
    state = model.observe(model.initial_state(["find the hidden number"]), ["guess(8)"], ["guess 8 : higher"])
    (prompt,) = codec.prompts(state.first, state.turns, ["guess(4)"])
    text = codec.tokenizer.decode(prompt)
    assert text.split() == "user : find the hidden number assistant : guess ( 8 ) tool : guess 8 : higher " \
        "assistant : guess ( 4 ) tool :".split()
    (target,) = codec.targets(["guess 4 : lower"])
    assert target[-1] == codec.eos_id and codec.decode(target) == "guess 4 : lower"
