"""What the world model says about held-out transitions: latents, teacher-forced log-probabilities,
greedy one-step predictions and open-loop rollouts. Rows are transitions in trajectory order, then
turn order."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from envs.trajectory import Trajectory
from world_model.decoder_context import DecoderContext
from world_model.model import WorldModel
from world_model.protocol import concat_states
from world_model.state import Predictions, WorldState
from world_model.turn_tokens import TurnTokenizer


def normalised(tk: TurnTokenizer, texts: Sequence[str]) -> list[str]:
    """Texts as the model can write them: its words (after the caps) joined back, for exact match."""
    return [tk.decode(w) for w in tk.observation_words(texts)]


def banned_ids(tk: TurnTokenizer) -> list[int]:
    """Ids ``WorldModel.step`` never emits (padding, ``<s>``, unknown, markers)."""
    return [tk.pad_id, tk.bos_id, tk.tokenizer.unk_token_id, tk.obs_id, tk.act_id, tk.res_id, tk.look_id]


@torch.no_grad()
def history_states(
    model: WorldModel, trajectories: Sequence[Trajectory], *, batch_size: int = 64
) -> tuple[WorldState, torch.Tensor]:
    """The state before every turn, folded from the true history (``observations`` are the turns'),
    and ``(R, D)`` the latent after it, with the real outcome folded in (``WorldModel.turn_states``)."""
    model.eval()
    return model.turn_states(trajectories, batch_size=batch_size)


@torch.no_grad()
def token_logps(
    model: WorldModel, states: WorldState, actions: Sequence[str], texts: Sequence[str], *, batch_size: int = 64
) -> list[torch.Tensor]:
    """Per row, the log-probability of each target token of ``texts`` (its words, then ``</s>``)
    after ``actions`` from ``states`` (R rows), under the distribution ``WorldModel.step`` samples
    from: each member's softmax with the banned ids removed, averaged over members."""
    tk = model.tokenizer
    banned = torch.tensor(banned_ids(tk), device=model.device)
    out: list[torch.Tensor] = []
    for start in range(0, len(texts), batch_size):
        stop = start + batch_size
        chunk = states.select(list(range(start, min(stop, len(texts)))))
        query_ids, query_mask = tk.encode_queries(actions[start:stop])  # (B, A)
        text_ids, text_mask = tk.encode_texts(texts[start:stop])  # (B, S)
        text_ids, text_mask = text_ids.to(model.device), text_mask.to(model.device)
        context = DecoderContext(
            chunk.latent, query_ids.to(model.device), query_mask.to(model.device), *model.previous_rows(chunk)
        )
        logits = model.dynamics.logits(context, text_ids[:, :-1]).float()  # (K, B, S - 1, V)
        logits[..., banned] = float("-inf")
        logp = torch.logsumexp(torch.log_softmax(logits, -1), dim=0) - math.log(logits.shape[0])  # (B, S - 1, V)
        target = logp.gather(-1, text_ids[:, 1:, None]).squeeze(-1)  # (B, S - 1)
        lengths = text_mask[:, 1:].sum(-1).tolist()  # (B,)
        out += [row[:n].cpu() for row, n in zip(target, lengths, strict=True)]
    return out


@torch.no_grad()
def greedy_step(
    model: WorldModel, states: WorldState, actions: Sequence[str], *, batch_size: int = 64
) -> tuple[WorldState, Predictions]:
    """``WorldModel.step(greedy=True)`` in chunks; the chunks' states and predictions concatenated."""
    device = getattr(model, "device", torch.device("cpu"))  # open_loop asks only for step()
    gen = torch.Generator(device=device).manual_seed(0)  # greedy never draws from it
    parts = []
    for start in range(0, len(states), batch_size):
        rows = list(range(start, min(start + batch_size, len(states))))
        parts.append(model.step(states.select(rows), actions[start : rows[-1] + 1], generator=gen, greedy=True))
    if not parts:
        raise ValueError("no transitions to predict")
    state = concat_states([s for s, _ in parts])
    preds = [p for _, p in parts]
    merged = {
        name: (sum((getattr(p, name) for p in preds), []) if name == "observations"
               else torch.cat([getattr(p, name) for p in preds]))
        for name in Predictions.__dataclass_fields__
    }
    return state, Predictions(**merged)


def open_loop(
    model, states: WorldState, actions: Sequence[Sequence[str]], wanted: Sequence[Sequence[str]],
    *, batch_size: int = 64,
) -> list[list[bool]]:
    """Replay each row's logged actions through the model, feeding back its own greedy observations.

    ``states`` (R rows) are real history states; ``actions[i]`` the next actions of row ``i`` (any
    number, possibly none) and ``wanted[i]`` the real observations they produced. Returns per row
    ``matches[i][j]``: the model's observation after ``j + 1`` imagined steps equals ``wanted[i][j]``.
    ``model`` needs only ``step(states, actions, generator=, greedy=True)``.
    """
    matches: list[list[bool]] = [[] for _ in actions]
    alive = [i for i, a in enumerate(actions) if a]
    if not alive:
        return matches
    current = states.select(alive)
    j = 0
    while alive:
        current, pred = greedy_step(model, current, [actions[i][j] for i in alive], batch_size=batch_size)
        for i, text in zip(alive, pred.observations, strict=True):
            matches[i].append(text == wanted[i][j])
        j += 1
        keep = [n for n, i in enumerate(alive) if len(actions[i]) > j]
        alive = [alive[n] for n in keep]
        if alive:
            current = current.select(keep)
    return matches


def match_at(matches: Sequence[Sequence[bool]], k: int) -> tuple[float, int]:
    """Share of rows with at least ``k`` steps whose ``k``-th step matched, and how many rows that is."""
    rows = [m[k - 1] for m in matches if len(m) >= k]
    return (sum(rows) / len(rows) if rows else math.nan), len(rows)
