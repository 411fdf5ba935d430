"""What opens a pretrained policy's chat prompt: a system message stating the env's action format, and
optional few-shot turns from the scripted expert.

The default system message is derived from the env itself rather than from a hand-written list: every
env answers a malformed action with an error observation that states its valid format (``envs.base``),
so that answer's first line is quoted, with one well-formed example action when the env can draw one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from envs.registry import capabilities, make
from envs.trajectory import Trajectory

PROBE_SEED = 0  # the task the format is read from: only the format and a random action are shown, no answer
MALFORMED_ACTION = "???"  # no env's parser takes it
EXAMPLE_SEED = 0


def format_answer(env_name: str, env_kwargs: dict[str, Any]) -> str | None:
    """The first line of the env's answer to a malformed action (its format), or None when it took it."""
    env = make(env_name, **env_kwargs)
    env.reset(PROBE_SEED)
    result = env.step(MALFORMED_ACTION)
    if result.info.get("valid", True):
        return None
    lines = [line.strip() for line in result.observation.splitlines() if line.strip()]
    return lines[0] if lines else None


def example_action(env_name: str, env_kwargs: dict[str, Any]) -> str | None:
    """One well-formed action drawn by the env (None when it draws none)."""
    if not capabilities(env_name, **env_kwargs).random_action:
        return None
    env = make(env_name, **env_kwargs)
    env.reset(PROBE_SEED)
    return env.random_action(random.Random(EXAMPLE_SEED))


def env_system_prompt(env_name: str, env_kwargs: dict[str, Any]) -> str:
    """The default system message: reply with one action; the env's own format line; an example."""
    parts = ["You are an agent in a text environment. Reply with your next action only, exactly in the "
             "format the environment accepts, with no explanation."]
    answer = format_answer(env_name, env_kwargs)
    if answer is not None:
        parts.append(f'A malformed action gets this answer, which states the format: "{answer}"')
    example = example_action(env_name, env_kwargs)
    if example is not None:
        parts.append(f"An example of a well-formed action: {example}")
    return "\n".join(parts)


def few_shot_messages(episodes: Sequence[Trajectory]) -> list[dict[str, str]]:
    """Each episode's turns as (user observation, assistant action) pairs, episode after episode."""
    messages = []
    for episode in episodes:
        for turn in episode.turns:
            messages.append({"role": "user", "content": turn.observation})
            messages.append({"role": "assistant", "content": turn.action})
    return messages


def few_shot_episodes(env_name: str, env_kwargs: dict[str, Any], count: int, *, seed: int,
                      max_turns: int | None) -> list[Trajectory]:
    """``count`` episodes of the env's scripted expert on training tasks (never an evaluation task)."""
    from envs.splits import split_seeds
    from policy.warm_start import expert_trajectories

    if count == 0:
        return []
    if not capabilities(env_name, **env_kwargs).expert:
        raise ValueError(f"policy.few_shot={count}: env {env_name} {env_kwargs} has no scripted expert to take "
                         "few-shot episodes from; set policy.few_shot=0")
    seeds = split_seeds(env_name, env_kwargs, "train", seed=seed, count=count)
    return expert_trajectories(env_name, seeds=seeds, env_kwargs=env_kwargs, max_turns=max_turns)


def chat_preamble(env_name: str, env_kwargs: dict[str, Any], *, system_prompt: str | None, few_shot: int,
                  seed: int, max_turns: int | None) -> dict[str, Any]:
    """``LMPolicy``'s ``system_prompt`` and ``prior`` keywords: ``system_prompt`` as given, or the env's
    (None), and the messages of ``few_shot`` expert episodes drawn with ``seed``."""
    system = env_system_prompt(env_name, env_kwargs) if system_prompt is None else system_prompt
    episodes = few_shot_episodes(env_name, env_kwargs, few_shot, seed=seed, max_turns=max_turns)
    return {"system_prompt": system, "prior": few_shot_messages(episodes)}


def run_preamble(env_name: str, env_kwargs: dict[str, Any], policy_config, *, run_seed: int,
                 max_turns: int | None) -> dict[str, Any]:
    """A run's ``chat_preamble`` from its ``policy`` section (few-shot episodes drawn from the run's seed),
    the same for training and for evaluating the saved policy; empty for a tiny policy (no chat template)."""
    from envs.seeding import derive_seed

    if policy_config.pretrained is None:
        return {}
    return chat_preamble(env_name, env_kwargs, system_prompt=policy_config.system_prompt,
                         few_shot=policy_config.few_shot, seed=derive_seed(run_seed, "few-shot"), max_turns=max_turns)
