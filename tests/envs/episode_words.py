"""The words an adapter-wrapped env shows and takes over one episode, for vocabulary checks."""

from __future__ import annotations

import random


def episode_words(env, seed: int, rng: random.Random, expert_share: float) -> set[str]:
    """Every word of the observations and actions of one episode from ``seed``, each action the
    expert's with probability ``expert_share``, else a random well-formed one; played to its end or
    its time limit."""
    words = set(env.reset(seed).split())
    done = truncated = False
    while not (done or truncated):
        action = env.expert_action() if rng.random() < expert_share else env.random_action(rng)
        result = env.step(action)
        done, truncated = result.done, result.info["truncated"]
        words |= set(result.observation.split()) | set(action.split())
    return words


def words_missing_from_vocabulary(env, seeds, expert_share: float) -> set[str]:
    """The words of episodes from ``seeds`` (as :func:`episode_words`, one generator seeded 0) that
    ``env.vocabulary()`` lacks: empty when a word tokenizer built from it covers them all."""
    vocabulary, rng = set(env.vocabulary()), random.Random(0)
    return set().union(*(episode_words(env, seed, rng, expert_share) for seed in seeds)) - vocabulary
