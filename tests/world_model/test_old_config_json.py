"""A latent world model saved by older code (a config.json without the keys added since) still loads,
with the values that code ran with, and the same weights."""

import json

import torch

from world_model import TurnTokenizer
from world_model.loading import load_world_model
from world_model.model import WorldModelConfig

from .conftest import tiny_model

OLD_CONFIG = {  # hidden_number: 43 ids, caps 21 observation and 8 action words
    "encoder": {"vocab_size": 43, "max_tokens": 32, "embed_size": 16, "feature_size": 32, "conv_layers": 1,
                "kernel_size": 3, "readout_channels": 4, "latent_size": 32},
    "decoder": {"vocab_size": 43, "latent_size": 32, "max_query_tokens": 9, "max_text_tokens": 23, "model_size": 16,
                "num_layers": 1, "num_heads": 2, "latent_slots": 4},
    "max_observation_words": 21,
    "max_action_words": 8,
    "num_members": 3,
    "head_hidden": 16,
    "reconstruction_weight": 1.0,
    "reward_weight": 1.0,
    "done_weight": 1.0,
}
"""Written before ``bootstrap``, ``disagreement``, ``ordinal_numbers`` and the decoder's copy path existed
(no ``kind`` either: the latent model was the only one); max_tokens = 21 + 8 + 3, max_query_tokens = 8 + 1,
max_text_tokens = 21 + 2."""


def test_an_old_config_json_loads_with_the_values_it_ran_with(tmp_path):
    tokenizer = TurnTokenizer.for_env("hidden_number")
    original = tiny_model(tokenizer, seed=2)
    original.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(OLD_CONFIG))
    loaded = load_world_model(tmp_path)
    config = loaded.config
    assert isinstance(config, WorldModelConfig)
    assert (config.num_members, config.head_hidden, config.encoder.latent_size) == (3, 16, 32)
    assert (config.encoder.embed_size, config.encoder.feature_size, config.encoder.conv_layers) == (16, 32, 1)
    assert (config.decoder.model_size, config.decoder.num_layers, config.decoder.latent_slots) == (16, 1, 4)
    # The keys added since take the values the old code ran with (it had none of these features), and
    # disagreement the dataclass default, as the old code loaded it.
    assert (config.bootstrap, config.ordinal_numbers) == (False, False)
    assert (config.decoder.copy_observation, config.decoder.aligned_copy) == (False, False)
    assert config.disagreement == "sum"
    for name, tensor in original.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
