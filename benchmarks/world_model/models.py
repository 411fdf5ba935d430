"""The two world models the benchmark compares (``--models latent lm``): how each is built and what
it says, teacher-forced, about held-out transitions. Everything else (greedy steps, open loop) goes
through the world-model seam and does not know which model it scores."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from benchmarks.world_model.data import ENVS
from benchmarks.world_model.scoring import history_states, token_logps
from envs.trajectory import Trajectory
from world_model.config import DecoderSection, WorldModelOptions
from world_model.fitting import fit_any
from world_model.kinds import KINDS
from world_model.lm import LMOptions
from world_model.model import WorldModel
from world_model.protocol import WorldModelLike, WorldStateLike
from world_model.turn_tokens import TurnTokenizer

MODELS = ("latent", "copy", "edit", "ordinal", "lm")
"""``copy`` is the latent model with the decoder's copy path (``world_model.decoder.copy_observation``);
``edit`` adds decoding as an edit of the observation acted in (``world_model.decoder.aligned_copy``);
``ordinal`` is the latent model with ordinal number embeddings (``world_model.ordinal_numbers``)."""
DECODERS = {"latent": {}, "copy": {"copy_observation": True}, "edit": {"copy_observation": True, "aligned_copy": True},
            "ordinal": {}}
"""The decoder options of each latent model."""
OPTIONS = {"ordinal": {"ordinal_numbers": True}}
"""The model-level options of a latent model, beside its decoder's (none: the defaults)."""


def build(kind: str, env: str, *, latent_size: int, members: int, seed: int,
          lm_options: LMOptions | None = None, bootstrap: bool = False) -> WorldModelLike:
    """A fresh model of ``kind`` over the env's words (the LM's shape from ``lm_options``, the latent
    model's from ``latent_size``: each kind is given only the keys it reads; ``bootstrap`` for either's
    members)."""
    if kind not in MODELS:
        raise ValueError(f"unknown world model {kind!r}; choose from {MODELS}")
    spec = ENVS[env]
    tk = TurnTokenizer.for_env(spec.name, spec.kwargs)
    name = "lm" if kind == "lm" else "latent"  # the latent model's variants differ only in their options
    if name == "lm":
        own = {"lm": lm_options or LMOptions()}
    else:
        own = {"latent_size": latent_size, "decoder": DecoderSection(**DECODERS[kind]), **OPTIONS.get(kind, {})}
    options = WorldModelOptions(name=name, num_members=members, bootstrap=bootstrap, **own)
    return KINDS[name].build(options, tk, seed)


def fit(model: WorldModelLike, train: Sequence[Trajectory], steps: int, *, batch_size: int, lr: float,
        seed: int) -> tuple[float, float]:
    """Fit in place (no scoring pass after it); wall and CPU seconds."""
    start, cpu = time.monotonic(), time.process_time()
    fit_any(train, [], model, max_steps=steps, batch_size=batch_size, lr=lr, seed=seed, score_train=False)
    return time.monotonic() - start, time.process_time() - cpu


@torch.no_grad()
def teacher_forced(model: WorldModelLike, held_out: Sequence[Trajectory], *, batch_size: int = 64
                   ) -> tuple[WorldStateLike, list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """The state before every held-out turn; per turn the log-probs of the real next observation's
    tokens under the sampled distribution; ``(R,)`` mean reward and done probability read after the
    real observation."""
    turns = [turn for t in held_out for turn in t.turns]
    actions, outcomes = [turn.action for turn in turns], [turn.next_observation for turn in turns]
    if isinstance(model, WorldModel):
        states, after = history_states(model, held_out, batch_size=batch_size)
        rewards, done_logits = model.dynamics.outcome(after)  # (K, R), (K, R)
        logps = token_logps(model, states, actions, outcomes, batch_size=batch_size)
        return states, logps, rewards.mean(0), torch.sigmoid(done_logits).mean(0)
    states = model.states_before_turns(held_out)
    logps, rewards, dones = [], [], []
    for start in range(0, len(turns), batch_size):
        rows = list(range(start, min(start + batch_size, len(turns))))
        lp, r, d = model.teacher_forced(states.select(rows), actions[rows[0]: rows[-1] + 1],
                                        outcomes[rows[0]: rows[-1] + 1])
        logps += lp
        rewards.append(r.mean(0).cpu())
        dones.append(d.mean(0).cpu())
    return states, logps, torch.cat(rewards), torch.cat(dones)


@torch.no_grad()
def candidate_logps(model: WorldModelLike, states: WorldStateLike, rows: Sequence[int], actions: Sequence[str],
                    texts: Sequence[str], *, batch_size: int = 64) -> list[torch.Tensor]:
    """Per candidate text, its tokens' log-probs after ``actions`` from state ``rows[i]``."""
    if isinstance(model, WorldModel):
        return token_logps(model, states.select(list(rows)), actions, texts, batch_size=batch_size)
    out: list[torch.Tensor] = []
    for start in range(0, len(texts), batch_size):
        stop = start + batch_size
        out += model.teacher_forced(states.select(list(rows[start:stop])), actions[start:stop], texts[start:stop])[0]
    return out


def imagined_steps_per_s(model: WorldModelLike, states: WorldStateLike, actions: Sequence[str], *,
                         batch_size: int = 64, seed: int = 0) -> float:
    """Sampled ``step`` calls over every held-out state in batches: rows per wall second."""
    generator = torch.Generator(device=model.device).manual_seed(seed)
    start = time.monotonic()
    for first in range(0, len(states), batch_size):
        rows = list(range(first, min(first + batch_size, len(states))))
        model.step(states.select(rows), list(actions[rows[0]: rows[-1] + 1]), generator=generator)
    return len(states) / max(time.monotonic() - start, 1e-9)


__all__ = ["MODELS", "build", "candidate_logps", "fit", "imagined_steps_per_s", "teacher_forced"]
