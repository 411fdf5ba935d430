"""A small token-level critic: a tiny Llama decoder with a linear value head on the prompt ids.

The method ``TokenCritic.token_values`` gives one value per position, which token-level PPO
(``ppo_token``) aligns with its action tokens through ``critic.token_alignment.token_values``;
``forward`` gives the value at the last prompt position, the state before the turn, which makes it
a ``TurnCritic`` for turn-level PPO (``ppo_turn``). Saved as
``model.safetensors`` plus ``config.json`` through ``PyTorchModelHubMixin``.
"""

# No ``from __future__ import annotations``: ``PyTorchModelHubMixin`` reads the ``config`` annotation
# at runtime to rebuild the dataclass from config.json, and a string annotation defeats that.

from dataclasses import dataclass

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from transformers import LlamaConfig, LlamaModel

from critic.base import CriticStates
from critic.config import TokenCriticSection
from envs.token_positions import position_ids_for


@dataclass(kw_only=True)
class TokenCriticConfig(TokenCriticSection):
    """The token critic as built: its options (``TokenCriticSection``, the YAML's ``critic.token``
    section, declared once there) plus the sizes that come from the policy's tokenizer."""

    vocab_size: int
    """Number of token ids (the tokenizer's ``len``)."""
    max_position_embeddings: int = 512
    """Longest row (in tokens) the rotary embedding is prepared for."""

    def __post_init__(self) -> None:  # every field, the section's too, named as this class's
        for name in (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "intermediate_size",
            "max_position_embeddings",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"TokenCriticConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"TokenCriticConfig.hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})"
            )


class TokenCritic(nn.Module, PyTorchModelHubMixin):
    """A Llama decoder backbone with a linear value head.

    Weights are drawn from ``seed`` alone, whatever ran before, and the global torch RNG is left as
    it was. ``from_pretrained`` rebuilds with the default seed and then loads every weight, so the
    seed a saved critic was built with does not matter there.
    """

    def __init__(self, config: TokenCriticConfig, *, seed: int = 0) -> None:
        super().__init__()
        self.config = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.backbone = LlamaModel(
                LlamaConfig(
                    vocab_size=config.vocab_size,
                    hidden_size=config.hidden_size,
                    intermediate_size=config.intermediate_size,
                    num_hidden_layers=config.num_layers,
                    num_attention_heads=config.num_heads,
                    num_key_value_heads=config.num_heads,
                    max_position_embeddings=config.max_position_embeddings,
                )
            )
            self.head = nn.Linear(config.hidden_size, 1)

    def token_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` ids and mask -> ``(B, L)`` float values; column ``t`` values the prefix ``<= t``, 0 on padding."""
        hidden = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_for(attention_mask),
            use_cache=False,
        ).last_hidden_state  # (B, L, H)
        values = self.head(hidden).squeeze(-1).float()  # (B, L)
        return torch.where(attention_mask.bool(), values, torch.zeros_like(values))

    def forward(self, states: CriticStates) -> torch.Tensor:
        """``(N,)`` values at the last prompt column: the value of the state before the turn."""
        ends_in_padding = ~states.attention_mask[:, -1].bool()  # (N,)
        if bool(ends_in_padding.any()):
            rows = ends_in_padding.nonzero().flatten().tolist()
            raise ValueError(f"CriticStates rows {rows} end in padding: prompts must be left-padded and non-empty")
        return self.token_values(states.input_ids, states.attention_mask)[:, -1]  # (N,)
