"""Ordinal number embeddings (``world_model.ordinal_numbers``): integer words get a learned thermometer
component on top of their own embeddings.

Checked here: the integer-value map of a tokenizer and the ranks, worked out by hand; the component
of consecutive numbers differs by exactly one step vector (so "n > g" is linear), equal values share
it, other words get none; the cached sampler, the member-batched fit path and the plain forward
agree with the option on (and the option does change what they compute); the encoder reads the
component; off leaves every existing weight as it was, and a fresh model with it on computes what one
without it does; bad values name the key; a saved model without the field loads as off, one with it
loads with its steps.
"""

import json

import pytest
import torch

from tests.world_model.conftest import tiny_model
from tests.world_model.test_copy_observation import CONFIG, decoder_inputs, previous_inputs
from world_model import TurnTokenizer, WorldModel, WorldModelConfig
from world_model.cached_decoding import CachedEnsembleDecoder
from world_model.config import WorldModelOptions
from world_model.decoder_context import DecoderContext
from world_model.dynamics import EnsembleDynamics
from world_model.encoder import EncoderConfig, LatentStateEncoder
from world_model.ordinal import OrdinalEmbedding, integer_value, value_ranks
from world_model.turn_tokens import TokenLimits

# Token ids 3..9 of a 30-word vocabulary spell 5, 1, 9, 1, 3, 12, 0 (the value 1 twice); the rest are not numbers.
VALUES = [None] * 3 + [5, 1, 9, 1, 3, 12, 0] + [None] * 20
RANKS = [0] * 3 + [4, 2, 5, 2, 3, 6, 1] + [0] * 20  # distinct values 0 1 3 5 9 12 ranked 1..6


def randomised(module: torch.nn.Module, seed: int) -> None:
    """Non-zero ordinal steps (they start at zero, which would hide a path that ignores them)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for part in module.modules():
            if isinstance(part, OrdinalEmbedding):
                part.steps.copy_(torch.randn(part.steps.shape, generator=g))


def test_integer_values_of_a_vocabulary_by_hand():
    assert [integer_value(w) for w in ("7", "07", "12", "-3", "0", "x7", "1.5", "seven", "<s>", "")] == [
        7, 7, 12, -3, 0, None, None, None, None, None]
    tk = TurnTokenizer.build(["guess", "7", "12", "07", "x7", "higher", "0"], TokenLimits(observation=6, action=2))
    vocab = tk.tokenizer.get_vocab()
    expected = [None] * len(tk)
    for word, value in (("7", 7), ("12", 12), ("07", 7), ("0", 0)):
        expected[vocab[word]] = value
    assert tk.integer_values() == expected
    assert value_ranks(VALUES) == RANKS


def test_consecutive_numbers_differ_by_their_step_and_other_words_get_nothing():
    ordinal = OrdinalEmbedding(VALUES, 8)
    assert ordinal.steps.shape == (6, 8) and not ordinal.steps.detach().any()  # six distinct values, zero start
    randomised(ordinal, 0)
    table, steps = ordinal().detach(), ordinal.steps.detach()  # (V, 8), (6, 8)
    by_value = {v: table[i] for i, v in enumerate(VALUES) if v is not None}
    values = sorted(by_value)
    assert torch.equal(by_value[values[0]], steps[0])
    for rank in range(1, len(values)):
        torch.testing.assert_close(by_value[values[rank]] - by_value[values[rank - 1]], steps[rank])
    assert torch.equal(table[4], table[6])  # two words spelling 1
    others = [i for i, v in enumerate(VALUES) if v is None]
    assert not table[others].any()
    # "n > g" is linear: with independent steps, the read-out dual to the first step above g is 1 on the
    # numbers above g and 0 on the others
    for g in values:
        above = torch.linalg.pinv(steps)[:, values.index(g) + 1] if g != values[-1] else torch.zeros(8)  # (8,)
        assert all(abs(float(by_value[v] @ above) - float(v > g)) < 1e-4 for v in values), g


def test_cached_and_batched_paths_equal_the_plain_forward_with_ordinal_numbers():
    from world_model.batched_members import member_logits_at

    torch.manual_seed(0)
    dynamics = EnsembleDynamics(CONFIG, num_members=3, head_hidden=8, integer_values=VALUES).eval()
    randomised(dynamics, 1)
    latent, query_ids, query_mask, text = decoder_inputs(rows=6, seed=4)
    ids, mask = previous_inputs(6, seed=5)
    text[:, 1:5], query_ids[:, 1] = torch.tensor([3, 5, 8, 9]), 7  # number words in all three places
    ids[:, 1] = 4
    with torch.no_grad():
        full = torch.log_softmax(dynamics.logits(DecoderContext(latent, query_ids, query_mask, ids, mask), text), -1)  # (K, B, S, V)
        cached = CachedEnsembleDecoder(dynamics.decoders, DecoderContext(latent, query_ids, query_mask, ids, mask), text.shape[1])
        steps = [torch.log_softmax(cached.next_logits(text[:, s]), -1) for s in range(3)]
        keep = torch.tensor([True, False, True, True, False, True])
        cached.keep(keep)
        steps += [torch.log_softmax(cached.next_logits(text[keep, s]), -1) for s in range(3, text.shape[1])]
        scored = torch.arange(text.shape[1])[None] < torch.tensor([9, 4, 1, 9, 6, 2])[:, None]  # (B, S)
        packed = torch.log_softmax(member_logits_at(dynamics.decoders, DecoderContext(latent, query_ids, query_mask, ids, mask), text,
                                                    scored), -1)  # (K, P, V)
        for decoder in dynamics.decoders:
            decoder.ordinal.steps.zero_()
        without = torch.log_softmax(dynamics.logits(DecoderContext(latent, query_ids, query_mask, ids, mask), text), -1)
    assert float((without - full).abs().max()) > 1e-2  # the component does reach the plain forward
    for s, step in enumerate(steps):
        assert float((step - full[:, keep if s >= 3 else slice(None), s]).abs().max()) < 1e-5, s
    assert float((packed - full[:, scored]).abs().max()) < 1e-5


def test_the_encoder_reads_the_ordinal_component_of_number_words_only():
    config = EncoderConfig(vocab_size=30, max_tokens=8, embed_size=8, feature_size=8, latent_size=8)
    torch.manual_seed(0)
    encoder = LatentStateEncoder(config, VALUES).eval()
    words, numbers = torch.tensor([[20, 21, 22, 23]]), torch.tensor([[20, 3, 9, 23]])
    mask = torch.ones_like(words)
    with torch.no_grad():
        before = [encoder.initial_state(x, mask) for x in (words, numbers)]
        randomised(encoder, 2)
        after = [encoder.initial_state(x, mask) for x in (words, numbers)]
    assert torch.equal(before[0], after[0])
    assert float((before[1] - after[1]).abs().max()) > 1e-3


def test_off_leaves_every_existing_weight_and_a_fresh_model_with_it_on_computes_the_same(
    hn_tokenizer, hn_trajectories
):
    from world_model.trajectory_rows import build_training_batch

    off, on = tiny_model(hn_tokenizer, seed=3), tiny_model(hn_tokenizer, seed=3, ordinal_numbers=True)
    plain, extended = off.state_dict(), on.state_dict()
    added = sorted(k for k in extended if k not in plain)
    assert added == ["dynamics.decoders.0.ordinal.steps", "dynamics.decoders.1.ordinal.steps",
                     "dynamics.decoders.2.ordinal.steps", "encoder.embed.ordinal.steps"]
    assert all(torch.equal(extended[k], v) for k, v in plain.items())
    assert not any("ordinal" in k for k in plain)
    batch = build_training_batch(hn_trajectories[:6], hn_tokenizer)
    with torch.no_grad():
        assert torch.equal(off.eval().loss(batch)["loss"], on.eval().loss(batch)["loss"])


def test_bad_values_name_the_key():
    with pytest.raises(ValueError, match="world_model.ordinal_numbers must be true or false"):
        WorldModelOptions(ordinal_numbers="yes")
    tk = TurnTokenizer.build(["7"], TokenLimits(observation=4, action=2))
    with pytest.raises(ValueError, match="WorldModelConfig.ordinal_numbers must be true or false"):
        WorldModelConfig.for_tokenizer(tk, latent_size=8, ordinal_numbers=1)


def test_the_option_reaches_the_saved_config_and_a_config_without_it_loads_as_off(
    hn_tokenizer, hn_trajectories, tmp_path
):
    assert WorldModelConfig.from_options(hn_tokenizer, WorldModelOptions(ordinal_numbers=True)).ordinal_numbers
    turns = [t.turns[0] for t in hn_trajectories[:4]]
    actions, outcomes = [u.action for u in turns], [u.next_observation for u in turns]
    for on in (True, False):
        folder = tmp_path / str(on)
        model = tiny_model(hn_tokenizer, ordinal_numbers=on).eval()
        randomised(model, 4)
        model.save_pretrained(folder)
        config = json.loads((folder / "config.json").read_text())
        assert config["ordinal_numbers"] is on
        if not on:  # a config.json written before the option existed
            del config["ordinal_numbers"]
            (folder / "config.json").write_text(json.dumps(config))
        loaded = WorldModel.from_pretrained(folder)
        assert loaded.config.ordinal_numbers == on
        assert (loaded.encoder.embed.ordinal is not None) == on
        state = model.initial_state([u.observation for u in turns])
        assert torch.equal(loaded.disagreement(state, actions, outcomes), model.disagreement(state, actions, outcomes))
