"""``CriticConfig``: the ``critic`` Hydra group, which critic values states and the shape of each.

The ``token`` section declares the token critic's options once (``TokenCriticConfig`` extends it with
the vocabulary) and the ``latent`` section the latent critic's (``LatentCriticConfig.from_section``);
the vocabulary and row lengths come from the tokenizer at build time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envs.checks import check_choice, check_int

CRITICS = ("token", "latent")


@dataclass
class TokenCriticSection:
    """The token critic, a small decoder over the prompt ids the policy saw (``critic.token.*``)."""

    hidden_size: int = 32
    """Width of the decoder."""
    num_layers: int = 1
    """Decoder blocks."""
    num_heads: int = 2
    """Attention heads; must divide hidden_size."""
    intermediate_size: int = 64
    """Width of each block's MLP."""

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size"):
            check_int(f"critic.token.{name}", getattr(self, name), 1)
        if self.hidden_size % self.num_heads:
            raise ValueError(f"critic.token.num_heads ({self.num_heads}) must divide critic.token.hidden_size "
                             f"({self.hidden_size})")


@dataclass
class LatentCriticSection:
    """The latent critic, the world model's history encoder with a value head (``critic.latent.*``)."""

    latent_size: int = 64
    """Size D of the history latent (the GRU state)."""
    embed_size: int = 32
    """Width of its token embeddings and convolutions."""
    feature_size: int = 64
    """Width of one turn's feature, the GRU's input."""
    conv_layers: int = 2
    """Residual convolution blocks over each turn's words (0: none)."""
    head_hidden_size: int = 64
    """Hidden width of the value head's MLP (0: a linear head)."""
    max_observation_words: int | None = None
    """Words kept of each observation or tool result; None uses the env's own cap
    (``world_model.default_token_limits``, which cuts no observation the env can emit)."""
    max_action_words: int | None = None
    """Words kept of each action; None uses the env's own cap."""

    def __post_init__(self) -> None:
        for name in ("latent_size", "embed_size", "feature_size"):
            check_int(f"critic.latent.{name}", getattr(self, name), 1)
        for name in ("conv_layers", "head_hidden_size"):
            check_int(f"critic.latent.{name}", getattr(self, name), 0)
        for name in ("max_observation_words", "max_action_words"):
            check_int(f"critic.latent.{name}", getattr(self, name), 1, optional=True)


@dataclass
class CriticConfig:
    name: str = "token"
    """Which critic values states for the critic-based algorithms: ``token``, a small decoder over the
    prompt ids the policy saw (ppo_turn, ppo_token, sppo); ``latent``, the world model's history
    encoder with a value head, reading the episode so far (ppo_turn, sppo; it has no per-token values)."""
    token: TokenCriticSection = field(default_factory=TokenCriticSection)
    """Sizes of the token critic."""
    latent: LatentCriticSection = field(default_factory=LatentCriticSection)
    """Sizes and word caps of the latent critic; the counterfactual step groups' critic uses them too."""
    init: str | None = None
    """A saved critic of this kind to start from (its folder, or a run folder that saved one): the run
    builds the critic as configured and loads those weights. Refused at start, naming this key, when it
    was saved for another env, other env options or another tokenizer (``experiments/init_models.py``)."""

    def __post_init__(self) -> None:
        check_choice("critic.name", self.name, CRITICS)
        if isinstance(self.token, dict):  # built by hand rather than by Hydra
            self.token = TokenCriticSection(**self.token)
        if isinstance(self.latent, dict):
            self.latent = LatentCriticSection(**self.latent)
