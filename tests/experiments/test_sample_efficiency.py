"""The headline benchmark's method table: every method composes into a valid run config."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.benchmarks.sample_efficiency import ENVS, METHODS, build_parser
from experiments.config import register_configs, validate

CONF = Path(__file__).resolve().parents[2] / "experiments" / "conf"


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("env", ENVS)
def test_every_method_is_a_valid_run(env, method):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        run = validate(compose("train", overrides=[f"experiment={env}", *METHODS[method]]))
    assert run.env.name == env
    if method.startswith("mb_"):
        ratio = float(method.rsplit("_r", 1)[1])
        assert run.imagination.ratio == ratio and run.imagination.enabled
    else:
        assert not run.imagination.enabled


def test_defaults_are_known_methods():
    args = build_parser().parse_args([])
    assert set(args.methods) <= set(METHODS) and args.seeds == [0, 1, 2]
