"""A tiny env for the policy's tests, and a minimal rollout loop over it.

EchoEnv shows ``say <word>`` each turn; the expert (and the only rewarded action) repeats the word.
An action that is not one known word gets an error answer (``info["valid"] = False``), as the Env
contract says. Independent of the real envs and of ``envs.collect``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from envs.agent import AgentView, SampledAction
from envs.base import StepResult, ensure_not_done
from envs.trajectory import Trajectory, Turn

WORDS = ("red", "green", "blue", "cat", "dog", "sun", "moon", "tree", "fish", "bird", "rock", "star")
ERROR = "invalid : reply with one word"


def hand_turn(observation: str, action: str, next_observation: str, valid: bool = True, reward: float = 0.0) -> Turn:
    """A Turn built by hand for rendering/encoding tests."""
    return Turn(observation, action, next_observation, reward, False, valid, observation)


class EchoEnv:
    """Each turn shows a word; repeating it earns 1. ``max_turns`` words per episode, drawn from the seed."""

    name = "echo"

    def __init__(self, max_turns: int = 3, words: Sequence[str] = WORDS) -> None:
        self.max_turns = max_turns
        self.words = tuple(words)
        self.targets: list[str] = []
        self.turn = 0
        self.done = True
        self.correct = False  # every turn so far was rewarded

    def reset(self, seed: int) -> str:
        rng = random.Random(seed)
        self.targets = [rng.choice(self.words) for _ in range(self.max_turns)]
        self.turn, self.done, self.correct = 0, False, True
        return self.anchor_observation()

    def anchor_observation(self) -> str:
        return f"say {self.targets[self.turn]}" if self.turn < self.max_turns else "done"

    def step(self, action: str) -> StepResult:
        ensure_not_done(self.done, self.name)
        words = action.split()
        valid = len(words) == 1 and words[0] in self.words
        reward = 1.0 if valid and words[0] == self.targets[self.turn] else 0.0
        self.correct = self.correct and reward > 0
        self.turn += 1
        self.done = self.turn >= self.max_turns
        observation = self.anchor_observation() if valid else f"{ERROR}\n{self.anchor_observation()}"
        return StepResult(observation, reward, self.done, {"valid": valid, "success": self.done and self.correct})

    def expert_action(self) -> str:
        return self.targets[self.turn]

    def random_action(self, rng: random.Random) -> str:
        return rng.choice(self.words)

    def vocabulary(self) -> list[str]:
        return [*self.words, "say", "done", *ERROR.split()]


def rollout(agent, make_env: Callable[[], EchoEnv], seeds: Sequence[int]) -> list[Trajectory]:
    """Play one episode per seed, all envs stepped together with one batched ``agent.act`` per turn."""
    envs = [make_env() for _ in seeds]
    trajectories = [Trajectory(env.name, {}, seed, i, i) for i, (env, seed) in enumerate(zip(envs, seeds, strict=True))]
    observations = [env.reset(seed) for env, seed in zip(envs, seeds, strict=True)]
    live = list(range(len(envs)))
    while live:
        views = [AgentView(envs[i], trajectories[i].turns, observations[i]) for i in live]
        actions = agent.act(views)
        for i, action in zip(live, actions, strict=True):
            sample = action if isinstance(action, SampledAction) else None
            text = action.text if sample is not None else action
            anchor = envs[i].anchor_observation()
            result = envs[i].step(text)
            trajectories[i].turns.append(
                Turn(observations[i], text, result.observation, result.reward, result.done, result.info["valid"], anchor,
                     sample=sample)
            )
            observations[i] = result.observation
        live = [i for i in live if not envs[i].done]
    for trajectory in trajectories:
        trajectory.success = all(turn.reward > 0 for turn in trajectory.turns)
    return trajectories


def turn_accuracy(trajectories: Sequence[Trajectory]) -> float:
    """Fraction of turns whose action was rewarded."""
    turns = [turn for trajectory in trajectories for turn in trajectory.turns]
    return sum(turn.reward > 0 for turn in turns) / len(turns)
