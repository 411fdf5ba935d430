"""Configuration of the LM world model: the user's options (``LMOptions``, the ``world_model.lm``
section) and the saved model's whole shape (``LMWorldModelConfig``, written to config.json: those
options, the ensemble's, and the tokenizer's sizes)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from world_model.ensemble_options import EnsembleOptions

DTYPES = ("float32", "bfloat16")
TINY_SHAPE = ("hidden_size", "intermediate_size", "num_layers", "num_heads")
"""The options that shape tiny members; a pretrained checkpoint brings its own shape."""


def _check_int(owner: str, name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{owner}.{name} must be an integer >= {least}, got {value!r}")


@dataclass
class LMOptions:
    """How to build an LM world model (``world_model=lm``; the ensemble size is ``world_model.num_members``)."""

    history_turns: int = 4
    """Turns of history in the prompt besides the first observation (the policy's window); its cost
    per imagined step grows with it."""
    hidden_size: int = 64
    """Tiny model: width of each member's decoder."""
    intermediate_size: int = 128
    """Tiny model: width of its MLP."""
    num_layers: int = 2
    """Tiny model: decoder blocks."""
    num_heads: int = 4
    """Tiny model: attention heads; must divide hidden_size."""
    pretrained: str | None = None
    """A local Hugging Face model folder to start every member from (its own tokenizer and chat
    template; read with ``local_files_only=True``); None builds tiny members over the env's words."""
    lora_rank: int = 0
    """With ``pretrained``: 0 fine-tunes every member in full (K copies of the model); r >= 1 trains
    K LoRA adapters of rank r on one frozen copy."""
    lora_alpha: float = 16.0
    """LoRA scaling numerator (the update is scaled by lora_alpha / lora_rank)."""
    dtype: str = "float32"
    """Weights' dtype: ``float32`` or ``bfloat16`` (bf16 for a GPU)."""
    device: str | None = None
    """Where the model lives, is fitted and samples: ``cpu`` or ``cuda`` / ``cuda:N``; None (the default)
    puts it on the trainer's device (the CPU outside a run)."""

    def __post_init__(self) -> None:
        owner = "world_model.lm"
        _check_int(owner, "history_turns", self.history_turns, 0)
        for name in ("hidden_size", "intermediate_size", "num_layers", "num_heads"):
            _check_int(owner, name, getattr(self, name), 1)
        _check_int(owner, "lora_rank", self.lora_rank, 0)
        if self.hidden_size % self.num_heads:
            raise ValueError(f"{owner}.num_heads ({self.num_heads}) must divide {owner}.hidden_size ({self.hidden_size})")
        if self.dtype not in DTYPES:
            raise ValueError(f"{owner}.dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.device is not None and not (
            self.device == "cpu" or self.device == "cuda" or re.fullmatch(r"cuda:\d+", self.device)
        ):
            raise ValueError(f"{owner}.device must be null, cpu, cuda or cuda:N, got {self.device!r}")
        if self.lora_rank and self.pretrained is None:
            raise ValueError(f"{owner}.lora_rank needs {owner}.pretrained (LoRA adapts a pretrained model)")
        if not self.lora_alpha > 0:
            raise ValueError(f"{owner}.lora_alpha must be > 0, got {self.lora_alpha!r}")

    def check_all_read(self, owner: str = "world_model.lm") -> None:
        """Refuse, naming it, an option set away from its default that this build would drop: a tiny
        member's shape with ``pretrained``, ``lora_alpha`` without LoRA. For the user's config only (a
        saved model's options load as they were built)."""
        defaults = LMOptions()
        if self.pretrained is not None:
            for name in TINY_SHAPE:
                if getattr(self, name) != getattr(defaults, name):
                    raise ValueError(f"{owner}.{name} shapes tiny members only; with {owner}.pretrained the "
                                     "checkpoint's own shape is used (leave it at its default)")
        if self.lora_rank == 0 and self.lora_alpha != defaults.lora_alpha:
            raise ValueError(f"{owner}.lora_alpha scales LoRA adapters only; it needs {owner}.lora_rank >= 1")


@dataclass
class LMWorldModelConfig(EnsembleOptions):
    """Everything needed to rebuild a saved ``LMWorldModel`` without the env or the network: the
    ``world_model`` group's ensemble options (``EnsembleOptions``, declared once there; the same
    options and scale as the latent model's), its ``lm`` section and the tokenizer's sizes."""

    options: LMOptions
    """How the members were built."""
    max_observation_words: int
    """The env word caps (``TokenLimits``) of the model's ``TurnTokenizer``."""
    max_action_words: int
    """See ``max_observation_words``."""
    vocab_size: int
    """Length of the env word tokenizer (``TurnTokenizer``)."""
    reward_weight: float = 1.0
    """Weight of the reward MSE in the loss."""
    done_weight: float = 1.0
    """Weight of the done BCE in the loss."""
    base_config: dict | None = None
    """A pretrained model's Hugging Face config (filled when built from ``options.pretrained``), so a
    saved model is rebuilt from its own folder."""
    kind: str = "lm"
    """Tells ``world_model.loading`` which model a folder holds (a key of ``world_model.kinds``)."""

    def __post_init__(self) -> None:
        if isinstance(self.options, dict):
            self.options = LMOptions(**self.options)
        for name in ("max_observation_words", "max_action_words", "vocab_size"):
            _check_int("LMWorldModelConfig", name, getattr(self, name), 1)
        self.check_ensemble("LMWorldModelConfig")
        for name in ("reward_weight", "done_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"LMWorldModelConfig.{name} must be a number >= 0, got {value!r}")
        if self.kind != "lm":
            raise ValueError(f"LMWorldModelConfig.kind must be 'lm', got {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
