"""Learning curves of the world model on held-out transitions, against exact answers where known.

    python -m experiments.benchmarks.world_model [--sizes 300 1000 3000] [--envs ...] [--quick] [--out DIR]

For each env and each number of real training transitions (``--sizes``), trajectories are
collected with ``RandomAgent`` and ``ExpertAgent`` (alternating, one episode per seed) on
training-split seeds (``envs.splits``), and held-out trajectories the same way on eval-split
seeds (disjoint seed ranges; for frozen_lake's random maps also disjoint maps). Smaller training
sets are prefixes of the largest one (whole trajectories, so a size is reached or slightly
exceeded; the actual count is printed). A fresh ``WorldModel`` is fitted per size for a fixed
number of optimiser steps (``--steps``, one per size, printed with the wall time of each fit).

Envs (``--envs``):

- ``hidden_number`` (noiseless) and ``hidden_number_noisy`` (``noise=0.1``): on every held-out
  transition, the model's NLL (nats, the ensemble's mixture of member distributions) of the next
  tool result against the NLL of the env's exact Bayes predictive
  (``HiddenNumberEnv.predictive_distribution``). The env state at each held-out step is rebuilt by
  resetting with the trajectory's seed and replaying its recorded actions (each replayed answer is
  checked against the recording). The tool result ``guess k : answer`` is fixed by the action
  except for its answer word, so the Bayes predictive of the whole text equals its predictive over
  the answer. Two model numbers are printed: ``text`` (all target tokens of the text, ``</s>``
  included: directly comparable, since Bayes gives the other tokens probability 1) and ``answer``
  (the answer token only, given the true prefix). ``ratio`` is model answer NLL / Bayes NLL.
- ``frozen_lake``: non-slippery random 4x4 maps (``size=4``); no exact NLL is needed since the
  dynamics are deterministic: one-step exact match of the whole greedy next observation
  (``WorldModel.step(greedy=True)``, from the latent of the true history), plus reward accuracy
  (``|reward - true| < 0.5``) and done accuracy (greedy done flag).

Exact match, reward and done accuracy are printed for every env. Writes ``world_model.png`` (the
learning curves) into ``--out``. ``--quick`` is a tiny smoke run (sizes 30 60, a few steps).

Cost: ``fit_world_model`` trains on CPU; about 0.5 s per step (batch 32, default model) on two
shared cores, so the default budget (300 / 600 / 1200 steps, three envs) takes about an hour; pass
smaller ``--steps`` for a quicker, undertrained curve.

Missing: no slippery frozen_lake (its exact next-observation distribution would need its own
comparison), no multi-step (open-loop) rollout error; a single fit seed per size (no error bars).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from envs.agent import ExpertAgent, RandomAgent
from envs.collect import collect
from envs.hidden_number import parse_guess
from envs.registry import make
from envs.splits import split_seeds
from envs.trajectory import Trajectory
from world_model.batch import build_training_batch
from world_model.lightning_module import fit_world_model
from world_model.model import WorldModel, WorldModelConfig
from world_model.state import WorldState
from world_model.turn_tokens import TurnTokenizer

ENVS: dict[str, tuple[str, dict[str, Any]]] = {
    "hidden_number": ("hidden_number", {}),
    "hidden_number_noisy": ("hidden_number", {"noise": 0.1}),
    "frozen_lake": ("frozen_lake", {"size": 4, "is_slippery": False}),
}
DEFAULT_ENVS = ("hidden_number", "hidden_number_noisy", "frozen_lake")
DEFAULT_SIZES = (300, 1000, 3000)
DEFAULT_STEPS = (300, 600, 1200)
QUICK_SIZES = (30, 60)
QUICK_STEPS = (3, 3)


@dataclass(frozen=True)
class Row:
    """One (env, training size) fit, scored on the env's held-out transitions."""

    env: str
    transitions: int
    """Real training transitions actually used (whole trajectories)."""
    steps: int
    fit_s: float
    """Wall seconds of the ``fit_world_model`` call: the steps plus its loss pass over the training set."""
    eval_transitions: int
    exact_match: float
    reward_acc: float
    done_acc: float
    text_nll: float = math.nan
    """Model NLL of the whole tool-result text per transition (hidden_number only)."""
    answer_nll: float = math.nan
    """Model NLL of the answer token per transition (hidden_number only)."""
    bayes_nll: float = math.nan
    """Exact Bayes predictive NLL per transition (hidden_number only)."""

    @property
    def ratio(self) -> float:
        if math.isnan(self.answer_nll) or math.isnan(self.bayes_nll) or self.bayes_nll <= 0:
            return math.nan
        return self.answer_nll / self.bayes_nll


@dataclass
class Result:
    rows: list[Row] = field(default_factory=list)


# --- data -------------------------------------------------------------------------------------------
def collect_pool(env: str, split: str, transitions: int, *, seed: int = 0) -> list[Trajectory]:
    """Alternating Random / Expert episodes on ``split`` seeds until at least ``transitions`` turns."""
    name, kwargs = ENVS[env]
    pool: list[Trajectory] = []
    count, batch = 0, max(4, transitions // 3)
    used = 0
    while count < transitions:
        seeds = split_seeds(name, kwargs, split, seed=seed, count=used + batch)[used:]
        used += len(seeds)
        random_part = collect(RandomAgent(seed=seed + used), name, group_size=1, group_seeds=seeds[0::2],
                              env_kwargs=kwargs, progress=False)
        expert_part = collect(ExpertAgent(), name, group_size=1, group_seeds=seeds[1::2],
                              env_kwargs=kwargs, progress=False)
        for i, seed_ in enumerate(seeds):
            t = (random_part if i % 2 == 0 else expert_part)[i // 2]
            assert t.seed == seed_
            pool.append(t)
            count += t.num_turns
            if count >= transitions:
                break
    return pool


def prefix(pool: Sequence[Trajectory], transitions: int) -> list[Trajectory]:
    """The shortest prefix of whole trajectories with at least ``transitions`` turns."""
    out, count = [], 0
    for t in pool:
        if count >= transitions:
            break
        out.append(t)
        count += t.num_turns
    return out


def bayes_nll(env: str, trajectories: Sequence[Trajectory]) -> list[float]:
    """-log P_bayes(recorded answer) per turn, replaying each trajectory in a fresh env."""
    name, kwargs = ENVS[env]
    out = []
    for t in trajectories:
        real = make(name, **kwargs)
        real.reset(t.seed)
        for turn in t.turns:
            k = parse_guess(turn.action)
            predictive = real.predictive_distribution(k)
            answer = turn.next_observation.split()[-1]
            out.append(-math.log(predictive[answer]))
            result = real.step(turn.action)
            if result.observation != turn.next_observation:
                raise RuntimeError(f"replay of seed {t.seed} diverged: {result.observation!r}")
    return out


# --- scoring ----------------------------------------------------------------------------------------
@torch.no_grad()
def score(model: WorldModel, trajectories: Sequence[Trajectory], *, batch_size: int = 64) -> dict[str, list]:
    """Per held-out transition: text and last-word NLL (ensemble mixture), greedy exact match,
    reward and done correctness. Transitions in trajectory order, turn order."""
    model.eval()
    tk = model.tokenizer
    out: dict[str, list] = {"text": [], "answer": [], "match": [], "reward": [], "done": []}
    gen = torch.Generator(device=model.device).manual_seed(0)
    for start in range(0, len(trajectories), batch_size):
        chunk = [t for t in trajectories[start : start + batch_size] if t.turns]
        batch = build_training_batch(chunk, tk).to(model.device)
        latents = model.encoder.states(
            batch.observation_ids, batch.observation_mask, batch.turn_ids, batch.turn_mask, batch.turn_count
        )  # (B, N + 1, D)
        outcome = batch.outcome_mask  # (B, N)
        before = latents[:, :-1][outcome]  # (R, D)
        texts, mask = batch.text_ids[:, 1:][outcome], batch.text_mask[:, 1:][outcome]  # (R, S)
        logits = model.dynamics.logits(
            before, batch.query_ids[outcome], batch.query_mask[outcome], texts[:, :-1]
        )  # (K, R, S - 1, V)
        logp = torch.logsumexp(torch.log_softmax(logits.float(), -1), dim=0) - math.log(logits.shape[0])
        target = logp.gather(-1, texts[:, 1:, None]).squeeze(-1)  # (R, S - 1)
        scored = mask[:, 1:].float()  # (R, S - 1)
        out["text"] += (-(target * scored).sum(-1)).tolist()
        lengths = mask.sum(-1)  # (R,) <s> words </s>
        last_word = (lengths - 3).clamp(min=0)  # target index of the word before </s>
        out["answer"] += (-target.gather(1, last_word[:, None]).squeeze(1)).tolist()
        turns = [turn for t in chunk for turn in t.turns]
        states = WorldState(before, tuple(turn.observation for turn in turns))
        _, pred = model.step(states, [turn.action for turn in turns], generator=gen, greedy=True)
        wanted = [tk.decode(w) for w in tk.observation_words([turn.next_observation for turn in turns])]
        out["match"] += [float(p == w) for p, w in zip(pred.observations, wanted, strict=True)]
        out["reward"] += [
            float(abs(r - turn.reward) < 0.5) for r, turn in zip(pred.reward.tolist(), turns, strict=True)
        ]
        out["done"] += [float(d == turn.done) for d, turn in zip(pred.done.tolist(), turns, strict=True)]
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


# --- run --------------------------------------------------------------------------------------------
def run(
    envs: Sequence[str] = DEFAULT_ENVS,
    sizes: Sequence[int] = DEFAULT_SIZES,
    steps: Sequence[int] = DEFAULT_STEPS,
    *,
    eval_transitions: int = 500,
    batch_size: int = 32,
    lr: float = 1e-3,
    latent_size: int = 128,
    members: int = 5,
    seed: int = 0,
    log=print,
) -> Result:
    unknown = [e for e in envs if e not in ENVS]
    if unknown:
        raise ValueError(f"unknown envs {unknown}; choose from {sorted(ENVS)}")
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"sizes must be integers >= 1, got {list(sizes)}")
    if len(steps) != len(sizes) or any(not isinstance(s, int) or s < 1 for s in steps):
        raise ValueError(f"steps must be one integer >= 1 per size, got {list(steps)} for {list(sizes)}")
    if eval_transitions < 1:
        raise ValueError(f"eval_transitions must be >= 1, got {eval_transitions}")
    result = Result()
    for env in envs:
        name, kwargs = ENVS[env]
        tk = TurnTokenizer.for_env(name, kwargs)
        pool = collect_pool(env, "train", max(sizes), seed=seed)
        held_out = collect_pool(env, "eval", eval_transitions, seed=seed)
        n_eval = sum(t.num_turns for t in held_out)
        bayes = bayes_nll(env, held_out) if name == "hidden_number" else None
        for size, n_steps in zip(sizes, steps, strict=True):
            train = prefix(pool, size)
            model = WorldModel(
                WorldModelConfig.for_tokenizer(tk, latent_size=latent_size, num_members=members), tk, seed=seed
            )
            start = time.monotonic()
            fit_world_model(train, [], model, max_steps=n_steps, batch_size=batch_size, lr=lr, seed=seed)
            fit_s = time.monotonic() - start
            s = score(model, held_out)
            row = Row(
                env=env,
                transitions=sum(t.num_turns for t in train),
                steps=n_steps,
                fit_s=fit_s,
                eval_transitions=n_eval,
                exact_match=_mean(s["match"]),
                reward_acc=_mean(s["reward"]),
                done_acc=_mean(s["done"]),
                **(
                    {"text_nll": _mean(s["text"]), "answer_nll": _mean(s["answer"]), "bayes_nll": _mean(bayes)}
                    if bayes is not None
                    else {}
                ),
            )
            result.rows.append(row)
            log(format_row(row))
    return result


HEADER = (
    f"{'env':<20} {'train':>6} {'steps':>6} {'fit_s':>7} {'eval':>5} {'match':>6} {'rew':>5} {'done':>5}"
    f" {'nll_text':>8} {'nll_ans':>8} {'nll_bayes':>9} {'ratio':>6}"
)


def _num(value: float, width: int, digits: int) -> str:
    return f"{'-':>{width}}" if math.isnan(value) else f"{value:>{width}.{digits}f}"


def format_row(r: Row) -> str:
    return (
        f"{r.env:<20} {r.transitions:>6d} {r.steps:>6d} {r.fit_s:>7.1f} {r.eval_transitions:>5d}"
        f" {r.exact_match:>6.3f} {r.reward_acc:>5.3f} {r.done_acc:>5.3f}"
        f" {_num(r.text_nll, 8, 3)} {_num(r.answer_nll, 8, 3)} {_num(r.bayes_nll, 9, 3)} {_num(r.ratio, 6, 2)}"
    )


def format_table(result: Result) -> str:
    return "\n".join([HEADER, *(format_row(r) for r in result.rows)])


NOTE = (
    "nll_*: nats per held-out transition. nll_text: model NLL of the whole tool-result text; nll_ans: model\n"
    "NLL of the answer token only; nll_bayes: exact Bayes predictive NLL of the answer (the rest of the\n"
    "text is fixed by the action, so it is also the text's); ratio = nll_ans / nll_bayes (1 is optimal).\n"
    "match: greedy next observation exactly right; rew / done: reward and done flag right."
)


def plot(result: Result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for env in dict.fromkeys(r.env for r in result.rows):
        rows = [r for r in result.rows if r.env == env]
        x = [r.transitions for r in rows]
        right.plot(x, [r.exact_match for r in rows], marker="o", label=env)
        if not math.isnan(rows[0].bayes_nll):
            (line,) = left.plot(x, [r.answer_nll for r in rows], marker="o", label=f"{env} model")
            left.axhline(rows[0].bayes_nll, color=line.get_color(), linestyle="--", label=f"{env} Bayes")
    left.set(xscale="log", xlabel="training transitions", ylabel="answer NLL (nats)", title="hidden_number")
    right.set(xscale="log", xlabel="training transitions", ylabel="greedy exact match", ylim=(0, 1.05),
              title="one-step next observation")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> Result:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.benchmarks.world_model",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS), choices=sorted(ENVS),
                        help="envs to benchmark (hidden_number_noisy: noise=0.1; frozen_lake: non-slippery 4x4 random maps)")
    parser.add_argument("--sizes", nargs="+", type=int, default=None,
                        help=f"real training transitions per fit, the learning curve's x (default {list(DEFAULT_SIZES)})")
    parser.add_argument("--steps", nargs="+", type=int, default=None,
                        help="optimiser steps per fit, one per size, or one for all "
                        f"(default {list(DEFAULT_STEPS)} for the default sizes, else 300 each)")
    parser.add_argument("--eval-transitions", type=int, default=500,
                        help="held-out transitions (eval-split seeds) per env")
    parser.add_argument("--batch-size", type=int, default=32, help="trajectories per training batch")
    parser.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
    parser.add_argument("--latent-size", type=int, default=128, help="world model latent size")
    parser.add_argument("--members", type=int, default=5, help="ensemble members")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data split draw, the agents and the fits")
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny smoke run: sizes {list(QUICK_SIZES)}, {QUICK_STEPS[0]} steps, 40 eval transitions")
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks"), help="folder for world_model.png")
    args = parser.parse_args(argv)
    if args.quick:
        sizes, steps, n_eval = list(args.sizes or QUICK_SIZES), None, 40
        steps = args.steps or [QUICK_STEPS[0]] * len(sizes)
    else:
        sizes, n_eval = list(args.sizes or DEFAULT_SIZES), args.eval_transitions
        steps = args.steps or (list(DEFAULT_STEPS) if sizes == list(DEFAULT_SIZES) else [300] * len(sizes))
    if len(steps) == 1:
        steps = steps * len(sizes)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    print(f"sizes {sizes}, steps per fit {steps}, batch {args.batch_size}, eval transitions >= {n_eval}")
    print(HEADER)
    result = run(args.envs, sizes, steps, eval_transitions=n_eval, batch_size=args.batch_size, lr=args.lr,
                 latent_size=args.latent_size, members=args.members, seed=args.seed)
    print()
    print(format_table(result))
    print(NOTE)
    path = args.out / "world_model.png"
    plot(result, path)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
