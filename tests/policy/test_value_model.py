import pytest
import torch

from policy.value_model import ValueFunction, ValueModel, ValueModelConfig, token_values, turn_values


def tiny_value_model() -> ValueModel:
    torch.manual_seed(0)
    return ValueModel(ValueModelConfig(vocab_size=11, hidden_size=32, num_layers=1, num_heads=2)).eval()


# Row 0: [pad pad p p a a], row 1: [p p p a a a], row 2: [pad p p p p a].
RESPONSE_MASK = torch.tensor(
    [
        [0, 0, 0, 0, 1, 1],
        [0, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 1],
    ],
    dtype=torch.float,
)
VALUES = torch.tensor(
    [
        [0.0, 0.0, 10.0, 11.0, 12.0, 13.0],
        [20.0, 21.0, 22.0, 23.0, 24.0, 25.0],
        [0.0, 31.0, 32.0, 33.0, 34.0, 35.0],
    ]
)


def test_turn_values_read_the_last_prompt_column():
    assert turn_values(VALUES, RESPONSE_MASK).tolist() == [11.0, 22.0, 34.0]


def test_token_values_read_the_state_before_each_action_token():
    expected = [
        [0.0, 0.0, 0.0, 0.0, 11.0, 12.0],
        [0.0, 0.0, 0.0, 22.0, 23.0, 24.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 34.0],
    ]
    aligned = token_values(VALUES, RESPONSE_MASK)
    assert aligned.tolist() == expected
    first = RESPONSE_MASK.argmax(dim=-1)
    assert aligned[torch.arange(3), first].tolist() == turn_values(VALUES, RESPONSE_MASK).tolist()


def test_alignment_rejects_rows_without_a_state_before_the_turn():
    with pytest.raises(ValueError, match="no response token on rows \\[1\\]"):
        turn_values(VALUES[:2], torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="column 0 on rows \\[0\\]"):
        turn_values(VALUES[:1], torch.ones(1, 6))


def test_value_model_shape_padding_and_protocol():
    model = tiny_value_model()
    assert isinstance(model, ValueFunction)
    ids = torch.tensor([[4, 5, 6, 7]])
    padded = torch.tensor([[0, 0, 4, 5, 6, 7]])
    pad_mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        plain = model(ids, torch.ones_like(ids))
        left = model(padded, pad_mask)
    assert plain.shape == (1, 4) and left.shape == (1, 6)
    assert left[0, :2].tolist() == [0.0, 0.0]
    assert torch.allclose(left[0, 2:], plain[0], atol=1e-5)


def test_value_at_t_depends_only_on_tokens_up_to_t():
    model = tiny_value_model()
    a = torch.tensor([[4, 5, 6, 7, 8]])
    b = torch.tensor([[4, 5, 6, 9, 10]])
    mask = torch.ones_like(a)
    with torch.no_grad():
        va, vb = model(a, mask), model(b, mask)
    assert torch.allclose(va[0, :3], vb[0, :3], atol=1e-6)
    assert not torch.allclose(va[0, 3:], vb[0, 3:])


def test_config_names_the_bad_field():
    with pytest.raises(ValueError, match="ValueModelConfig.vocab_size"):
        ValueModelConfig(vocab_size=0)
    with pytest.raises(ValueError, match="hidden_size \\(30\\) must be divisible by num_heads \\(4\\)"):
        ValueModelConfig(vocab_size=5, hidden_size=30, num_heads=4)
