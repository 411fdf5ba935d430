"""Pure functions: ensemble disagreement and the per-member losses."""

import math

import torch
import torch.nn.functional as F

from world_model.losses import done_bce, regression_mse, token_nll
from world_model.uncertainty import entropy, member_std, mutual_information


def test_agreeing_members_have_no_disagreement_however_unsure():
    p = torch.tensor([0.5, 0.5, 0.0])
    probs = torch.stack([p, p, p])  # (K, V)
    assert math.isclose(float(entropy(p)), math.log(2), rel_tol=1e-6)
    assert float(mutual_information(probs)) == 0.0


def test_disagreement_is_the_mean_kl_to_the_mixture():
    probs = torch.softmax(
        torch.randn(4, 2, 3, 7, generator=torch.Generator().manual_seed(0)), dim=-1
    )  # (K, B, S, V)
    mixture = probs.mean(0)
    kl = (probs * (probs.log() - mixture.log())).sum(-1).mean(0)  # (B, S)
    assert torch.allclose(mutual_information(probs), kl, atol=1e-6)
    confident = torch.eye(3)  # three members, each sure of a different word
    assert math.isclose(float(mutual_information(confident)), math.log(3), rel_tol=1e-6)


def test_member_std():
    assert torch.allclose(member_std(torch.tensor([[1.0, 2.0], [3.0, 2.0]])), torch.tensor([1.0, 0.0]))


def test_token_nll_ignores_masked_positions_and_keeps_members_apart():
    logits = torch.randn(2, 3, 4, 5)  # (K, R, S, V)
    targets = torch.randint(0, 5, (3, 4))
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    nll = token_nll(logits, targets, mask)
    for k in range(2):
        rows = [
            F.cross_entropy(
                logits[k, r, : int(mask[r].sum())], targets[r, : int(mask[r].sum())], reduction="sum"
            )
            for r in range(3)
        ]
        assert torch.allclose(nll[k], sum(rows) / mask.sum(), atol=1e-6)
    scrambled = torch.where(mask.bool(), targets, (targets + 1) % 5)
    assert torch.allclose(token_nll(logits, scrambled, mask), nll)


def test_reward_and_done_losses_per_member():
    predictions = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    assert regression_mse(predictions, torch.tensor([1.0, 0.0])).tolist() == [0.0, 0.5]
    bce = done_bce(torch.tensor([[10.0, -10.0], [0.0, 0.0]]), torch.tensor([1.0, 0.0]))
    assert bce[0] < 1e-4 and math.isclose(float(bce[1]), math.log(2), rel_tol=1e-6)
