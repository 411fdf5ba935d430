"""The ensemble's members: K causal LMs (or K LoRA adapters on one frozen LM) and their outcome heads.

``Members.run(k, ...)`` calls member ``k`` as a plain Hugging Face causal LM: K separate models
(tiny ones built from a config, or K full copies of a pretrained one), or one pretrained model with K
LoRA adapters (``peft``), where member ``k`` is adapter ``m{k}`` made active for the call. Every
member's adapter stays trainable whichever is active, so one loss summed over members trains all.

Reward and done come from small heads on the last hidden state at the observation's closing token,
not from special tokens: a reward is a real number (sokoban's range is -0.1 to 10.9), which a token
would have to bin, and each member's head gives the spread across members the bias controls read,
the same way the latent model's heads do.
"""

from __future__ import annotations

import copy
import os

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from world_model.lm.config import LMOptions

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def tiny_lm(options: LMOptions, *, vocab_size: int, max_positions: int, pad: int, bos: int, eos: int) -> nn.Module:
    """A freshly initialised Llama of ``options``' shape and dtype (draws from the global RNG: seed around it)."""
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=options.hidden_size, intermediate_size=options.intermediate_size,
        num_hidden_layers=options.num_layers, num_attention_heads=options.num_heads,
        num_key_value_heads=options.num_heads, max_position_embeddings=max_positions, tie_word_embeddings=True,
        pad_token_id=pad, bos_token_id=bos, eos_token_id=eos,
    )
    return LlamaForCausalLM(config).to(DTYPES[options.dtype])  # float32: no-op, the weights as drawn


def load_local(path: str | os.PathLike, dtype: str):
    """A pretrained model and its tokenizer from a local folder only (``local_files_only=True``)."""
    path = os.fspath(path)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"world_model.lm.pretrained={path!r} is not a local Hugging Face model folder "
                                "(no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=DTYPES[dtype],
                                                 use_safetensors=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer


def lm_from_config(base_config: dict, dtype: str) -> nn.Module:
    """An uninitialised-weights model of a saved pretrained config (weights are loaded after)."""
    config = AutoConfig.for_model(**base_config)
    return AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype])


class OutcomeHead(nn.Module):
    """Reward and done logit from one hidden state: ``(B, H)`` -> ``(B,)``, ``(B,)``."""

    def __init__(self, hidden: int, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden, width), nn.Tanh(), nn.Linear(width, 2))

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(h.float())  # (B, 2)
        return out[:, 0], out[:, 1]


class Members(nn.Module):
    """K members over one ``base`` model (see the module docstring); ``base`` is used as member 0 and
    copied (full) or adapted (``lora_rank >= 1``) for the others."""

    def __init__(self, base: nn.Module, num_members: int, *, lora_rank: int = 0, lora_alpha: float = 16.0,
                 copies: list[nn.Module] | None = None) -> None:
        super().__init__()
        self.num_members, self.lora = num_members, lora_rank > 0
        if self.lora:
            from peft import LoraConfig, get_peft_model

            config = LoraConfig(r=lora_rank, lora_alpha=lora_alpha, lora_dropout=0.0, target_modules="all-linear")
            peft = get_peft_model(base, config, adapter_name="m0")
            for k in range(1, num_members):
                peft.add_adapter(f"m{k}", config)
            self.models = nn.ModuleList([peft.base_model.model])  # the model with the adapters injected
            self._peft = [peft]  # a list: not registered twice as a submodule
            self._train_adapters()
        else:
            others = copies if copies is not None else [copy.deepcopy(base) for _ in range(num_members - 1)]
            self.models = nn.ModuleList([base, *others])

    def _train_adapters(self) -> None:
        for name, p in self.models[0].named_parameters():
            p.requires_grad_("lora_" in name)

    def model(self, k: int) -> nn.Module:
        """Member ``k`` as a causal LM (for LoRA: the shared model with adapter ``m{k}`` active)."""
        if not 0 <= k < self.num_members:
            raise IndexError(f"member {k} of {self.num_members}")
        if not self.lora:
            return self.models[k]
        self._peft[0].base_model.set_adapter(f"m{k}")
        self._train_adapters()  # set_adapter freezes the inactive adapters; a summed loss trains every one
        return self.models[0]

    def run(self, k: int, **inputs):
        return self.model(k)(**inputs)

    @property
    def hidden_size(self) -> int:
        return self.models[0].config.hidden_size
