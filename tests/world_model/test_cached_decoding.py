"""Cached, member-batched decoding against the plain decoders rerun over the whole prefix."""

import pytest
import torch
from torch import nn

from world_model.cached_decoding import CachedEnsembleDecoder
from world_model.decoder import DecoderConfig
from world_model.decoder_context import DecoderContext
from world_model.dynamics import EnsembleDynamics
from world_model.uncertainty import mutual_information

VOCAB, PAD, BOS, EOS = 30, 0, 1, 2
BANNED = [PAD, BOS]
CONFIG = DecoderConfig(
    vocab_size=VOCAB,
    latent_size=12,
    max_query_tokens=5,
    max_text_tokens=14,
    model_size=16,
    num_layers=2,
    num_heads=4,
    latent_slots=3,
)
QUERY_LENGTHS = [1, 2, 3, 4, 5, 5, 2, 1, 3, 4]


def assert_near(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> None:
    """Same shape and every entry within ``atol`` (``torch.testing`` costs seconds to import)."""
    assert actual.shape == expected.shape
    gap = float((actual - expected).abs().max())
    assert gap <= atol, f"largest difference {gap:.3g} > {atol}"


def ensemble(eos_bias: float | None = None, seed: int = 0) -> EnsembleDynamics:
    """Three random members; ``eos_bias`` sharpens the outputs and sets the ``</s>`` bias, so that
    greedy rows end at different positions (a random net left alone repeats one word)."""
    torch.manual_seed(seed)
    dynamics = EnsembleDynamics(CONFIG, num_members=3, head_hidden=8).eval()
    if eos_bias is not None:
        with torch.no_grad():
            for decoder in dynamics.decoders:
                decoder.out.weight.mul_(4)
                decoder.out.bias[EOS] = eos_bias
    return dynamics


def inputs(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Latents and right-padded queries of different lengths: ``(B, D)``, ``(B, A)``, ``(B, A)``."""
    g = torch.Generator().manual_seed(seed)
    rows = len(QUERY_LENGTHS)
    latent = torch.randn(rows, CONFIG.latent_size, generator=g)
    mask = (torch.arange(CONFIG.max_query_tokens) < torch.tensor(QUERY_LENGTHS)[:, None]).long()  # (B, A)
    ids = torch.randint(3, VOCAB, (rows, CONFIG.max_query_tokens), generator=g) * mask  # padding is 0
    return latent, ids, mask


def generate(dynamics, *, use_cache, greedy, seed=5, max_words=10, score="sum"):
    latent, ids, mask = inputs()
    return dynamics.generate(
        DecoderContext(latent, ids, mask),
        bos_id=BOS,
        eos_id=EOS,
        pad_id=PAD,
        banned_ids=BANNED,
        max_words=max_words,
        generator=torch.Generator().manual_seed(seed),
        greedy=greedy,
        use_cache=use_cache,
        score=score,
    )


def test_fed_one_token_at_a_time_the_logits_equal_the_full_forward_at_every_position():
    dynamics = ensemble()
    latent, ids, mask = inputs()
    g = torch.Generator().manual_seed(2)
    text = torch.randint(3, VOCAB, (latent.shape[0], CONFIG.max_text_tokens), generator=g)  # (B, S)
    text[:, 0] = BOS
    with torch.no_grad():
        full = dynamics.logits(DecoderContext(latent, ids, mask), text)  # (K, B, S, V)
    cached = CachedEnsembleDecoder(dynamics.decoders, DecoderContext(latent, ids, mask), max_positions=text.shape[1])
    stepped = torch.stack([cached.next_logits(text[:, s]) for s in range(text.shape[1])], dim=2)
    assert stepped.shape == full.shape
    assert_near(stepped, full, atol=1e-5)


def test_rows_dropped_midway_leave_the_kept_rows_logits_unchanged():
    dynamics = ensemble()
    latent, ids, mask = inputs()
    g = torch.Generator().manual_seed(3)
    text = torch.randint(3, VOCAB, (latent.shape[0], 8), generator=g)  # (B, S)
    text[:, 0] = BOS
    with torch.no_grad():
        full = dynamics.logits(DecoderContext(latent, ids, mask), text)  # (K, B, S, V)
    cached = CachedEnsembleDecoder(dynamics.decoders, DecoderContext(latent, ids, mask), max_positions=text.shape[1])
    rows = torch.arange(latent.shape[0])  # the rows the decoder still holds, in its order
    for position, drop in enumerate([[], [0, 5], [], [1, 2, 9], [], [], [3], []]):
        logits = cached.next_logits(text[rows, position])  # (K, A, V)
        assert_near(logits, full[:, rows, position], atol=1e-5)
        kept = ~torch.isin(rows, torch.tensor(drop, dtype=torch.long))  # (A,)
        if not bool(kept.all()):
            cached.keep(kept)
            rows = rows[kept]
    assert rows.tolist() == [4, 6, 7, 8]


def test_greedy_words_are_the_uncached_ones_with_rows_ending_at_different_positions():
    dynamics = ensemble(eos_bias=-0.6)  # rows of 1, 3, 7 words and </s>, and rows cut at 10 words
    cached = generate(dynamics, use_cache=True, greedy=True)
    plain = generate(dynamics, use_cache=False, greedy=True)
    lengths = (plain.ids != PAD).sum(dim=1)
    # The case under test: rows stop at several positions, some are cut at the cap.
    assert len(set(lengths.tolist())) >= 3 and not bool(plain.ended.all()) and bool(plain.ended.any())
    assert torch.equal(cached.ids, plain.ids)
    assert torch.equal(cached.ended, plain.ended)
    # A sum over up to 11 words, each equal within float rounding: the bound scales with the words.
    assert_near(cached.disagreement, plain.disagreement, atol=1e-5)


def test_sampled_words_are_the_uncached_ones_for_one_seed_and_repeat_exactly():
    dynamics = ensemble(eos_bias=-1.0)
    first = generate(dynamics, use_cache=True, greedy=False)
    assert torch.equal(first.ids, generate(dynamics, use_cache=False, greedy=False).ids)
    again = generate(dynamics, use_cache=True, greedy=False)
    assert torch.equal(first.ids, again.ids) and torch.equal(first.disagreement, again.disagreement)
    others = [generate(dynamics, use_cache=True, greedy=False, seed=s).ids for s in (6, 7)]
    assert any(not torch.equal(first.ids, o) for o in others)


POOLINGS = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax}


@pytest.mark.parametrize("score", list(POOLINGS))
def test_the_disagreement_pools_the_mutual_information_over_each_rows_emitted_words(score):
    dynamics = ensemble(eos_bias=0.2)
    out = generate(dynamics, use_cache=True, greedy=False, score=score)
    latent, ids, mask = inputs()
    text = torch.cat([torch.full((latent.shape[0], 1), BOS), out.ids], dim=1)  # (B, 1 + S)
    with torch.no_grad():
        logits = dynamics.logits(DecoderContext(latent, ids, mask), text[:, :-1])  # (K, B, S, V), teacher-forced
    logits[..., BANNED] = float("-inf")
    per_word = mutual_information(torch.softmax(logits, dim=-1))  # (B, S)
    for row in range(latent.shape[0]):
        # Its words and </s>; a row cut at the cap also drew (and dropped) a word at the cap.
        emitted = int((out.ids[row] != PAD).sum()) + int(not out.ended[row])
        expected = POOLINGS[score](per_word[row, :emitted])
        assert float(out.disagreement[row]) == pytest.approx(float(expected), abs=1e-5)


def test_it_refuses_layers_it_does_not_write_out_and_positions_past_its_size():
    dynamics = ensemble()
    latent, ids, mask = inputs()
    post_norm = ensemble()
    post_norm.decoders[1].blocks.layers[0].norm_first = False
    with pytest.raises(ValueError, match="norm_first"):
        CachedEnsembleDecoder(post_norm.decoders, DecoderContext(latent, ids, mask), max_positions=4)
    gelu = ensemble()
    gelu.decoders[0].blocks.layers[1].activation = nn.functional.gelu
    with pytest.raises(ValueError, match="layer 1"):
        CachedEnsembleDecoder(gelu.decoders, DecoderContext(latent, ids, mask), max_positions=4)
    with pytest.raises(ValueError, match="max_text_tokens"):
        CachedEnsembleDecoder(dynamics.decoders, DecoderContext(latent, ids, mask), max_positions=CONFIG.max_text_tokens + 1)
    cached = CachedEnsembleDecoder(dynamics.decoders, DecoderContext(latent, ids, mask), max_positions=1)
    cached.next_logits(torch.full((latent.shape[0],), BOS))
    with pytest.raises(ValueError, match="1 positions"):
        cached.next_logits(torch.full((latent.shape[0],), 5))
