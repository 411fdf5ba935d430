"""Hydra composes every group option; typos, wrong types and out-of-range values fail at start."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from experiments.config import register_configs, validate

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


def test_unknown_algorithm_name_fails():
    with pytest.raises(ValueError, match="algo.name"):
        validate(compose_train(["algo.name=reinforce"]))
