"""The decoder's copy path (``world_model.decoder.copy_observation``): the words of the observation the
action was taken in join the decoder's cross-attention memory.

Checked here: the output depends on those words exactly when the option is on; the state carries
the right row through ``initial_state``, ``observe``, ``step`` and ``states_before_turns``; the fit
gives each scored turn its previous observation and the ``<look>`` rows nothing; the cached
sampling path, the member-batched fit path and the plain forward agree; and on a store where each
observation is the previous one with one edit, a tiny fit with the copy path predicts held-out
observations exactly far more often than the same fit without it.
"""

import random

import pytest
import torch

from envs.trajectory import Trajectory, Turn
from tests.world_model.conftest import tiny_model
from world_model import TurnTokenizer, build_training_batch
from world_model.cached_decoding import CachedEnsembleDecoder
from world_model.decoder import DecoderConfig, ObservationDecoder
from world_model.decoder_context import DecoderContext
from world_model.dynamics import EnsembleDynamics
from world_model.turn_tokens import TokenLimits

COPY_DECODER = {"model_size": 16, "num_layers": 1, "num_heads": 2, "latent_slots": 4, "copy_observation": True}
CONFIG = DecoderConfig(vocab_size=30, latent_size=12, max_query_tokens=5, max_text_tokens=14, model_size=16,
                       num_layers=2, num_heads=4, latent_slots=3, copy_observation=True)


def copy_model(tokenizer, seed: int = 0, **overrides):
    return tiny_model(tokenizer, seed=seed, decoder=COPY_DECODER, **overrides)


def text_rows(tk: TurnTokenizer, texts, width: int) -> torch.Tensor:
    """``(B, width)`` the texts' decoder rows ``<s> words </s>`` built word by word, padded."""
    rows = torch.full((len(texts), width), tk.pad_id, dtype=torch.long)
    for b, text in enumerate(texts):
        ids = [tk.bos_id, *tk.observation_words([text])[0], tk.eos_id]
        rows[b, : len(ids)] = torch.tensor(ids)
    return rows


def previous_inputs(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, O)`` random previous-observation rows of different lengths, right-padded with 0."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, CONFIG.max_text_tokens + 1, (rows,), generator=g)
    mask = (torch.arange(CONFIG.max_text_tokens) < lengths[:, None]).long()  # (B, O)
    return torch.randint(3, CONFIG.vocab_size, mask.shape, generator=g) * mask, mask


def decoder_inputs(rows: int = 6, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    latent = torch.randn(rows, CONFIG.latent_size, generator=g)  # (B, D)
    query_ids = torch.randint(3, CONFIG.vocab_size, (rows, CONFIG.max_query_tokens), generator=g)  # (B, A)
    text = torch.randint(3, CONFIG.vocab_size, (rows, 9), generator=g)  # (B, S)
    return latent, query_ids, torch.ones_like(query_ids), text


# --- the decoder -----------------------------------------------------------------------------------


def test_decoder_output_depends_on_the_previous_observation_only_with_the_option_on():
    torch.manual_seed(0)
    decoder = ObservationDecoder(CONFIG).eval()
    latent, query_ids, query_mask, text = decoder_inputs()
    ids, mask = previous_inputs(6, seed=2)
    other = ids.clone()
    other[:, 1] = (ids[:, 1] + 1 - 3) % (CONFIG.vocab_size - 3) + 3  # one different word per row
    with torch.no_grad():
        a = decoder(DecoderContext(latent, query_ids, query_mask, ids, mask), text)
        b = decoder(DecoderContext(latent, query_ids, query_mask, other, mask), text)
        padding_changed = decoder(DecoderContext(latent, query_ids, query_mask, ids.masked_fill(mask == 0, 7), mask), text)
    assert float((a - b).abs().amax(dim=(1, 2)).min()) > 1e-4  # every row moved
    assert torch.equal(a, padding_changed)  # masked words are not read
    with pytest.raises(ValueError, match="needs the rows of the observation acted in"):
        decoder(DecoderContext(latent, query_ids, query_mask), text)

    torch.manual_seed(0)
    strict = ObservationDecoder(DecoderConfig(**{**CONFIG.__dict__, "copy_observation": False})).eval()
    assert not any("copy" in name for name, _ in strict.named_parameters())  # old state dicts still load
    with pytest.raises(ValueError, match="without copy_observation"):
        strict(DecoderContext(latent, query_ids, query_mask, ids, mask), text)


def test_model_output_depends_on_the_state_observation_only_with_the_option_on(hn_tokenizer, hn_trajectories):
    turns = [t.turns[0] for t in hn_trajectories[:6]]
    actions = [u.action for u in turns]
    outcomes = [u.next_observation for u in turns]
    first = [u.observation for u in turns]
    moved = [u.next_observation for u in turns]  # other observations, same latent
    for copying in (True, False):
        model = (copy_model(hn_tokenizer) if copying else tiny_model(hn_tokenizer)).eval()
        state = model.initial_state(first)
        swapped = type(state)(state.latent, state.observations,
                              None if state.observation_ids is None else model.initial_state(moved).observation_ids)
        a = model.disagreement(state, actions, outcomes)
        b = model.disagreement(swapped, actions, outcomes)
        assert bool((a != b).all()) == copying, copying
        assert (state.observation_ids is not None) == copying


# --- the state -------------------------------------------------------------------------------------


def test_the_state_carries_the_latest_observation_row(hn_tokenizer, hn_trajectories):
    tk, model = hn_tokenizer, copy_model(hn_tokenizer).eval()
    width = model.config.decoder.max_text_tokens
    trajectories = hn_trajectories[:5]
    turns = [t.turns[0] for t in trajectories]
    state = model.initial_state([u.observation for u in turns])
    assert torch.equal(state.observation_ids, text_rows(tk, [u.observation for u in turns], width))
    observed = model.observe(state, [u.action for u in turns], [u.next_observation for u in turns])
    assert torch.equal(observed.observation_ids, text_rows(tk, [u.next_observation for u in turns], width))
    stepped, predictions = model.step(state, [u.action for u in turns], generator=torch.Generator().manual_seed(3))
    assert torch.equal(stepped.observation_ids, text_rows(tk, predictions.observations, width))
    assert torch.equal(state.select([2, 0, 2]).observation_ids, state.observation_ids[[2, 0, 2]])
    joined = type(state).concat([state.select([1]), observed.select([3, 4])])
    assert torch.equal(joined.observation_ids, torch.cat([state.observation_ids[[1]], observed.observation_ids[[3, 4]]]))
    before = model.states_before_turns(trajectories)
    wanted = [u.observation for t in trajectories for u in t.turns]
    assert torch.equal(before.observation_ids, text_rows(tk, wanted, width))
    with pytest.raises(ValueError, match="needs WorldState.observation_ids"):
        model.step(type(state)(state.latent, state.observations), [u.action for u in turns],
                   generator=torch.Generator().manual_seed(3))


def test_fit_rows_get_the_previous_observation_and_look_rows_none(hn_tokenizer, hn_trajectories):
    tk, model = hn_tokenizer, copy_model(hn_tokenizer)
    trajectories = hn_trajectories[:7]
    batch = build_training_batch(trajectories, tk)
    ids, mask = model._copy_memory(batch, looks=int(batch.latent_mask.sum()))
    scored = [u.observation for t in trajectories for u in t.turns]  # every turn is played here
    expected = text_rows(tk, scored, ids.shape[1])
    assert torch.equal(ids[: len(scored)], expected)
    assert torch.equal(mask[: len(scored)], (expected != tk.pad_id).long())
    assert ids.shape[0] == len(scored) + sum(t.num_turns + 1 for t in trajectories)
    assert not mask[len(scored) :].any()  # <look> rows: reconstruction from the latent alone


# --- cached sampling, batched fit and plain forward ------------------------------------------------


def test_cached_and_batched_paths_equal_the_plain_forward_with_the_copy_path():
    from world_model.batched_members import member_logits_at

    torch.manual_seed(0)
    dynamics = EnsembleDynamics(CONFIG, num_members=3, head_hidden=8).eval()
    latent, query_ids, query_mask, text = decoder_inputs(rows=6, seed=4)
    query_mask[:, 3:] = 0
    ids, mask = previous_inputs(6, seed=5)
    with torch.no_grad():
        full = torch.log_softmax(dynamics.logits(DecoderContext(latent, query_ids, query_mask, ids, mask), text), -1)  # (K, B, S, V)
        cached = CachedEnsembleDecoder(dynamics.decoders, DecoderContext(latent, query_ids, query_mask, ids, mask), text.shape[1])
        steps = torch.stack([torch.log_softmax(cached.next_logits(text[:, s]), -1) for s in range(text.shape[1])], 2)
        scored = torch.arange(text.shape[1])[None] < torch.tensor([9, 4, 1, 9, 6, 2])[:, None]  # (B, S)
        packed = torch.log_softmax(member_logits_at(dynamics.decoders, DecoderContext(latent, query_ids, query_mask, ids, mask), text,
                                                    scored), -1)  # (K, P, V)
    assert float((steps - full).abs().max()) < 1e-5
    assert float((packed - full[:, scored]).abs().max()) < 1e-5
    assert_generation_agrees_with_and_without_cache(dynamics, latent, query_ids, query_mask, ids, mask)


def assert_generation_agrees_with_and_without_cache(dynamics, latent, query_ids, query_mask, ids, mask) -> None:
    """The same draws give the same words and disagreement through the cached and the uncached sampler."""
    options = dict(bos_id=1, eos_id=2, pad_id=0, banned_ids=[0, 1], max_words=8, greedy=False)
    context = DecoderContext(latent, query_ids, query_mask, ids, mask)
    a = dynamics.generate(context, generator=torch.Generator().manual_seed(6), **options)
    b = dynamics.generate(context, generator=torch.Generator().manual_seed(6),
                          use_cache=False, **options)
    assert torch.equal(a.ids, b.ids)
    assert float((a.disagreement - b.disagreement).abs().max()) < 1e-5


# --- a tiny fit: copy plus one edit ----------------------------------------------------------------

CELLS, EDITED, SYMBOLS = 6, 2, ["a", "b", "c", "d", "e"]


def edit_trajectories(count: int, seed: int, turns: int = 4) -> list[Trajectory]:
    """Each observation a row of ``CELLS`` symbols; ``put x`` writes symbol x at cell ``EDITED``, the
    rest is the previous row unchanged."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        row = [rng.choice(SYMBOLS) for _ in range(CELLS)]
        played = []
        for _ in range(turns):
            symbol = rng.choice(SYMBOLS)
            after = row[:EDITED] + [symbol] + row[EDITED + 1 :]
            played.append(Turn(" ".join(row), f"put {symbol}", " ".join(after), 0.0, False, True, " ".join(row)))
            row = after
        out.append(Trajectory("edit", {}, n, n, n, turns=played))
    return out


def fit_and_match(copying: bool, train, held_out, tokenizer, steps: int = 120, aligned: bool = False) -> float:
    """A tiny fit (one member, plain AdamW on ``WorldModel.loss``), then held-out greedy exact match
    (``aligned``: with ``aligned_copy`` too)."""
    decoder = {"model_size": 32, "num_layers": 1, "num_heads": 2, "latent_slots": 4, "copy_observation": copying,
               "aligned_copy": aligned}
    model = tiny_model(tokenizer, seed=1, num_members=1, decoder=decoder)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(2)
    for _ in range(steps):
        picked = torch.randperm(len(train), generator=g)[:16].tolist()
        loss = model.loss(build_training_batch([train[i] for i in picked], tokenizer))["loss"]
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    states = model.states_before_turns(held_out)
    turns = [u for t in held_out for u in t.turns]
    _, predictions = model.step(states, [u.action for u in turns], generator=g, greedy=True)
    return sum(p == u.next_observation for p, u in zip(predictions.observations, turns, strict=True)) / len(turns)


def test_copy_path_learns_copy_plus_edit_faster_than_the_latent_alone():
    tokenizer = TurnTokenizer.build([*SYMBOLS, "put"], TokenLimits(observation=CELLS, action=2))
    train, held_out = edit_trajectories(64, seed=0), edit_trajectories(16, seed=1)
    on = fit_and_match(True, train, held_out, tokenizer)
    off = fit_and_match(False, train, held_out, tokenizer)
    assert on >= 0.9 and on - off >= 0.5, (on, off)  # measured: 1.0 against 0.016


# --- saved models ----------------------------------------------------------------------------------


def assert_saved_and_loaded_alike(model, folder, trajectories, dropped_field: str | None = None):
    """Save ``model``, optionally delete ``decoder.<dropped_field>`` from its ``config.json`` (a file
    written before that option existed), load it back and check it scores turns exactly as before.
    Returns the loaded model."""
    import json

    from world_model import WorldModel

    model.save_pretrained(folder)
    if dropped_field is not None:
        config = json.loads((folder / "config.json").read_text())
        del config["decoder"][dropped_field]
        (folder / "config.json").write_text(json.dumps(config))
    loaded = WorldModel.from_pretrained(folder)
    turns = [t.turns[0] for t in trajectories[:4]]
    state = model.initial_state([u.observation for u in turns])
    actions, outcomes = [u.action for u in turns], [u.next_observation for u in turns]
    assert torch.equal(loaded.disagreement(state, actions, outcomes), model.disagreement(state, actions, outcomes))
    return loaded


def test_saved_models_load_with_and_without_the_new_field(hn_tokenizer, hn_trajectories, tmp_path):
    for copying in (True, False):
        model = (copy_model(hn_tokenizer) if copying else tiny_model(hn_tokenizer)).eval()
        loaded = assert_saved_and_loaded_alike(model, tmp_path / str(copying), hn_trajectories,
                                               None if copying else "copy_observation")
        assert loaded.config.decoder.copy_observation == copying
