"""Pure functions: ensemble disagreement and the per-member losses."""

import math

import pytest
import torch
import torch.nn.functional as F

from world_model.decoder_context import DecoderContext
from world_model.disagreement_score import row_score, scattered_score
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


# --- pooling per-token disagreement into one score per observation ---------------------------------


def _padded_and_repeated(pattern: list[float], length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two observations of ``length`` tokens: ``pattern`` followed by agreed (0) tokens, and
    ``pattern`` repeated; every token scored, then one masked-off padding slot."""
    padded = pattern + [0.0] * (length - len(pattern))
    repeated = (pattern * length)[:length]
    values = torch.tensor([padded + [9.0], repeated + [9.0]])  # (2, length + 1); 9.0 sits under the mask
    mask = torch.tensor([[1] * length + [0]] * 2)
    return values, mask


def test_the_max_score_is_the_same_at_every_observation_length():
    pattern = [0.01, 0.3, 0.02]
    scores = {n: row_score(*_padded_and_repeated(pattern, n), "max") for n in (3, 12, 60)}
    for n, got in scores.items():
        assert torch.allclose(got, torch.tensor([0.3, 0.3])), n  # the most doubtful token, by hand
    # The mean per token shrinks as agreed tokens are added: 0.33 / 3 = 0.11 at 3 tokens, 0.33 / 60 at 60.
    mean3 = row_score(*_padded_and_repeated(pattern, 3), "mean")
    mean60 = row_score(*_padded_and_repeated(pattern, 60), "mean")
    assert math.isclose(float(mean3[0]), 0.11, rel_tol=1e-5)
    assert math.isclose(float(mean60[0]), 0.33 / 60, rel_tol=1e-5)


def test_the_sum_ignores_agreed_tokens_and_counts_each_doubtful_one():
    pattern = [0.01, 0.3, 0.02]  # total 0.33
    for n in (3, 12, 60):
        padded, repeated = row_score(*_padded_and_repeated(pattern, n), "sum")
        assert math.isclose(float(padded), 0.33, rel_tol=1e-5)  # agreed padding adds nothing
        assert math.isclose(float(repeated), 0.33 * n / 3, rel_tol=1e-5)  # each repeat is more doubt


def test_flat_tokens_pool_like_rows_and_an_empty_row_scores_zero():
    values = torch.tensor([0.2, 0.05, 0.4, 0.1, 0.0])  # (N,)
    rows = torch.tensor([0, 0, 2, 2, 2])  # row 1 wrote nothing
    assert torch.allclose(scattered_score(values, rows, 3, "max"), torch.tensor([0.2, 0.0, 0.4]))
    assert torch.allclose(scattered_score(values, rows, 3, "mean"), torch.tensor([0.125, 0.0, 0.5 / 3]))
    assert torch.allclose(scattered_score(values, rows, 3, "sum"), torch.tensor([0.25, 0.0, 0.5]))
    with pytest.raises(ValueError, match="score"):
        row_score(values[None], torch.ones(1, 5), "median")


def test_the_model_scores_with_its_configured_pooling():
    from world_model import TurnTokenizer, WorldModel, WorldModelConfig

    tk = TurnTokenizer.for_env("frozen_lake")
    sizes = {"latent_size": 16, "num_members": 3, "head_hidden": 8,
             "encoder": {"embed_size": 8, "feature_size": 8, "conv_layers": 0},
             "decoder": {"model_size": 16, "num_layers": 1, "num_heads": 2, "latent_slots": 2}}
    model = WorldModel(WorldModelConfig.for_tokenizer(tk, **sizes), tk, seed=3).eval()
    from envs.registry import make

    env = make("frozen_lake")
    first = env.reset(1)
    nxt = env.step("right").observation
    state = model.initial_state([first])
    with torch.no_grad():
        q_ids, q_mask = model._rows([tk.query_row(w) for w in tk.action_words(["right"])])
        t_ids, t_mask = model._rows([tk.text_row(w) for w in tk.observation_words([nxt])])
        probs = torch.softmax(model.dynamics.logits(DecoderContext(state.latent, q_ids, q_mask), t_ids[:, :-1]), -1)
    per_token = mutual_information(probs)[0]  # (S - 1,) every scored token is real here
    assert math.isclose(float(model.disagreement(state, ["right"], [nxt])), float(per_token.sum()), rel_tol=1e-5)
    assert math.isclose(float(model.disagreement(state, ["right"], [nxt], score="max")), float(per_token.max()),
                        rel_tol=1e-5)
    assert math.isclose(float(model.disagreement(state, ["right"], [nxt], score="mean")),
                        float(per_token.mean()), rel_tol=1e-5)
