"""How well a world model predicts real transitions it is shown one step at a time.

``one_step_accuracy`` folds each real history into the model's state (teacher forcing: the true history,
never the model's own outputs), asks the model's ``step`` for its greedy next observation, and
compares it with what the env really answered. The training loop reads it on the newest real data
before refitting, so it is a held-out figure: the model has not yet been fitted on those turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from envs.trajectory import Trajectory
from world_model.protocol import WorldModelLike


@dataclass(frozen=True)
class OneStepAccuracy:
    """Shares over ``transitions`` real turns (NaN when there were none)."""

    exact_match: float
    """The greedy next observation equals the real one, word for word (after the word caps)."""
    reward: float
    """The predicted reward is within 0.5 of the real one."""
    done: float
    """The greedy done flag equals the real one."""
    transitions: int

    def as_metrics(self, prefix: str = "wm/") -> dict[str, float]:
        return {f"{prefix}one_step_exact_match": self.exact_match, f"{prefix}one_step_reward_acc": self.reward,
                f"{prefix}one_step_done_acc": self.done, f"{prefix}one_step_transitions": float(self.transitions)}


@torch.no_grad()
def one_step_accuracy(
    model: WorldModelLike, trajectories: Sequence[Trajectory], *, batch_size: int = 64
) -> OneStepAccuracy:
    """Greedy one-step predictions of every turn of ``trajectories`` against the recorded outcome.

    Turns restored from a branch prefix are scored too: they are real transitions. Greedy decoding
    leaves no generator state behind, so scoring never changes what a later sampled step draws.
    """
    was_training = model.training
    model.eval()
    tk = model.tokenizer
    matches: list[float] = []
    rewards: list[float] = []
    dones: list[float] = []
    episodes = [t for t in trajectories if t.turns]
    unused = torch.Generator(device=model.device)  # greedy steps draw nothing from it
    for start in range(0, len(episodes), batch_size):
        chunk = episodes[start : start + batch_size]
        turns = [turn for t in chunk for turn in t.turns]
        states = model.states_before_turns(chunk)  # one row per turn: the state before it
        if len(states) != len(turns):
            raise RuntimeError(f"one_step_accuracy: {len(states)} states for {len(turns)} turns")
        _, predicted = model.step(states, [turn.action for turn in turns], generator=unused, greedy=True)
        wanted = [tk.decode(w) for w in tk.observation_words([turn.next_observation for turn in turns])]
        matches += [float(p == w) for p, w in zip(predicted.observations, wanted, strict=True)]
        rewards += [float(abs(r - t.reward) < 0.5) for r, t in zip(predicted.reward.tolist(), turns, strict=True)]
        dones += [float(d == t.done) for d, t in zip(predicted.done.tolist(), turns, strict=True)]
    model.train(was_training)
    n = len(matches)

    def share(values: list[float]) -> float:
        return sum(values) / n if n else float("nan")

    return OneStepAccuracy(share(matches), share(rewards), share(dones), n)
