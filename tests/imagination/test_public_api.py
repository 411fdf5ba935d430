"""``imagination`` exports the dream env's names, and they are the definitions."""

import importlib

import pytest

import imagination


@pytest.mark.parametrize("name", ["DreamEnv", "DreamEnvFactory", "DreamStepper", "SUCCESS_REWARD"])
def test_public_name_is_exported(name):
    assert name in imagination.__all__
    value = getattr(imagination, name)
    assert getattr(importlib.import_module("imagination.dream_env"), name) is value


def test_every_env_has_a_success_rule():
    from envs.registry import ENVIRONMENTS

    assert set(imagination.SUCCESS_REWARD) == set(ENVIRONMENTS)
