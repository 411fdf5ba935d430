"""``env.success_reward``: the threshold that makes an imagined episode a success, configurable and
defaulting to each env's own rule (the adapters' depend on their reward option)."""

from __future__ import annotations

import pytest

import imagination.imagine as imagine_module
from envs.registry import ENVIRONMENTS, make, unavailable
from experiments.config import validate
from imagination.config import ImaginationConfig
from imagination.dream_env import SUCCESS_REWARD, default_success_reward
from imagination.imagine import imagine_groups
from tests.experiments.in_process import compose_config


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_hand_written_envs_keep_their_thresholds(name):
    assert default_success_reward(make(name)) == SUCCESS_REWARD[name]


@pytest.mark.skipif(unavailable("textarena") is not None, reason=str(unavailable("textarena")))
def test_textarena_partial_credit_on_a_loss_stays_below_the_threshold():
    best_loss = 1 - 1 / 19  # GuessTheNumber-v0 (1..20): the last guess one off the hidden number
    strict = default_success_reward(make("textarena", game="GuessTheNumber-v0", reward="textarena"))
    assert best_loss < strict < 1.0
    assert default_success_reward(make("textarena", game="GuessTheNumber-v0")) == 0.5  # 0/1 rewards


def test_gym_text_threshold_follows_its_success_reward():
    threshold = default_success_reward(make("gym_text", success_reward=2.0))
    assert threshold < 2.0 and threshold > 1.99


class Captured(Exception):
    pass


def test_imagine_groups_hands_the_configured_threshold_to_every_dream_env(monkeypatch):
    def factory(*args, **options):
        raise Captured(options)

    monkeypatch.setattr(imagine_module, "DreamEnvFactory", factory)
    with pytest.raises(Captured) as caught:
        imagine_groups(None, None, "hidden_number", {}, [(None, 0)], group_size=1, config=ImaginationConfig(),
                       seed=0, success_reward=0.25)
    assert caught.value.args[0]["success_reward"] == 0.25


def test_the_config_key_is_validated_and_reaches_the_run():
    run = validate(compose_config(["env=hidden_number", "env.success_reward=0.7"]))
    assert run.env.success_reward == 0.7
    assert validate(compose_config(["env=hidden_number"])).env.success_reward is None
    with pytest.raises(Exception, match="success_reward"):
        validate(compose_config(["env=hidden_number", "env.success_reward=abc"]))
