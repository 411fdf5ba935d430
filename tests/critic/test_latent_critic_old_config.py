"""A latent critic saved by older code (config.json nesting the encoder's built config) still loads."""

import json

import pytest
import torch

from critic.latent_critic import LatentCritic, LatentCriticConfig
from world_model.turn_tokens import TurnTokenizer

TOKENIZER = TurnTokenizer.for_env("hidden_number")  # 43 ids, caps 21 observation and 8 action words

OLD_CONFIG = {
    "encoder": {"vocab_size": 43, "max_tokens": 32, "embed_size": 16, "feature_size": 24, "conv_layers": 1,
                "kernel_size": 3, "readout_channels": 4, "latent_size": 8},
    "max_observation_words": 21,
    "max_action_words": 8,
    "head_hidden_size": 12,
}
"""As the old ``asdict(LatentCriticConfig)`` wrote it; max_tokens = 21 + 8 + 3."""


def saved_with_old_config(folder, old_config):
    config = LatentCriticConfig(latent_size=8, embed_size=16, feature_size=24, conv_layers=1, head_hidden_size=12,
                                vocab_size=43, max_observation_words=21, max_action_words=8)
    critic = LatentCritic(config, TOKENIZER, seed=3)
    critic.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(old_config))
    return critic


def test_an_old_layout_config_loads_as_the_same_critic(tmp_path):
    original = saved_with_old_config(tmp_path, OLD_CONFIG)
    loaded = LatentCritic.from_pretrained(tmp_path)
    assert loaded.config == LatentCriticConfig(latent_size=8, embed_size=16, feature_size=24, conv_layers=1,
                                               head_hidden_size=12, vocab_size=43, max_observation_words=21,
                                               max_action_words=8)
    assert loaded.config.encoder.max_tokens == 32
    for name, tensor in original.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    # Saving again writes today's layout, which loads back unchanged.
    loaded.save_pretrained(tmp_path / "again")
    assert "encoder" not in json.loads((tmp_path / "again" / "config.json").read_text())
    assert LatentCritic.from_pretrained(tmp_path / "again").config == loaded.config


@pytest.mark.parametrize(("key", "value", "message"), [
    ("kernel_size", 5, "encoder.kernel_size must be 3"),
    ("readout_channels", 2, "encoder.readout_channels must be 4"),
    ("max_tokens", 40, r"encoder.max_tokens \(40\) must be max_observation_words \+ max_action_words \+ 3 \(32\)"),
])
def test_an_old_encoder_todays_critic_cannot_build_is_refused_by_name(tmp_path, key, value, message):
    saved_with_old_config(tmp_path, {**OLD_CONFIG, "encoder": {**OLD_CONFIG["encoder"], key: value}})
    with pytest.raises(ValueError, match=message):
        LatentCritic.from_pretrained(tmp_path)
