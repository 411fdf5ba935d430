"""A latent critic's config.json as older code wrote it, upgraded to today's layout on load.

Before ``LatentCriticConfig`` extended the ``critic.latent`` section, config.json nested the
encoder's built config (``{"encoder": {vocab_size, max_tokens, embed_size, feature_size,
conv_layers, kernel_size, readout_channels, latent_size}, "max_observation_words",
"max_action_words", "head_hidden_size"}``). Today the encoder's options sit beside the word caps and
``max_tokens`` follows from them; a folder whose encoder today's critic cannot rebuild is refused.
"""

from __future__ import annotations

from typing import Any

from world_model.turn_tokens import TokenLimits

OLD_ENCODER_DEFAULTS = {"embed_size": 64, "feature_size": 128, "conv_layers": 2, "kernel_size": 3,
                        "readout_channels": 4, "latent_size": 128}
"""The old ``EncoderConfig``'s defaults, for a hand-written file that leaves a key out."""
FIXED = {"kernel_size": 3, "readout_channels": 4}
"""Encoder sizes today's critic always builds with."""


def upgrade_critic_layout(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` in today's layout (unchanged when it has no nested ``encoder``)."""
    if "encoder" not in data:
        return data
    data = dict(data)
    encoder = data.pop("encoder")
    if not isinstance(encoder, dict):
        raise ValueError(f"LatentCriticConfig.encoder must be a JSON object, got {type(encoder).__name__}")
    encoder = {**OLD_ENCODER_DEFAULTS, **encoder}
    for key, value in FIXED.items():
        found = encoder.pop(key)
        if found != value:
            raise ValueError(f"LatentCriticConfig.encoder.{key} must be {value} (the only one the critic builds), "
                             f"got {found!r}")
    if "vocab_size" not in encoder or "max_tokens" not in encoder:
        raise ValueError("LatentCriticConfig.encoder needs vocab_size and max_tokens")
    max_tokens = encoder.pop("max_tokens")
    words = (data.get("max_observation_words"), data.get("max_action_words"))
    if not all(isinstance(n, int) for n in words):
        return {**data, **encoder}  # LatentCriticConfig names the bad cap
    limits = TokenLimits(observation=words[0], action=words[1])
    if max_tokens != limits.encoder_tokens:
        raise ValueError(f"LatentCriticConfig.encoder.max_tokens ({max_tokens}) must be max_observation_words + "
                         f"max_action_words + 3 ({limits.encoder_tokens}), the longest turn row")
    return {**data, **encoder}
