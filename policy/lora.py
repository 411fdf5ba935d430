"""LoRA adapters on a pretrained policy (``peft``), the KL reference they imply, and how such a policy is saved.

The policy keeps sampling and training the Hugging Face model itself (``peft_model.base_model.model``, the
adapters injected into its linear layers), so the KV-cache sampler and the learner see the same class
as without LoRA; the ``PeftModel`` around it is kept for what only it does: switching the adapters off
and saving them.

The KL reference is the same model with its adapters switched off (peft's ``disable_adapter()``), never
a second copy of the weights: with the frozen base, that is exactly the policy RL started from, since
peft initialises every adapter's B matrix to zero.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from policy.config import LoRAConfig

ADAPTER_DIR = "adapter"  # a saved LoRA policy's adapters (adapter_model.safetensors + adapter_config.json)


def add_lora(model: torch.nn.Module, cfg: LoRAConfig, *, seed: int):
    """``model`` wrapped in a ``PeftModel`` with adapters on ``cfg.targets``; the base weights are frozen.
    The adapters' A matrices are drawn from ``seed`` (the global torch RNG is left as it was)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                        target_modules=list(cfg.targets), task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            return get_peft_model(model, config)
        except ValueError as error:  # e.g. no module of the model has one of these names
            reason = " ".join(str(error).split())
            raise ValueError(f"policy.lora.targets={list(cfg.targets)}: {reason}") from None


class AdaptersOff(torch.nn.Module):
    """The KL reference of a LoRA policy: its own model, called with the adapters switched off.

    The ``PeftModel`` is held outside the module tree, so the learner's ``requires_grad_(False)``,
    ``eval()`` and ``.to()`` on the reference touch nothing of the policy, and the reference has no
    state of its own to save.
    """

    def __init__(self, peft_model) -> None:
        super().__init__()
        object.__setattr__(self, "peft_model", peft_model)  # not registered as a submodule, on purpose

    def forward(self, **inputs):
        model = self.peft_model.base_model.model  # the Hugging Face model the policy runs
        was_training = model.training
        model.eval()
        try:
            with self.peft_model.disable_adapter():
                return model(**inputs)
        finally:
            model.train(was_training)


def save_lora_policy(peft_model, tokenizer, folder: Path, *, save_merged: bool) -> None:
    """The adapters (safetensors) in ``folder/adapter``; with ``save_merged`` the merged model too, as a
    plain Hugging Face folder in ``folder`` (what a saved run evaluates, no peft needed)."""
    folder = Path(folder)
    peft_model.save_pretrained(folder / ADAPTER_DIR, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    if save_merged:
        merged = copy.deepcopy(peft_model).merge_and_unload()  # a copy: the policy keeps training its adapters
        merged.save_pretrained(folder)
