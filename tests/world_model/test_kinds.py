"""world_model.kinds: the one table of world-model kinds that validation, build, fit and load read."""

import pytest

from world_model import TurnTokenizer
from world_model.config import WorldModelOptions
from world_model.fitting import fit_any
from world_model.kinds import KINDS, kind_named, kind_of
from world_model.lightning_module import fit_world_model
from world_model.lm.fit import fit_lm_world_model
from world_model.lm.model import LMWorldModel
from world_model.loading import load_world_model
from world_model.model import WorldModel


def test_the_table_names_each_kind_with_its_class_and_fit():
    assert {name: (kind.model, kind.fit) for name, kind in KINDS.items()} == {
        "latent": (WorldModel, fit_world_model), "lm": (LMWorldModel, fit_lm_world_model)}


def test_an_unknown_name_is_refused_by_key_with_the_kinds():
    with pytest.raises(ValueError, match=r"world_model.name must be one of \('latent', 'lm'\), got 'rnn'"):
        WorldModelOptions(name="rnn")
    with pytest.raises(ValueError, match="world_model.name"):
        kind_named("rnn")
    with pytest.raises(TypeError, match="no fit known for str"):
        fit_any([], [], "not a model")


@pytest.mark.parametrize("name", ["latent", "lm"])
def test_each_kind_builds_saves_and_loads_as_its_own_class(name, tmp_path):
    tokenizer = TurnTokenizer.for_env("hidden_number")
    own = {"latent": {"latent_size": 8, "encoder": {"embed_size": 4, "feature_size": 8, "conv_layers": 0},
                      "decoder": {"model_size": 4, "num_layers": 1, "num_heads": 1, "latent_slots": 1}},
           "lm": {"lm": {"hidden_size": 8, "intermediate_size": 8, "num_layers": 1, "num_heads": 1}}}[name]
    options = WorldModelOptions(name=name, num_members=2, head_hidden=4, **own)
    model = kind_named(name).build(options, tokenizer, 0)
    assert type(model) is {"latent": WorldModel, "lm": LMWorldModel}[name]
    assert kind_of(model) is KINDS[name]
    model.save_pretrained(tmp_path)
    assert type(load_world_model(tmp_path)) is type(model)


def test_the_config_knows_exactly_the_kinds_of_the_table():
    from world_model.config import KIND_NAMES

    assert KIND_NAMES == tuple(KINDS)
