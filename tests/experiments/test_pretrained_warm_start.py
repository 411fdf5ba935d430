"""Behaviour cloning of the expert warm-starts a pretrained LoRA policy: only the adapters move, and the
ledger counts the expert's steps and the success checks' steps. A run without a warm start says why.

The policy is a tiny random Llama saved as a Hugging Face folder (the tiny GGUF file de-quantised into
its cache folder), so these take seconds."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

import experiments.build as build_module
from envs import count_env_steps, make
from experiments.config import validate
from tests.experiments.in_process import compose_config, train_in_process

pytest.importorskip("gguf", reason="pip install gguf (make install does)")

EXPERTS, CHECK_EPISODES = 6, 2
# trainer.max_turns=1: every expert episode and every check episode is exactly one env step, so the
# expert's steps are EXPERTS and the one check (at the last of 3 cloning steps) plays CHECK_EPISODES steps.
WARM = [
    "env=hidden_number", "policy=pretrained", "policy.lora.rank=4", "trainer.max_turns=1",
    f"trainer.warm_start.expert_episodes={EXPERTS}", "trainer.warm_start.max_steps=3",
    "trainer.warm_start.eval_every=100", f"trainer.warm_start.eval_episodes={CHECK_EPISODES}",
    "trainer.warm_start.target_success=1.0", "trainer.warm_start.batch_size=4", "trainer.warm_start.lr=0.05",
    "trainer.progress=false",
]
RUN = ["trainer.iterations=1", "trainer.groups_per_iteration=1", "trainer.group_size=2", "trainer.eval_episodes=2",
       "trainer.eval_every=100", "algo=grpo"]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    from policy.model_source import cached_folder
    from tests.policy.tiny_gguf import write_tiny_gguf

    root = tmp_path_factory.mktemp("tiny_llama")
    write_tiny_gguf(root / "tiny.gguf")
    return cached_folder(root / "tiny.gguf", root / "cache")


def test_cloning_moves_only_the_adapters_and_counts_the_expert_steps(tiny_folder):
    run = validate(compose_config([*WARM, f"policy.pretrained={tiny_folder}"]))
    env_kwargs = dict(run.env.kwargs)
    policy = build_module.build_policy(run, make(run.env.name, **env_kwargs).vocabulary())
    before = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    warm = build_module.warm_start(run, env_kwargs, policy, progress=False)
    after = dict(policy.model.named_parameters())
    adapters = [name for name in before if "lora_" in name]
    assert adapters and len(adapters) < len(before)
    assert all(torch.equal(before[n], after[n]) for n in before if n not in adapters)  # the base is frozen
    assert all(not torch.equal(before[n], after[n]) for n in adapters if "lora_B" in n)  # B starts at 0, moves
    assert count_env_steps(warm.experts) == EXPERTS and warm.check_steps == CHECK_EPISODES


def test_the_ledger_of_a_run_counts_the_pretrained_warm_start(tiny_folder, tmp_path):
    overrides = [*WARM, *RUN, f"policy.pretrained={tiny_folder}"]
    summary = train_in_process(overrides, tmp_path / "run")
    ledger = summary["ledger"]
    assert ledger["warm_start_expert_steps"] == EXPERTS and ledger["warm_start_check_steps"] == CHECK_EPISODES
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["warm_start_env_steps"] == EXPERTS
    assert_the_saved_policy_prompts_as_it_trained(tmp_path / "run", overrides)


def assert_the_saved_policy_prompts_as_it_trained(run_dir: Path, overrides: list[str]) -> None:
    """Evaluating the saved run renders the env's system message it trained with; a record from before
    ``policy.system_prompt`` existed gets the fixed message those runs had."""
    from omegaconf import OmegaConf

    from experiments.saved_run import RUN_CONFIG, find_saved_run, load_policy
    from policy.render import SYSTEM_PROMPT

    OmegaConf.save(compose_config(overrides), run_dir / RUN_CONFIG)  # what Hydra writes beside a run
    policy = load_policy(find_saved_run(run_dir))
    assert '"invalid action . call guess(k) with k in 1 .. 16"' in policy.system_prompt  # hidden_number's answer
    config = run_dir / RUN_CONFIG
    config.write_text("\n".join(line for line in config.read_text().splitlines()
                                 if not line.strip().startswith(("system_prompt:", "few_shot:"))))
    assert load_policy(find_saved_run(run_dir)).system_prompt == SYSTEM_PROMPT


def test_a_run_without_a_warm_start_logs_why(tiny_folder, tmp_path, caplog):
    overrides = [*WARM, *RUN, f"policy.pretrained={tiny_folder}", "trainer.warm_start.enabled=false"]
    with caplog.at_level(logging.INFO, logger="experiments.build"):
        summary = train_in_process(overrides, tmp_path / "run")
    assert "warm start skipped: trainer.warm_start.enabled=false" in caplog.text
    assert summary["ledger"]["warm_start_expert_steps"] == 0
