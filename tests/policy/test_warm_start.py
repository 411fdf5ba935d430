"""Behaviour cloning on an env where the expert's action is a function of the observation (echo the word)."""

import pytest
import torch
import torch.nn.functional as F

from envs.agent import ExpertAgent
from policy.batch import TokenBatch
from policy.config import PolicyConfig
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer
from policy.warm_start import bc_loss, behaviour_clone, expert_trajectories, trim_left_padding
from tests.policy.fake_envs import EchoEnv, rollout, turn_accuracy

TOKENIZER = build_tiny_tokenizer(EchoEnv().vocabulary())
CFG = PolicyConfig(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, max_action_tokens=4)
EXPERTS = rollout(ExpertAgent(), EchoEnv, range(100))


def make_policy(seed=0):
    return LMPolicy(build_tiny_lm(CFG, TOKENIZER, seed=seed), TOKENIZER, CFG, seed=seed)


class Greedy:
    def __init__(self, policy):
        self.policy = policy

    def act(self, views):
        return self.policy.act(views, greedy=True)


def accuracy(policy) -> float:
    """Rewarded fraction of turns on 40 held-out episodes, greedy."""
    return turn_accuracy(rollout(Greedy(policy), EchoEnv, range(1000, 1040)))


@pytest.mark.slow
def test_cloning_lifts_accuracy_from_chance_to_high_and_stops_early():
    policy = make_policy()
    before = [p.detach().clone() for p in policy.parameters()]
    mode = policy.model.training
    assert accuracy(policy) < 0.2  # 12 words: chance is 1/12, an untrained model rarely even says one word
    history = behaviour_clone(
        policy, EXPERTS, lr=3e-3, batch_size=64, max_steps=200, evaluate=accuracy, eval_every=25, stop_at_success=0.9,
        progress=False,
    )
    assert history["stopped_early"] and history["steps"] < 200
    assert history["success_rates"][-1] >= 0.9 and accuracy(policy) >= 0.9
    assert history["eval_steps"] == [25 * (i + 1) for i in range(len(history["eval_steps"]))]
    assert len(history["losses"]) == history["steps"]
    assert history["losses"][-1] < 0.25 * history["losses"][0]
    assert all(not torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))
    assert policy.model.training == mode  # train/eval mode restored


def test_same_seed_same_losses():
    runs = [behaviour_clone(make_policy(), EXPERTS, max_steps=5, batch_size=16, seed=3, progress=False) for _ in range(2)]
    assert runs[0]["losses"] == runs[1]["losses"]
    other = behaviour_clone(make_policy(), EXPERTS, max_steps=5, batch_size=16, seed=4, progress=False)
    assert other["losses"] != runs[0]["losses"]


@pytest.mark.parametrize("scored_logits", [False, True])
def test_bc_loss_is_cross_entropy_on_action_tokens_only(scored_logits):
    policy = make_policy()
    batch, samples = policy.encode(EXPERTS[:4])
    with torch.no_grad():
        loss = bc_loss(policy, batch, scored_logits=scored_logits)
        logits = policy.model(batch.input_ids, attention_mask=batch.attention_mask,
                              position_ids=(batch.attention_mask.cumsum(-1) - 1).clamp(min=0)).logits  # (B, L, V)
    # independently: each action token (and EOS) is predicted from the column before it
    rows, cols = batch.response_mask.nonzero(as_tuple=True)
    expected = F.cross_entropy(logits[rows, cols - 1], batch.input_ids[rows, cols])
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert len(rows) == sum(len(TOKENIZER(s.action).input_ids) + 1 for s in samples)


def test_only_response_targets_get_gradient():
    policy = make_policy()
    batch, _ = policy.encode(EXPERTS[:4])
    captured = {}

    def keep_logits(module, inputs, logits):
        logits.retain_grad()
        captured["logits"] = logits

    handle = policy.model.lm_head.register_forward_hook(keep_logits)
    bc_loss(policy, batch).backward()
    handle.remove()
    grad_norm = captured["logits"].grad.abs().sum(-1)  # (B, L): gradient reaching each column's prediction
    predicts_response = torch.zeros_like(batch.response_mask, dtype=torch.bool)
    predicts_response[:, :-1] = batch.response_mask[:, 1:].bool()  # column t predicts token t + 1
    assert torch.all(grad_norm[~predicts_response] == 0)
    assert torch.all(grad_norm[predicts_response] > 0)


def test_trim_left_padding_drops_only_all_padding_columns():
    batch = TokenBatch(
        torch.tensor([[0, 0, 0, 5, 6], [0, 0, 4, 5, 6]]),
        torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, 1]]),
        torch.tensor([[0.0, 0, 0, 0, 1], [0, 0, 0, 0, 1]]),
    )
    trimmed = trim_left_padding(batch)
    assert trimmed.input_ids.tolist() == [[0, 5, 6], [4, 5, 6]]
    assert trimmed.attention_mask.tolist() == [[0, 1, 1], [1, 1, 1]]
    assert trimmed.response_mask.tolist() == [[0, 0, 1], [0, 0, 1]]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="stop_at_success needs an evaluate"):
        behaviour_clone(make_policy(), EXPERTS, stop_at_success=0.5, progress=False)
    with pytest.raises(ValueError, match="lr=0"):
        behaviour_clone(make_policy(), EXPERTS, lr=0, progress=False)
    with pytest.raises(ValueError, match="no turns"):
        behaviour_clone(make_policy(), [], progress=False)


def test_expert_trajectories_play_one_episode_per_given_seed():
    trajectories = expert_trajectories(EchoEnv, seeds=[7, 3, 11, 5, 2])
    assert [t.seed for t in trajectories] == [7, 3, 11, 5, 2]
    assert len(trajectories) == 5 and all(t.success for t in trajectories)
    assert all(turn.action == turn.observation.split()[-1] for t in trajectories for turn in t.turns)


def test_scored_bc_applies_the_lm_head_only_to_columns_that_predict_an_action_token():
    policy = make_policy()
    batch, _ = policy.encode(EXPERTS[:4])
    widths = []
    handle = policy.model.lm_head.register_forward_hook(lambda module, inputs, output: widths.append(inputs[0].shape[1]))
    with torch.no_grad():
        bc_loss(policy, batch, scored_logits=True)
    handle.remove()
    predicting = batch.response_mask[:, 1:].bool().any(dim=0)  # (L-1,) column t-1 predicts token t in some row
    assert widths == [int(predicting.sum())] and widths[0] < batch.input_ids.shape[1]
