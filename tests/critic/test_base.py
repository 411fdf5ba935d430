"""CriticStates batching, and the TurnCritic seam that a history-reading critic also fits."""

import pytest
import torch
from torch import nn

from critic.base import CriticStates, TurnCritic
from envs.trajectory import Trajectory, Turn


def trajectory(trajectory_id: int, num_turns: int) -> Trajectory:
    turn = Turn("obs", "act", "next", 0.0, False, True, "obs")
    return Trajectory("fake", {}, seed=0, group_id=0, trajectory_id=trajectory_id, turns=[turn] * num_turns)


def states() -> CriticStates:
    ids = torch.tensor([[0, 5, 6], [7, 8, 9], [0, 0, 4]])
    mask = (ids > 0).long()
    return CriticStates(ids, mask, [(trajectory(0, 2), 0), (trajectory(1, 3), 3), (trajectory(2, 1), 1)])


class HistoryLengthCritic(nn.Module):
    """A stand-in for a latent critic: reads only the histories (value = completed turns)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, states: CriticStates) -> torch.Tensor:
        ks = torch.tensor([float(k) for _, k in states.histories])  # (N,)
        return self.scale * ks


def test_len_index_and_to():
    s = states()
    assert len(s) == 3
    sub = s.index(torch.tensor([2, 0]))
    assert sub.input_ids.tolist() == [[0, 0, 4], [0, 5, 6]]
    assert sub.attention_mask.tolist() == [[0, 0, 1], [0, 1, 1]]
    assert [(t.trajectory_id, k) for t, k in sub.histories] == [(2, 1), (0, 0)]
    by_mask = s.index(torch.tensor([False, True, True]))
    assert [t.trajectory_id for t, _ in by_mask.histories] == [1, 2]
    moved = s.to("cpu")
    assert torch.equal(moved.input_ids, s.input_ids) and moved.histories is s.histories


def test_histories_are_optional():
    s = CriticStates(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long))
    assert s.index(torch.tensor([1])).histories is None


def test_states_reject_bad_shapes_and_histories():
    with pytest.raises(ValueError, match="must share an \\(N, P\\) shape"):
        CriticStates(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="histories has 1 entries for 2 rows"):
        CriticStates(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long), [(trajectory(0, 1), 0)])
    with pytest.raises(ValueError, match="histories\\[0\\]: k=3 completed turns is outside \\[0, 2\\]"):
        CriticStates(torch.ones(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long), [(trajectory(0, 2), 3)])


def test_a_history_reading_critic_fits_the_seam():
    critic = HistoryLengthCritic()
    assert isinstance(critic, TurnCritic)
    values = critic(states())
    assert values.tolist() == [0.0, 3.0, 1.0]
    values.sum().backward()
    assert critic.scale.grad.item() == 4.0


def test_mixed_precision_input_conversion_passes_the_histories_through_untouched():
    # Fabric converts a module's float inputs under bf16-mixed by walking each dataclass argument's fields;
    # it refuses frozen dataclasses, and every history holds a frozen Trajectory.
    from lightning_utilities.core.apply_func import apply_to_collection

    s = states()
    s.input_ids = s.input_ids.float()  # a float tensor, so the conversion has something to convert
    converted = apply_to_collection(((s,), {}), function=lambda t: t.to(torch.bfloat16), dtype=torch.Tensor)
    out = converted[0][0]
    assert out.input_ids.dtype == torch.bfloat16 and out.attention_mask.dtype == torch.bfloat16
    assert out.histories is s.histories
