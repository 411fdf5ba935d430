"""``trainer.compile``: a checked bool; the learner steps a compiled view whose weights save as the eager ones.

No test waits for Inductor: the learner-level tests never run a forward pass (``torch.compile`` is
lazy), and the in-process run compiles with Dynamo's ``eager`` backend, which traces the update
(so the compiled module really is the one the learner runs) without generating kernels. What the
compiled kernels save is a figure of ``benchmarks/compile_payoff.py``, not a test.
"""

from __future__ import annotations

import pytest
import torch
from hydra.errors import ConfigCompositionException
from lightning.fabric import Fabric
from safetensors.torch import load_file
from torch._dynamo.eval_frame import OptimizedModule

from experiments.checkpoint import list_checkpoints, load_checkpoint
from experiments.config import TrainerConfig, validate
from policy.config import PolicyConfig, PPOConfig
from policy.learner import PPOLearner
from policy.model import build_tiny_lm, build_tiny_tokenizer
from tests.experiments.in_process import compose_config, train_in_process
from tests.experiments.test_train_e2e import TINY

PREFIX = "_orig_mod."  # what an OptimizedModule's own state_dict puts before every key


def tiny_model(seed: int = 0) -> torch.nn.Module:
    cfg = PolicyConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    return build_tiny_lm(cfg, build_tiny_tokenizer(["a", "b", "c"]), seed=seed)


def learner_for(model: torch.nn.Module) -> PPOLearner:
    return PPOLearner(Fabric(accelerator="cpu", devices=1), model, PPOConfig(), seed=0)


def test_compile_defaults_off_and_must_be_a_bool_naming_the_key():
    assert TrainerConfig().compile is False
    assert validate(compose_config(["trainer.compile=true"])).trainer.compile is True
    with pytest.raises(ConfigCompositionException) as info:  # Hydra's type check, at composition
        compose_config(["trainer.compile=maybe"])
    assert "trainer.compile" in str(info.value)
    with pytest.raises(ValueError, match="trainer.compile must be true or false, got 'yes'"):
        TrainerConfig(compile="yes")  # built directly, not through Hydra
    with pytest.raises(ValueError, match="trainer.compile"):
        TrainerConfig(compile=1)


def test_a_compiled_learner_saves_and_loads_the_eager_keys():
    eager_model, compiled_model = tiny_model(), tiny_model()
    eager, compiled = learner_for(eager_model), learner_for(torch.compile(compiled_model, dynamic=True))

    # The learner runs the compiled module, over the very parameters of the original.
    assert isinstance(compiled.policy._forward_module, OptimizedModule)
    assert {id(p) for p in compiled.policy.parameters()} == {id(p) for p in compiled_model.parameters()}
    keys = list(compiled.state_dict()["policy"])
    assert keys == list(eager.state_dict()["policy"]) == list(eager_model.state_dict())
    assert not [k for k in keys if k.startswith(PREFIX)]
    # The optimizer's moments are keyed by parameter position: the same layout either way.
    assert (
        eager.state_dict()["policy_optimizer"]["param_groups"]
        == compiled.state_dict()["policy_optimizer"]["param_groups"]
    )

    # Resume across the switch: an eager learner's state loads into a compiled one and back, exactly.
    with torch.no_grad():
        for p in eager_model.parameters():
            p.add_(1.0)
    compiled.load_state_dict(eager.state_dict())
    for (name, a), b in zip(
        eager_model.state_dict().items(), compiled_model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    eager.load_state_dict(compiled.state_dict())


@pytest.mark.slow
def test_train_with_compile_runs_the_compiled_update_and_saves_plain_keys(tmp_path, monkeypatch):
    calls = []
    compile_ = torch.compile

    def eager_backend_compile(model, **kwargs):  # trace with Dynamo, skip Inductor's minute of codegen
        calls.append((model, kwargs))
        return compile_(model, **{**kwargs, "backend": "eager"})

    monkeypatch.setattr(torch, "compile", eager_backend_compile)
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    run_dir = tmp_path / "run"
    overrides = [*TINY, "algo=grpo", "trainer.compile=true", "trainer.checkpoint_every=1"]
    train_in_process(overrides, run_dir)

    assert calls, "trainer.compile=true never called torch.compile"
    model, kwargs = calls[0]
    assert not isinstance(model, OptimizedModule) and kwargs.get("dynamic") is True
    assert counters["frames"]["ok"] > 0, "the learner never ran the compiled module"

    expected = set(model.state_dict())  # the eager policy's keys
    saved = set(load_file(run_dir / "models" / "policy" / "model.safetensors"))
    assert saved <= expected and not [k for k in saved if PREFIX in k]  # (tied embeddings save once)
    checkpoint = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    assert set(checkpoint.state["learner"]["policy"]) == expected
