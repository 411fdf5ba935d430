"""Held-out evaluation: train and eval seeds never meet, and neither do their tasks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from envs.registry import capabilities, make, unavailable
from envs.splits import is_eval_task, split_seeds, task_split

TASK_ENVS = {
    "frozen_lake": {"size": 4},
    "sokoban": {},
    "minishop": {"num_products": 50},
}
ENV_CONFIGS = Path(__file__).resolve().parents[2] / "experiments" / "conf" / "env"


def hash_fraction(key: str) -> float:
    """The first 8 bytes of sha256(key), big-endian, as a fraction of 2**64."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:16], 16) / 2**64


def task_keys(name: str, kwargs: dict, seeds) -> list[str | None]:
    env = make(name, **kwargs)
    keys = []
    for seed in seeds:
        env.reset(seed)
        keys.append(env.task_key())
    return keys


@pytest.mark.parametrize("name", sorted(TASK_ENVS))
def test_train_and_eval_share_no_seed_and_no_task(name):
    kwargs = TASK_ENVS[name]
    train = [s for seed in range(4) for s in split_seeds(name, kwargs, "train", seed=seed, count=500)]
    evaluation = split_seeds(name, kwargs, "eval", seed=0, count=256)
    assert len(set(train)) == 2000 and len(set(evaluation)) == 256
    assert all(0 <= s < 2**31 for s in train) and all(2**31 <= s < 2**32 for s in evaluation)

    train_keys, eval_keys = task_keys(name, kwargs, train), task_keys(name, kwargs, evaluation)
    assert set(train_keys).isdisjoint(eval_keys)
    assert all(hash_fraction(k) >= 0.2 for k in train_keys) and all(hash_fraction(k) < 0.2 for k in eval_keys)
    assert len(set(eval_keys)) > 1  # evaluation spans a distribution of tasks, not one


def test_small_maps_collide_across_seeds_so_the_task_filter_is_needed():
    kwargs = {"size": 3}
    plain_train = set(task_keys("frozen_lake", kwargs, range(2000)))
    plain_eval = set(task_keys("frozen_lake", kwargs, range(2**31, 2**31 + 256)))
    assert plain_train & plain_eval  # disjoint seed ranges alone would evaluate on training maps

    train = [s for seed in range(4) for s in split_seeds("frozen_lake", kwargs, "train", seed=seed, count=500)]
    evaluation = split_seeds("frozen_lake", kwargs, "eval", seed=0, count=256)
    train_keys = set(task_keys("frozen_lake", kwargs, train))
    eval_keys = set(task_keys("frozen_lake", kwargs, evaluation))
    assert train_keys.isdisjoint(eval_keys) and eval_keys


def test_eval_fraction_is_the_share_of_tasks_held_out():
    keys = [f"task {i}" for i in range(5000)]
    assert abs(sum(map(is_eval_task, keys)) / 5000 - 0.2) < 0.025  # 4.4 standard deviations
    assert abs(sum(is_eval_task(k, 0.5) for k in keys) / 5000 - 0.5) < 0.03
    rooms = set(task_keys("sokoban", {}, range(1000)))
    assert len(rooms) > 900
    assert abs(sum(map(is_eval_task, rooms)) / len(rooms) - 0.2) < 0.06


def test_seeds_are_deterministic_and_depend_on_seed():
    short = split_seeds("sokoban", {}, "train", seed=7, count=40)
    assert split_seeds("sokoban", {}, "train", seed=7, count=100)[:40] == short  # computed afresh
    assert set(split_seeds("sokoban", {}, "train", seed=8, count=40)).isdisjoint(short)
    assert split_seeds("sokoban", {"dim_room": [6, 6]}, "train", seed=7, count=40) == short
    yaml_kwargs = OmegaConf.create({"dim_room": [6, 6]})
    assert split_seeds("sokoban", yaml_kwargs, "train", seed=7, count=40) == short


def test_task_split_agrees_with_the_seeds_drawn():
    env = make("sokoban")
    for split in ("train", "eval"):
        for seed in split_seeds("sokoban", {}, split, seed=3, count=20):
            env.reset(seed)
            assert task_split(env) == split


@pytest.mark.parametrize(("name", "kwargs"), [("hidden_number", {"noise": 0.2}), ("frozen_lake", {})])
def test_envs_without_observable_tasks_split_by_seed_range(name, kwargs):
    train = split_seeds(name, kwargs, "train", seed=0, count=300)
    evaluation = split_seeds(name, kwargs, "eval", seed=0, count=300)
    assert len(set(train)) == len(set(evaluation)) == 300
    assert all(s < 2**31 for s in train) and all(2**31 <= s < 2**32 for s in evaluation)
    env = make(name, **kwargs)
    env.reset(train[0])
    assert env.task_key() is None
    with pytest.raises(ValueError, match="no observable task"):
        task_split(env)


def test_too_few_tasks_to_fill_a_split_fail_clearly():
    # 2x2 lakes: S and G fixed, and of the two other cells at least one frozen: three maps.
    maps = {"SF\nFG", "SF\nHG", "SH\nFG"}
    assert set(task_keys("frozen_lake", {"size": 2}, range(200))) == maps
    fraction = min(map(hash_fraction, maps)) / 2  # no map falls below it: eval has no task
    with pytest.raises(ValueError, match="too few"):
        split_seeds("frozen_lake", {"size": 2}, "eval", seed=0, count=1, eval_fraction=fraction)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"split": "test"}, "split must be"),
        ({"count": -1}, "count must be"),
        ({"eval_fraction": 0.0}, "eval_fraction"),
        ({"eval_fraction": 1.0}, "eval_fraction"),
    ],
)
def test_bad_requests_fail_clearly(arguments, message):
    request = {"split": "train", "seed": 0, "count": 1, **arguments}
    with pytest.raises(ValueError, match=message):
        split_seeds("sokoban", {}, request.pop("split"), **request)


@pytest.mark.parametrize("path", sorted(ENV_CONFIGS.glob("*.yaml")), ids=lambda path: path.stem)
def test_hydra_env_configs_draw_a_task_per_seed_where_the_env_declares_tasks(path):
    config = yaml.safe_load(path.read_text())
    name, kwargs = config["name"], config.get("kwargs") or {}
    if unavailable(name) is not None:
        pytest.skip(unavailable(name))
    keys = task_keys(name, kwargs, [0, 1, 2])
    if not capabilities(name, **kwargs).task_key:
        assert keys == [None] * 3
    else:
        assert None not in keys and len(set(keys)) == 3, path.name
