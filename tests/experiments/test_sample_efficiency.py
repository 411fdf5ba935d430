"""The headline benchmark's method table: every method composes into a valid run config."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from experiments.benchmarks.sample_efficiency import ENVS, METHODS, build_parser, run_overrides
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


def test_run_overrides_parse_with_the_run_folder_in_them(tmp_path):
    """The run folder's name (``method=grpo,seed=0``) must reach Hydra as one value."""
    args = build_parser().parse_args(["trainer.eval_episodes=8"])
    run_dir = tmp_path / "hidden_number" / "method=mb_grpo_r0.75,seed=1"
    parsed = OverridesParser.create().parse_overrides(run_overrides("hidden_number", "mb_grpo_r0.75", 1, args, run_dir))
    values = {override.key_or_group: override.value() for override in parsed}
    assert values["hydra.run.dir"] == str(run_dir)
    assert values["trainer.warm_start.cache_dir"] == str(args.out / "warm_starts")  # one per sweep, all envs
    assert values["seed"] == 1 and values["trainer.eval_episodes"] == 8
