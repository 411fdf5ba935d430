"""TokenCritic: per-position values, the turn value through the seam, seeding, save and load."""

import inspect

import pytest
import torch
from torch import nn

from critic.base import CriticStates, TurnCritic
from critic.token_alignment import turn_values
from critic.token_critic import TokenCritic, TokenCriticConfig

CONFIG = TokenCriticConfig(vocab_size=11, hidden_size=32, num_layers=1, num_heads=2)


@pytest.fixture(scope="module")
def critic() -> TokenCritic:
    return TokenCritic(CONFIG, seed=0).eval()


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_token_values_shape_and_padding(critic):
    ids = torch.tensor([[4, 5, 6, 7]])
    padded = torch.tensor([[0, 0, 4, 5, 6, 7]])
    pad_mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        plain = critic.token_values(ids, torch.ones_like(ids))
        left = critic.token_values(padded, pad_mask)
    assert plain.shape == (1, 4) and left.shape == (1, 6)
    assert left[0, :2].tolist() == [0.0, 0.0]
    assert torch.allclose(left[0, 2:], plain[0], atol=1e-5)


def test_value_at_t_depends_only_on_tokens_up_to_t(critic):
    a = torch.tensor([[4, 5, 6, 7, 8]])
    b = torch.tensor([[4, 5, 6, 9, 10]])
    mask = torch.ones_like(a)
    with torch.no_grad():
        va, vb = critic.token_values(a, mask), critic.token_values(b, mask)
    assert torch.allclose(va[0, :3], vb[0, :3], atol=1e-6)
    assert not torch.allclose(va[0, 3:], vb[0, 3:])


def test_forward_is_the_token_value_at_the_last_prompt_column(critic):
    ids = torch.tensor([[0, 0, 4, 5], [6, 7, 8, 9], [0, 3, 3, 2]])
    mask = (ids > 0).long()
    with torch.no_grad():
        values = critic(CriticStates(ids, mask))
        per_position = critic.token_values(ids, mask)
    assert values.shape == (3,) and values.dtype == torch.float32
    assert torch.equal(values, per_position[:, -1])


def test_forward_matches_the_turn_value_of_the_full_rows(critic):
    # Full rows are (prompt, action); the critic of the prompt alone gives the value before the turn.
    full = torch.tensor([[0, 4, 5, 9, 10], [6, 7, 8, 9, 10]])
    full_mask = (full > 0).long()
    response_mask = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 1, 1]])
    prompts = CriticStates(full[:, :3], full_mask[:, :3])
    with torch.no_grad():
        turn = turn_values(critic.token_values(full, full_mask), response_mask)
        values = critic(prompts)
    assert torch.allclose(values, turn, atol=1e-5)


def test_left_padding_does_not_change_a_rows_value(critic):
    alone = CriticStates(torch.tensor([[4, 5, 6]]), torch.ones(1, 3, dtype=torch.long))
    ids = torch.tensor([[0, 0, 0, 4, 5, 6], [7, 8, 9, 10, 2, 3]])
    batch = CriticStates(ids, (ids > 0).long())
    with torch.no_grad():
        assert torch.allclose(critic(batch)[0], critic(alone)[0], atol=1e-5)


def test_forward_rejects_rows_that_end_in_padding(critic):
    ids = torch.tensor([[4, 5, 0], [4, 5, 6], [0, 0, 0]])
    with pytest.raises(ValueError, match="rows \\[0, 2\\] end in padding"):
        critic(CriticStates(ids, (ids > 0).long()))


def test_forward_has_gradients_when_enabled():
    model = TokenCritic(CONFIG, seed=1)
    ids = torch.tensor([[4, 5, 6], [0, 7, 8]])
    model(CriticStates(ids, (ids > 0).long())).sum().backward()
    assert model.head.weight.grad is not None and model.head.weight.grad.abs().sum() > 0
    assert model.backbone.embed_tokens.weight.grad.abs().sum() > 0


def test_conforms_to_the_turn_critic_seam(critic):
    assert isinstance(critic, nn.Module)
    assert isinstance(critic, TurnCritic)
    assert list(inspect.signature(TokenCritic.forward).parameters) == ["self", "states"]
    assert inspect.signature(TokenCritic.forward).return_annotation in (torch.Tensor, "torch.Tensor")
    assert not isinstance(lambda states: states, TurnCritic)


def test_initialisation_depends_on_the_seed_only():
    torch.manual_seed(123)
    first = weights(TokenCritic(CONFIG, seed=7))
    torch.rand(1000)  # move the global RNG: the critic must not notice
    before = torch.get_rng_state()
    second = weights(TokenCritic(CONFIG, seed=7))
    assert torch.equal(torch.get_rng_state(), before)
    assert same_weights(first, second)
    assert not same_weights(first, weights(TokenCritic(CONFIG, seed=8)))


def test_save_and_load_round_trip(tmp_path):
    model = TokenCritic(CONFIG, seed=5)
    model.save_pretrained(tmp_path)
    files = {p.name for p in tmp_path.iterdir()}
    assert {"model.safetensors", "config.json"} <= files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    loaded = TokenCritic.from_pretrained(tmp_path)
    assert loaded.config == CONFIG and not loaded.training
    assert same_weights(weights(loaded), weights(model))
    assert not same_weights(weights(loaded), weights(TokenCritic(CONFIG)))


def test_config_names_the_bad_field():
    with pytest.raises(ValueError, match="TokenCriticConfig.vocab_size"):
        TokenCriticConfig(vocab_size=0)
    with pytest.raises(ValueError, match="hidden_size \\(30\\) must be divisible by num_heads \\(4\\)"):
        TokenCriticConfig(vocab_size=5, hidden_size=30, num_heads=4)
