"""The LLM cost benchmark's parts on a tiny random Llama (a GGUF written by the ``gguf`` package, with LoRA):
the sampled rows, the update's loss against one computed by hand (and TRL's, when installed), the token
counts, the child run's peak memory, and the iteration's overrides as Hydra composes them."""

from __future__ import annotations

import pytest
import torch

from benchmarks.llm_iteration_memory import run_child, train_overrides
from benchmarks.llm_sampling_cost import compare_sampling, generated_lengths, group_prompt
from benchmarks.llm_trl_update import trl_missing, trl_updates
from benchmarks.llm_update_cost import reverie_updates, update_rows
from policy.config import LoRAConfig, PolicyConfig
from policy.lm_policy import LMPolicy
from policy.logprobs import token_logprobs
from policy.lora import add_lora

NEW_TOKENS, ROWS = 5, 3


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    pytest.importorskip("gguf", reason="pip install gguf (make install does)")
    from policy.model import load_pretrained
    from tests.policy.tiny_gguf import write_tiny_gguf

    folder = tmp_path_factory.mktemp("tiny")
    write_tiny_gguf(folder / "tiny.gguf")
    model, tokenizer = load_pretrained(str(folder / "tiny.gguf"), folder / "cache")
    cfg = PolicyConfig(pretrained=str(folder / "tiny.gguf"), max_action_tokens=NEW_TOKENS,
                       lora=LoRAConfig(rank=4, alpha=8.0))
    adapters = add_lora(model, cfg.lora, seed=0)
    with torch.no_grad():  # non-zero B matrices, so the adapters change the outputs
        generator = torch.Generator().manual_seed(1)
        for name, param in adapters.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    return LMPolicy(adapters.base_model.model, tokenizer, cfg, seed=0, adapters=adapters, system_prompt="act")


@pytest.fixture(scope="module")
def sampled(policy):
    prompt = group_prompt(policy, "hidden_number", {"n": 16}, seed=0)
    return prompt, compare_sampling(policy, prompt, ROWS, seed=0, repeats=1)


def test_generated_lengths_count_up_to_the_first_eos():
    new_ids = torch.tensor([[5, 2, 7], [5, 5, 5], [2, 9, 2]])
    assert generated_lengths(new_ids, eos=2).tolist() == [2, 3, 1]


def test_both_samplers_count_their_tokens(policy, sampled):
    prompt, result = sampled
    assert "find the hidden number" in prompt
    assert result["reverie"].tokens == int(result["generation"].lengths.sum())
    for name in ("reverie", "hf"):
        assert ROWS <= result[name].tokens <= ROWS * NEW_TOKENS
        assert result[name].cpu_s > 0


def test_update_rows_hold_prompt_then_action_ending_at_the_last_column(policy, sampled):
    generation = sampled[1]["generation"]
    data = update_rows(generation, policy.pad_token_id, policy.tokenizer.eos_token_id, seed=0)
    width = data.batch.input_ids.shape[1]
    for b, action in enumerate(data.actions):
        row = [*data.prompt, *action]
        assert data.batch.input_ids[b, width - len(row):].tolist() == row
        assert data.batch.response_mask[b].tolist() == [0.0] * (width - len(action)) + [1.0] * len(action)
    assert abs(float(data.row_advantages.mean())) < 1e-6
    assert float(data.row_advantages.std()) == pytest.approx(1.0, abs=1e-4)
    assert data.tokens == sum(len(data.prompt) + len(a) for a in data.actions)


def clipped_token_mean(policy, data) -> float:
    """GRPO's clipped loss by hand: -min(r A, clip(r, 0.8, 1.2) A), averaged over every action token."""
    with torch.no_grad():
        logp = token_logprobs(policy.model, data.batch.input_ids, data.batch.attention_mask)[0]
    ratio = torch.exp(logp - data.old_logp)
    losses = -torch.minimum(ratio * data.advantages, ratio.clamp(0.8, 1.2) * data.advantages)
    mask = data.batch.response_mask
    return float((losses * mask).sum() / mask.sum())


def test_the_updates_first_loss_is_grpos_clipped_token_mean_and_trls_agrees(policy, sampled):
    data = update_rows(sampled[1]["generation"], policy.pad_token_id, policy.tokenizer.eos_token_id, seed=0)
    before = [p.detach().clone() for p in policy.model.parameters()]
    loss, timed = reverie_updates(policy.model, data, lr=1e-3, repeats=1, scored_logits=True)
    assert loss == pytest.approx(clipped_token_mean(policy, data), abs=1e-6)
    assert timed.tokens == data.tokens
    assert all(torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True))  # on a copy
    if trl_missing() is not None:
        pytest.skip(f"TRL: {trl_missing()}")
    trl_loss, _ = trl_updates(policy.adapters, policy.tokenizer, data, pad=policy.pad_token_id,
                              max_new_tokens=NEW_TOKENS, lr=1e-3, repeats=1)
    assert trl_loss == pytest.approx(loss, abs=1e-5)


def test_without_trl_the_update_part_says_so_and_times_reverie_alone(policy, sampled, monkeypatch, capsys):
    import argparse

    import benchmarks.llm_cost as llm_cost

    monkeypatch.setattr(llm_cost, "trl_missing", lambda: "not installed (test)")
    args = argparse.Namespace(seed=0, lr=1e-3, repeats=1, new_tokens=NEW_TOKENS)
    llm_cost.update_part(policy, sampled[1]["generation"], args)
    printed = capsys.readouterr().out
    assert "TRL: not installed (test)" in printed and "Reverie PPOLearner.update" in printed
    assert "TRL GRPOTrainer" not in printed


def test_the_child_runs_peak_memory_is_read_from_outside():
    touch = "block = bytearray(300 * 2**20); block[::4096] = b'x' * len(block[::4096]); import time; time.sleep(1)"
    run = run_child(["-c", touch])
    assert run.returncode == 0
    # the child's own peak: at least its block, far below this (model-loading) test process's own size
    assert 300 * 2**20 <= run.peak_rss_bytes < 350 * 2**20
    assert run.wall_s > 0


def test_a_child_past_the_memory_limit_is_stopped():
    touch = "block = bytearray(400 * 2**20); block[::4096] = b'x' * len(block[::4096]); import time; time.sleep(20)"
    run = run_child(["-c", touch], limit_bytes=200 * 2**20)
    assert run.stopped and run.returncode != 0
    assert run.wall_s < 15


def test_the_iterations_overrides_compose_to_one_default_size_iteration(tmp_path):
    from experiments.config import validate
    from tests.experiments.in_process import compose_config

    overrides = [o for o in train_overrides(8, 8, str(tmp_path), minibatch_size=8) if not o.startswith("hydra.")]
    run = validate(compose_config(overrides))
    assert (run.trainer.iterations, run.trainer.groups_per_iteration * run.trainer.group_size) == (1, 64)
    assert run.algo.ppo.minibatch_size == 8 and run.algo.ppo.micro_batch_size is None
    micro = train_overrides(8, 8, str(tmp_path), micro_batch_size=4)
    run = validate(compose_config([o for o in micro if not o.startswith("hydra.")]))
    assert (run.algo.ppo.minibatch_size, run.algo.ppo.micro_batch_size) == (64, 4)
    assert run.trainer.warm_start.enabled is False and run.trainer.eval_episodes == 1
    assert run.policy.pretrained == "smollm2" and run.policy.lora.rank == 8 and run.algo.name == "grpo"
