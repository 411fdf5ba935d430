"""LatentStateEncoder: incremental == full-history encoding (ragged), padding invariance, order, config."""

import pytest
import torch

from world_model import build_training_batch
from world_model.encoder import EncoderConfig, LatentStateEncoder, TurnEmbedder
from world_model.turn_tokens import pad_rows

CONFIG = EncoderConfig(vocab_size=40, max_tokens=24, embed_size=16, feature_size=24, latent_size=20)


def perturbed(encoder: LatentStateEncoder) -> LatentStateEncoder:
    """Every weight moved off its initial value: a fresh LayerNorm has zero bias, which would hide
    padding that leaks through it."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in encoder.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=generator))
    return encoder.eval()


@pytest.fixture(scope="module")
def encoder() -> LatentStateEncoder:
    torch.manual_seed(0)
    return perturbed(LatentStateEncoder(CONFIG))


def test_turn_by_turn_equals_the_whole_history_on_ragged_batches(hn_tokenizer, hn_trajectories):
    batch = build_training_batch(hn_trajectories, hn_tokenizer)
    counts = batch.turn_count
    assert len(set(counts.tolist())) > 2  # ragged: the check covers rows that stop early
    model = perturbed(
        LatentStateEncoder(EncoderConfig(vocab_size=len(hn_tokenizer), max_tokens=40, latent_size=20))
    )
    with torch.no_grad():
        full = model.encode(
            batch.observation_ids, batch.observation_mask, batch.turn_ids, batch.turn_mask, counts
        )
        every = model.states(
            batch.observation_ids, batch.observation_mask, batch.turn_ids, batch.turn_mask, counts
        )
        for b, trajectory in enumerate(hn_trajectories):
            ids, mask = hn_tokenizer.encode_observations([trajectory.turns[0].observation])
            state = model.initial_state(ids, mask)  # (1, D)
            assert torch.allclose(state, every[b : b + 1, 0], atol=1e-5)
            for k, turn in enumerate(trajectory.turns, start=1):
                ids, mask = hn_tokenizer.encode_turns([turn.action], [turn.next_observation])
                state = model.step(state, ids, mask)
                assert torch.allclose(state, every[b : b + 1, k], atol=1e-5)
            assert torch.allclose(state, full[b : b + 1], atol=1e-5)
            # after its last turn a short row keeps its latent
            rest = every[b, trajectory.num_turns :]  # (N + 1 - turns, D)
            assert torch.allclose(rest, state.expand_as(rest), atol=1e-5)


def test_a_row_without_turns_is_its_initial_state(encoder):
    obs = torch.tensor([[4, 5, 6], [7, 8, 0]])
    obs_mask = (obs > 0).long()
    turns = torch.randint(1, 40, (2, 3, 5))
    with torch.no_grad():
        full = encoder.encode(obs, obs_mask, turns, torch.ones_like(turns), torch.tensor([0, 2]))
        first = encoder.initial_state(obs, obs_mask)
    assert torch.equal(full[0], first[0]) and not torch.allclose(full[1], first[1])


def test_features_do_not_depend_on_padding_width(encoder):
    rows = [[3, 9, 12, 5], [7, 7]]
    narrow = pad_rows(rows, pad_id=0)
    wide = pad_rows(rows, pad_id=0, length=20)
    with torch.no_grad():
        assert torch.allclose(encoder.embed(*narrow), encoder.embed(*wide), atol=1e-6)


def test_word_order_matters(encoder):
    """A bag of words would map both rows to one feature; positions and convolutions keep them apart."""
    ids = torch.tensor([[3, 9, 12, 5], [3, 12, 9, 5]])
    with torch.no_grad():
        features = encoder.embed(ids, torch.ones_like(ids))
    assert (features[0] - features[1]).abs().max() > 1e-3


def test_rows_longer_than_max_tokens_and_bad_counts_raise(encoder):
    ids = torch.ones(1, CONFIG.max_tokens + 1, dtype=torch.long)
    with pytest.raises(ValueError, match="max_tokens"):
        encoder.embed(ids, torch.ones_like(ids))
    obs = torch.ones(1, 3, dtype=torch.long)
    turns = torch.ones(1, 2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="turn_count"):
        encoder.encode(obs, obs, turns, turns, torch.tensor([3]))


@pytest.mark.parametrize(
    ("field", "value"), [("vocab_size", 0), ("kernel_size", 4), ("latent_size", 2.5), ("conv_layers", -1)]
)
def test_bad_config_fields_are_named(field, value):
    with pytest.raises(ValueError, match=f"EncoderConfig.{field}"):
        EncoderConfig(**{"vocab_size": 10, "max_tokens": 8, field: value})


def test_embedder_is_a_module_of_the_encoder(encoder):
    assert isinstance(encoder.embed, TurnEmbedder) and encoder.latent_size == CONFIG.latent_size
