"""One way to build a fresh world model from the ``world_model/`` config group, for every entry point."""

from __future__ import annotations

from typing import Any

from world_model import TurnTokenizer, WorldModel, WorldModelConfig, token_limits
from world_model.config import WorldModelOptions
from world_model.lm import LMWorldModel, LMWorldModelConfig


def build_world_model(
    options: WorldModelOptions, env_name: str, env_kwargs: dict[str, Any], vocabulary: list[str], *, seed: int
) -> WorldModel | LMWorldModel:
    """A world model over the env's words (``world_model.name``: latent or lm), with the env's word caps
    unless ``world_model.max_*_words`` set them, initialised from ``seed``."""
    limits = token_limits(
        env_name, dict(env_kwargs), observation=options.max_observation_words, action=options.max_action_words,
        option_names=("world_model.max_observation_words", "world_model.max_action_words"),
    )
    tokenizer = TurnTokenizer.build(vocabulary, limits)
    if options.name == "lm":
        config = LMWorldModelConfig(options.lm, limits.observation, limits.action, len(tokenizer),
                                    num_members=options.num_members, head_hidden=options.head_hidden,
                                    disagreement=options.disagreement)
        return LMWorldModel(config, tokenizer, seed=seed).to(options.lm.device)
    return WorldModel(WorldModelConfig.from_options(tokenizer, options), tokenizer, seed=seed)
