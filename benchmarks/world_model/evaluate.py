"""Score one fitted model on one env's held-out trajectories: a dict of numbers plus calibration pairs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from benchmarks.world_model.data import EnvSpec, revisits
from benchmarks.world_model.metrics import auroc
from benchmarks.world_model.models import candidate_logps, imagined_steps_per_s, teacher_forced
from benchmarks.world_model.scoring import greedy_step, match_at, normalised, open_loop
from envs.trajectory import Trajectory
from world_model.model import WorldModel
from world_model.protocol import WorldModelLike

HORIZON = 5


@dataclass
class Scores:
    metrics: dict[str, float] = field(default_factory=dict)
    calibration: tuple[list[float], list[bool]] = field(default_factory=lambda: ([], []))
    """(model probability of an outcome class, whether it happened), one pair per class per transition."""


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _quantile(values: torch.Tensor, q: float) -> float:
    return float(torch.quantile(values.double(), q)) if values.numel() else math.nan


def _scores(model: WorldModel, states, actions: Sequence[str], observations: Sequence[str], score: str,
            batch_size: int) -> list[float]:
    """``WorldModel.disagreement`` pooled by ``score``, in chunks: the step's own score on its greedy text."""
    out: list[float] = []
    for start in range(0, len(actions), batch_size):
        rows = list(range(start, min(start + batch_size, len(actions))))
        out += model.disagreement(states.select(rows), actions[start : rows[-1] + 1],
                                  observations[start : rows[-1] + 1], score=score).tolist()
    return out


def evaluate(
    model: WorldModelLike,
    spec: EnvSpec,
    held_out: Sequence[Trajectory],
    exact: Sequence[dict[str, float]] | None = None,
    *,
    batch_size: int = 64,
) -> Scores:
    """See the package docstring for every number. ``exact``: per transition the exact next-observation
    distribution (``exact.exact_distributions``), needed for the ``bayes`` and ``slippery`` kinds."""
    model.eval()
    tk = model.tokenizer
    held_out = [t for t in held_out if t.turns]
    turns = [turn for t in held_out for turn in t.turns]
    actions = [turn.action for turn in turns]
    outcomes = [turn.next_observation for turn in turns]
    # after the real outcome: (R,) mean reward and done probability
    states, logps, rewards, done_probs = teacher_forced(model, held_out, batch_size=batch_size)
    _, pred = greedy_step(model, states, actions, batch_size=batch_size)
    wanted = normalised(tk, outcomes)
    wrong = [p != w for p, w in zip(pred.observations, wanted, strict=True)]
    m = {
        "nll_text": _mean([-float(lp.sum()) for lp in logps]),
        "match": 1.0 - _mean(wrong),
        "reward": _mean([float(abs(r - t.reward) < spec.reward_tolerance) for r, t in zip(pred.reward.tolist(), turns, strict=True)]),
        "done": _mean([float(d == t.done) for d, t in zip(pred.done.tolist(), turns, strict=True)]),
        "reward_tf": _mean([float(abs(r - t.reward) < spec.reward_tolerance)
                            for r, t in zip(rewards.tolist(), turns, strict=True)]),
        "done_tf": _mean([float(d == t.done)
                          for d, t in zip((done_probs > 0.5).tolist(), turns, strict=True)]),
        "wrong": float(sum(wrong)),
        "auroc": auroc(pred.uncertainty.tolist(), wrong),
        "imagined_steps_per_s": imagined_steps_per_s(model, states, actions, batch_size=batch_size),
        "auroc_mean": (auroc(_scores(model, states, actions, pred.observations, "mean", batch_size), wrong)
                       if isinstance(model, WorldModel) else math.nan),
        "unc_p50": _quantile(pred.uncertainty, 0.5),
        "unc_p90": _quantile(pred.uncertainty, 0.9),
    }
    scores = Scores(m)
    if spec.kind in ("bayes", "slippery"):
        if exact is None or len(exact) != len(turns):
            raise ValueError(f"{spec.kind} scoring needs one exact distribution per transition")
        m["nll_exact"] = _mean([-math.log(d[o]) for d, o in zip(exact, outcomes, strict=True)])
        m["ratio"] = m["nll_text"] / m["nll_exact"] if m["nll_exact"] > 0 else math.nan
        rows = [r for r, d in enumerate(exact) for _ in d]
        texts = [text for d in exact for text in d]
        cand = candidate_logps(model, states, rows, [actions[r] for r in rows], texts, batch_size=batch_size)
        # hidden_number: the answer word given the true prefix; frozen_lake: the whole grid.
        picked = [lp[-2] if spec.kind == "bayes" else lp.sum() for lp in cand]
        scores.calibration = ([math.exp(float(x)) for x in picked],
                              [text == outcomes[r] for r, text in zip(rows, texts, strict=True)])
        if spec.kind == "bayes":
            m["nll_answer"] = _mean([-float(lp[-2]) for lp in logps])
    if spec.kind == "deterministic":
        follow, targets = [], []
        for t in held_out:
            for i in range(t.num_turns):
                ahead = t.turns[i : i + HORIZON]
                follow.append([turn.action for turn in ahead])
                targets.append(normalised(tk, [turn.next_observation for turn in ahead]))
        matches = open_loop(model, states, follow, targets, batch_size=batch_size)
        for k in range(1, HORIZON + 1):
            m[f"open_loop_{k}"], m[f"open_loop_{k}_n"] = match_at(matches, k)
    if spec.kind == "shop":
        seen = [r for t in held_out for r in revisits(t)]
        m["revisits"] = float(sum(seen))
        m["revisit_match"] = _mean([float(not w) for w, s in zip(wrong, seen, strict=True) if s])
    return scores
