"""Shared fixtures: hidden_number trajectories and tiny world models (sizes chosen for speed)."""

import random

import pytest

import envs
from world_model import TurnTokenizer, WorldModel, WorldModelConfig

TINY = {
    "latent_size": 32,
    "num_members": 3,
    "encoder": {"embed_size": 16, "feature_size": 32, "conv_layers": 1},
    "decoder": {"model_size": 16, "num_layers": 1, "num_heads": 2, "latent_slots": 4},
    "head_hidden": 16,
}


def tiny_model(tokenizer: TurnTokenizer, seed: int = 0, **overrides) -> WorldModel:
    options = {**TINY, **overrides}
    return WorldModel(WorldModelConfig.for_tokenizer(tokenizer, **options), tokenizer, seed=seed)


def hidden_number_trajectories(seed: int, groups: int, agent: str = "mixed") -> list[envs.Trajectory]:
    """Expert and random episodes (``mixed``), or one kind, with ids that never collide."""
    expert = envs.collect(
        envs.ExpertAgent(), "hidden_number", group_size=1, n_groups=groups, seed=seed, progress=False
    )
    if agent == "expert":
        return expert
    random = envs.collect(
        envs.RandomAgent(seed),
        "hidden_number",
        group_size=1,
        n_groups=groups,
        seed=seed + 1,
        progress=False,
        first_group_id=groups,
        first_trajectory_id=groups,
    )
    return random if agent == "random" else expert + random


@pytest.fixture(scope="session")
def hn_tokenizer() -> TurnTokenizer:
    return TurnTokenizer.for_env("hidden_number")


class Clumsy:
    """Random guesses, with malformed actions now and then: rows of several lengths."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def act(self, views):
        return [
            "please guess(3)" if self.rng.random() < 0.3 else v.env.random_action(self.rng) for v in views
        ]


@pytest.fixture(scope="session")
def hn_trajectories() -> list[envs.Trajectory]:
    """Expert, random and clumsy episodes: ragged in turns and in row lengths."""
    clumsy = envs.collect(
        Clumsy(0), "hidden_number", group_size=1, n_groups=4, seed=50, progress=False,
        first_group_id=100, first_trajectory_id=100,
    )  # fmt: skip
    return hidden_number_trajectories(seed=0, groups=6) + clumsy
