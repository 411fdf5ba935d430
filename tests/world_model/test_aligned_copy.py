"""Decoding as an edit (``world_model.decoder.aligned_copy``): the logit of the word at the same place
in the observation acted in gets a learned bonus.

Checked here: the two pure functions against values worked out by hand; with the bonus made large,
an untrained decoder's greedy output is the observation acted in, word for word (the place each
logit predicts is one ahead of its own); the cached sampler, the member-batched fit path and the
plain forward agree; the option needs the copy path and fails at start without it; a tiny fit on
copy-plus-edit data gets held-out observations right; saved models without the field load as off.
"""

import pytest
import torch

from tests.world_model.test_copy_observation import (
    CONFIG,
    SYMBOLS,
    assert_generation_agrees_with_and_without_cache,
    assert_saved_and_loaded_alike,
    decoder_inputs,
    edit_trajectories,
    fit_and_match,
    previous_inputs,
)
from world_model import TurnTokenizer
from world_model.aligned_copy import add_copy_bonus, aligned_words
from world_model.cached_decoding import CachedEnsembleDecoder
from world_model.config import DecoderSection
from world_model.decoder import DecoderConfig, ObservationDecoder
from world_model.decoder_context import DecoderContext
from world_model.dynamics import EnsembleDynamics
from world_model.turn_tokens import TokenLimits

ALIGNED = DecoderConfig(**{**CONFIG.__dict__, "aligned_copy": True})


def test_aligned_words_are_one_place_ahead_and_missing_past_the_row():
    previous = torch.tensor([[1, 7, 8, 2, 0], [1, 9, 2, 0, 0]])  # <s> a b </s> pad / <s> c </s> pad pad
    mask = (previous != 0).long()
    rows = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    positions = torch.arange(5).expand(2, 5)
    ids, valid = aligned_words(previous, mask, rows, positions)
    # position s predicts token s + 1: row 0 -> 7, 8, 2 then padding, then past the end
    assert ids[0, :3].tolist() == [7, 8, 2] and valid[0].tolist() == [True, True, True, False, False]
    assert ids[1, :2].tolist() == [9, 2] and valid[1].tolist() == [True, True, False, False, False]


def test_the_bonus_lands_on_the_aligned_word_only_where_valid():
    logits = torch.zeros(2, 3, 4)  # (B, S, V)
    bonus = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    ids = torch.tensor([[0, 3, 3], [1, 1, 2]])
    valid = torch.tensor([[True, True, False], [True, False, True]])
    out = add_copy_bonus(logits, bonus, ids, valid)
    expected = torch.zeros(2, 3, 4)
    expected[0, 0, 0], expected[0, 1, 3], expected[1, 0, 1], expected[1, 2, 2] = 1.0, 2.0, 4.0, 6.0
    assert torch.equal(out, expected)


def test_a_large_bonus_makes_an_untrained_decoder_repeat_the_observation_acted_in():
    torch.manual_seed(0)
    decoder = ObservationDecoder(ALIGNED).eval()
    with torch.no_grad():
        decoder.copy_gate.bias.fill_(200.0)
    latent, query_ids, query_mask, _ = decoder_inputs(rows=6, seed=3)
    previous, mask = previous_inputs(6, seed=7)
    with torch.no_grad():
        greedy = decoder(DecoderContext(latent, query_ids, query_mask, previous, mask), previous).argmax(-1)  # (B, S)
    for row in range(6):
        length = int(mask[row].sum())
        assert greedy[row, : length - 1].tolist() == previous[row, 1:length].tolist()


def test_cached_and_batched_paths_equal_the_plain_forward_with_aligned_copy():
    from world_model.batched_members import member_logits_at

    torch.manual_seed(0)
    dynamics = EnsembleDynamics(ALIGNED, num_members=3, head_hidden=8).eval()
    with torch.no_grad():
        for decoder in dynamics.decoders:  # a bonus large enough to matter, different per member
            decoder.copy_gate.bias.uniform_(1.0, 4.0)
    latent, query_ids, query_mask, text = decoder_inputs(rows=6, seed=4)
    ids, mask = previous_inputs(6, seed=5)
    with torch.no_grad():
        full = torch.log_softmax(dynamics.logits(DecoderContext(latent, query_ids, query_mask, ids, mask), text), -1)  # (K, B, S, V)
        cached = CachedEnsembleDecoder(dynamics.decoders, DecoderContext(latent, query_ids, query_mask, ids, mask), text.shape[1])
        steps = [torch.log_softmax(cached.next_logits(text[:, s]), -1) for s in range(3)]
        keep = torch.tensor([True, False, True, True, False, True])
        cached.keep(keep)  # rows that finished leave; the rest keep their own copy memory
        steps += [torch.log_softmax(cached.next_logits(text[keep, s]), -1) for s in range(3, text.shape[1])]
        scored = torch.arange(text.shape[1])[None] < torch.tensor([9, 4, 1, 9, 6, 2])[:, None]  # (B, S)
        packed = torch.log_softmax(member_logits_at(dynamics.decoders, DecoderContext(latent, query_ids, query_mask, ids, mask), text,
                                                    scored), -1)  # (K, P, V)
    for s, step in enumerate(steps):
        assert float((step - full[:, keep if s >= 3 else slice(None), s]).abs().max()) < 1e-5, s
    assert float((packed - full[:, scored]).abs().max()) < 1e-5
    assert_generation_agrees_with_and_without_cache(dynamics, latent, query_ids, query_mask, ids, mask)


def test_aligned_copy_needs_the_copy_path():
    with pytest.raises(ValueError, match="world_model.decoder.aligned_copy needs world_model.decoder.copy_observation"):
        DecoderSection(aligned_copy=True)
    with pytest.raises(ValueError, match="aligned_copy needs copy_observation"):
        DecoderConfig(**{**CONFIG.__dict__, "copy_observation": False, "aligned_copy": True})
    with pytest.raises(ValueError, match="world_model.decoder.aligned_copy must be true or false"):
        DecoderSection(copy_observation=True, aligned_copy="yes")


def test_off_leaves_the_decoder_as_it_was():
    torch.manual_seed(0)
    plain = ObservationDecoder(CONFIG)
    torch.manual_seed(0)
    aligned = ObservationDecoder(ALIGNED)
    shared = {k: v for k, v in aligned.state_dict().items() if not k.startswith("copy_gate")}
    assert shared.keys() == plain.state_dict().keys()
    assert all(torch.equal(v, plain.state_dict()[k]) for k, v in shared.items())


def test_a_tiny_fit_with_aligned_copy_gets_copy_plus_edit_right():
    # Measured on this store, held-out exact match after 20 / 40 / 80 / 120 steps: 0.16 / 0.16 / 0.31 /
    # 0.98 with aligned_copy, 0.02 / 0.00 / 0.98 / 1.0 with the copy path alone: ahead first, then behind,
    # level by 120 (so this checks that it learns, not that it learns faster).
    tokenizer = TurnTokenizer.build([*SYMBOLS, "put"], TokenLimits(observation=6, action=2))
    train, held_out = edit_trajectories(64, seed=0), edit_trajectories(16, seed=1)
    assert fit_and_match(True, train, held_out, tokenizer, steps=120, aligned=True) >= 0.9


def test_saved_models_without_the_field_load_as_off(hn_tokenizer, hn_trajectories, tmp_path):
    from tests.world_model.conftest import tiny_model

    decoder = {"model_size": 16, "num_layers": 1, "num_heads": 2, "latent_slots": 4, "copy_observation": True}
    for aligned in (True, False):
        model = tiny_model(hn_tokenizer, decoder={**decoder, "aligned_copy": aligned}).eval()
        loaded = assert_saved_and_loaded_alike(model, tmp_path / str(aligned), hn_trajectories,
                                               None if aligned else "aligned_copy")
        assert loaded.config.decoder.aligned_copy == aligned
