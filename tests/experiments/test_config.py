"""Hydra composes every group option; typos, wrong types and out-of-range values fail at start."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from experiments.config import TrainerConfig, WarmStartConfig, register_configs, validate

CONF = Path(__file__).resolve().parents[2] / "experiments" / "conf"
register_configs()


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def compose_train(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="train", overrides=overrides)


@pytest.mark.parametrize("group", ["env", "algo", "trainer"])
def test_every_option_of_a_group_composes_and_validates(group):
    assert options(group), f"no options in conf/{group}"
    for option in options(group):
        run = validate(compose_train([f"{group}={option}"]))
        if group == "algo":
            assert run.algo.name == option
        if group == "env":
            assert run.env.name == option


def test_pretrained_policy_option_needs_a_path():
    cfg = compose_train(["policy=pretrained", "policy.pretrained=/models/qwen"])
    assert validate(cfg).policy.pretrained == "/models/qwen"


def test_typo_in_a_key_fails_naming_it():
    with pytest.raises(ConfigCompositionException) as info:
        compose_train(["algo.gama=0.9"])
    assert "gama" in str(info.value.__cause__ or info.value)


def test_wrong_type_fails():
    with pytest.raises((ConfigCompositionException, ValidationError)):
        compose_train(["trainer.iterations=many"])


def test_out_of_range_value_fails_naming_the_key():
    with pytest.raises(ValueError, match="algo.gamma"):
        validate(compose_train(["algo.gamma=1.5"]))
    with pytest.raises(ValueError, match="trainer.group_size"):
        validate(compose_train(["trainer.group_size=0"]))


def test_micro_batch_size_reaches_the_ppo_config_and_a_bad_one_fails_naming_it():
    assert validate(compose_train([])).algo.ppo.micro_batch_size is None  # the whole minibatch per pass
    assert validate(compose_train(["algo.ppo.micro_batch_size=4"])).algo.ppo.micro_batch_size == 4
    with pytest.raises(ValueError, match="micro_batch_size must be an integer >= 1"):
        validate(compose_train(["algo.ppo.micro_batch_size=0"]))


def test_a_switch_that_is_not_a_bool_fails_naming_it():
    with pytest.raises((ConfigCompositionException, ValidationError)) as info:
        compose_train(["world_model.ordinal_numbers=maybe"])
    assert "ordinal_numbers" in str(info.value.__cause__ or info.value)


def test_unknown_algorithm_name_fails():
    with pytest.raises(ValueError, match="algo.name"):
        validate(compose_train(["algo.name=reinforce"]))


@pytest.mark.parametrize("group", ["critic", "world_model", "imagination", "policy"])
def test_every_option_of_the_model_groups_composes_and_validates(group):
    assert options(group), f"no options in conf/{group}"
    for option in options(group):
        overrides = [f"{group}={option}"] + (["policy.pretrained=/models/x"] if option == "pretrained" else [])
        validate(compose_train(overrides))


@pytest.mark.parametrize("key", [
    "world_model.encoder.embed_sze=16",  # a typo inside a section
    "critic.latent.latent_embed_size=16",  # the old prefix inside the new section
    "critic.latent_size=16",  # an old flat key
    "world_model.embed_size=16",
    "world_model.decoder.feature_size=16",  # an encoder key in the decoder's section
])
def test_a_wrong_nested_key_fails_naming_it(key):
    with pytest.raises(ConfigCompositionException) as info:
        compose_train([key])
    assert key.split("=")[0].split(".")[-1] in str(info.value.__cause__ or info.value)


def test_nested_sections_reach_the_models_and_name_their_keys():
    run = validate(compose_train(["critic=latent", "critic.latent.embed_size=24", "critic.token.hidden_size=48",
                                  "world_model.encoder.conv_layers=0", "world_model.decoder.latent_slots=2"]))
    assert (run.critic.latent.embed_size, run.critic.token.hidden_size) == (24, 48)
    assert (run.world_model.encoder.conv_layers, run.world_model.decoder.latent_slots) == (0, 2)
    for override, key in (("critic.token.num_heads=3", "critic.token.num_heads"),
                          ("critic.latent.conv_layers=-1", "critic.latent.conv_layers"),
                          ("world_model.decoder.num_heads=3", "world_model.decoder.num_heads"),
                          ("world_model.encoder.embed_size=0", "world_model.encoder.embed_size")):
        with pytest.raises(ValueError, match=key):
            validate(compose_train([override]))


def test_the_default_sections_build_the_models_the_flat_options_built():
    """The defaults, spelled out as the old flat keys set them, give the same saved-model configs."""
    from critic import LatentCriticConfig, TokenCriticConfig
    from world_model import TurnTokenizer, WorldModelConfig, default_token_limits

    run = validate(compose_train([]))
    tokenizer = TurnTokenizer.build(["guess", "higher", "lower"], default_token_limits("hidden_number", {}))
    assert WorldModelConfig.from_options(tokenizer, run.world_model) == WorldModelConfig.for_tokenizer(
        tokenizer, latent_size=128, num_members=5, head_hidden=64,
        encoder={"embed_size": 64, "feature_size": 128, "conv_layers": 2},
        decoder={"model_size": 64, "num_layers": 2, "num_heads": 4, "latent_slots": 8})
    assert LatentCriticConfig.from_section(tokenizer, run.critic.latent) == LatentCriticConfig.for_tokenizer(
        tokenizer, latent_size=64, head_hidden_size=64, embed_size=32, feature_size=64, conv_layers=2)
    assert TokenCriticConfig(vocab_size=9, **vars(run.critic.token)) == TokenCriticConfig(
        vocab_size=9, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)


def test_a_checkpoints_flat_config_record_upgrades_to_the_nested_one():
    """A record written before the sections (the old defaults, spelled out) compares equal after upgrading."""
    from experiments.config_renames import upgrade_record
    from experiments.resume import config_differences, config_record

    current = config_record(validate(compose_train(["critic=latent"])))
    old = {**current,
           "critic": {"name": "latent", "hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64,
                      "latent_size": 64, "latent_embed_size": 32, "latent_feature_size": 64, "latent_conv_layers": 2,
                      "latent_head_hidden_size": 64, "latent_max_observation_words": None,
                      "latent_max_action_words": None},
           "world_model": {"latent_size": 128, "num_members": 5, "head_hidden": 64, "embed_size": 64,
                           "feature_size": 128, "conv_layers": 2, "model_size": 64, "num_layers": 2, "num_heads": 4,
                           "latent_slots": 8, "max_observation_words": None, "max_action_words": None}}
    assert config_differences(old, current)  # the flat record alone differs
    # It also predates world_model.disagreement, so it ran with the mean per token: that one key differs.
    assert config_differences(upgrade_record(old), current) == ["world_model.disagreement"]
    current = config_record(validate(compose_train(["critic=latent", "world_model.disagreement=mean"])))
    assert config_differences(upgrade_record(old), current) == []
    assert upgrade_record(upgrade_record(old)) == upgrade_record(old) == current
    assert upgrade_record(old)["world_model"]["ordinal_numbers"] is False  # plain word embeddings then
    changed = {**old, "critic": {**old["critic"], "latent_embed_size": 16}}
    assert config_differences(upgrade_record(changed), current) == ["critic.latent.embed_size"]


def test_every_section_field_reaches_the_model_config():
    """Non-default values for every field, so a field the build drops (keeping its default) shows."""
    from critic import LatentCriticConfig
    from world_model import TurnTokenizer, WorldModelConfig, default_token_limits

    run = validate(compose_train([
        "world_model.latent_size=24", "world_model.num_members=3", "world_model.head_hidden=20",
        "world_model.encoder.embed_size=12", "world_model.encoder.feature_size=14", "world_model.encoder.conv_layers=1",
        "world_model.decoder.model_size=18", "world_model.decoder.num_layers=3", "world_model.decoder.num_heads=3",
        "world_model.decoder.latent_slots=5", "world_model.decoder.copy_observation=true",
        "world_model.ordinal_numbers=true",
        "critic.latent.latent_size=10", "critic.latent.embed_size=6", "critic.latent.feature_size=7", "critic.latent.conv_layers=3", "critic.latent.head_hidden_size=0"]))
    tokenizer = TurnTokenizer.build(["guess", "higher", "lower"], default_token_limits("hidden_number", {}))
    assert WorldModelConfig.from_options(tokenizer, run.world_model) == WorldModelConfig.for_tokenizer(
        tokenizer, latent_size=24, num_members=3, head_hidden=20, ordinal_numbers=True,
        encoder={"embed_size": 12, "feature_size": 14, "conv_layers": 1},
        decoder={"model_size": 18, "num_layers": 3, "num_heads": 3, "latent_slots": 5, "copy_observation": True})
    assert LatentCriticConfig.from_section(tokenizer, run.critic.latent) == LatentCriticConfig.for_tokenizer(
        tokenizer, latent_size=10, head_hidden_size=0, embed_size=6, feature_size=7, conv_layers=3)


def test_warm_start_takes_transcripts_or_random_actions_not_both():
    with pytest.raises(ValueError, match="transcripts or random_actions"):
        WarmStartConfig(transcripts="a.jsonl", random_actions=True)
    with pytest.raises(ValueError, match="trainer.env_step_timeout_s"):
        TrainerConfig(env_step_timeout_s=0)


@pytest.mark.parametrize(("overrides", "key", "kind"), [
    (["world_model=lm", "world_model.decoder.copy_observation=true"], "decoder.copy_observation", "lm"),
    (["world_model=lm", "world_model.latent_size=64"], "latent_size", "lm"),
    (["world_model.lm.history_turns=2"], "lm.history_turns", "latent"),
])
def test_a_world_model_key_the_chosen_kind_does_not_read_is_refused_naming_it(overrides, key, kind):
    with pytest.raises(ValueError, match=rf"world_model\.{key} is read only by the \w+ world model; "
                                         rf"world_model\.name={kind} does not use it"):
        validate(compose_train(overrides))


def test_the_lm_world_model_takes_the_ensemble_options_it_reads():
    run = validate(compose_train(["world_model=lm", "world_model.bootstrap=true", "world_model.disagreement=max"]))
    assert (run.world_model.bootstrap, run.world_model.disagreement) == (True, "max")
