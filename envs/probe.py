"""Probe episodes: the text an env produces, for an env whose vocabulary nobody wrote down.

A third-party env cannot list its words, so the adapters play a few seeded episodes (random
well-formed actions where the env has them, mixed with a malformed one so the error answers show
up, each played to its end so the out-of-turns lines show up too) and read off every observation
and action. The tokenizer is built from these texts.
"""

from __future__ import annotations

import random

from envs.base import Env

MALFORMED_PROBE = "?"  # an action no game parses: its answer is the env's error text


def probe_texts(env: Env, *, episodes: int = 16, seed: int = 0) -> list[str]:
    """Observations and actions of ``episodes`` probe episodes of ``env`` (seeds ``seed ..``), in order.

    Uses ``env.random_action`` when the env offers one (its ``capabilities`` say so), the malformed
    probe every third turn and otherwise. The env is left after the last probe episode: reset it
    before use.
    """
    rng = random.Random(seed)
    sample = env.random_action if offers_random_actions(env) else None
    texts: list[str] = []
    for episode in range(episodes):
        texts.append(env.reset(seed + episode))
        for turn in range(env.max_turns):
            action = sample(rng) if sample is not None and turn % 3 != 1 else MALFORMED_PROBE
            result = env.step(action)
            texts += [action, result.observation]
            if result.done or result.info.get("truncated", False):
                break
    return texts


def offers_random_actions(env: Env) -> bool:
    """Whether ``env.random_action`` works: the method always exists on an adapter (which raises
    for a game without a rule), so its declared capability decides where there is one."""
    capabilities = getattr(env, "capabilities", None)
    if capabilities is not None:
        return bool(capabilities.random_action)
    return callable(getattr(env, "random_action", None))
