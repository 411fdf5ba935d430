"""Per-position values aligned with each row's turn and action tokens."""

import pytest
import torch

from critic.token_alignment import first_response_column, token_values, turn_values

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


def test_first_response_column():
    assert first_response_column(RESPONSE_MASK).tolist() == [4, 3, 5]


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
    first = first_response_column(RESPONSE_MASK)
    assert aligned[torch.arange(3), first].tolist() == turn_values(VALUES, RESPONSE_MASK).tolist()


def test_alignment_rejects_rows_without_a_state_before_the_turn():
    with pytest.raises(ValueError, match="no response token on rows \\[1\\]"):
        turn_values(VALUES[:2], torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="column 0 on rows \\[0\\]"):
        turn_values(VALUES[:1], torch.ones(1, 6))
