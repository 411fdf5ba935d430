"""policy.rollout_batch: the learner trains on exactly the ids the policy sampled.

The BPE test builds a small byte-level BPE tokenizer here, so decoding sampled ids and encoding the
text again gives different ids (merges re-form); the batch must hold the sampled ones.
"""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from envs import collect
from envs.agent import SampledAction
from envs.trajectory import Trajectory, Turn
from policy.config import PolicyConfig
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer
from policy.rollout_batch import build_rollout_batch
from tests.policy.fake_envs import EchoEnv

SMALL = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)


def bpe_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE with merges (e.g. "re" + "d"), trained on a few words in the test."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["say red green blue cat dog sun moon tree fish bird rock star >"] * 50
    tokenizer.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


def sampling_policy(tokenizer, seed=0, **overrides) -> LMPolicy:
    cfg = PolicyConfig(**{**SMALL, "max_action_tokens": 6, **overrides})
    return LMPolicy(build_tiny_lm(cfg, tokenizer, seed=3).eval(), tokenizer, cfg, seed=seed)


def echo_rollouts(policy, n_groups=4, group_size=2, **kwargs):
    return collect(policy, lambda: EchoEnv(max_turns=2), group_size=group_size, n_groups=n_groups, seed=5,
                   progress=False, **kwargs)


def trained_ids(batch, row):
    ids = batch.tokens.input_ids[row]
    return ids[batch.tokens.response_mask[row] > 0].tolist()


def test_bpe_rows_hold_the_sampled_ids_not_a_re_encoding():
    tokenizer = bpe_tokenizer()
    policy = sampling_policy(tokenizer)
    trajectories = echo_rollouts(policy)
    batch = build_rollout_batch(trajectories, pad_id=policy.pad_token_id)
    re_encoded_differs = 0
    for row, (i, t) in enumerate(batch.row_keys):
        sample = trajectories[i].turns[t].sample
        assert trained_ids(batch, row) == list(sample.action_ids)
        prompt = batch.tokens.input_ids[row][batch.tokens.attention_mask[row] > 0].tolist()
        assert prompt[: len(sample.prompt_ids)] == list(sample.prompt_ids)
        logp = batch.sampling_logp[row][batch.tokens.response_mask[row] > 0]
        assert torch.allclose(logp, torch.tensor(sample.logprobs))
        text_ids = tokenizer(sample.text, add_special_tokens=False)["input_ids"]
        re_encoded_differs += text_ids != [x for x in sample.action_ids if x != tokenizer.eos_token_id]
    assert re_encoded_differs > 0  # the old decode-and-re-encode path would have trained other ids


def test_log_probs_of_the_batch_match_the_sampling_log_probs():
    policy = sampling_policy(bpe_tokenizer())
    batch = build_rollout_batch(echo_rollouts(policy), pad_id=policy.pad_token_id)
    with torch.no_grad():
        logp, _ = policy.log_probs(batch.tokens)
    mask = batch.tokens.response_mask > 0
    assert torch.allclose(logp[mask], batch.sampling_logp[mask], atol=1e-4)


def test_an_action_cut_at_the_budget_is_trained_without_an_eos_it_never_sampled():
    tokenizer = build_tiny_tokenizer(EchoEnv().vocabulary())
    policy = sampling_policy(tokenizer, max_action_tokens=3)
    eos = tokenizer.eos_token_id
    hook = policy.model.lm_head.register_forward_hook(
        lambda module, inputs, logits: logits.index_fill(-1, torch.tensor([eos]), -1e4)
    )
    try:
        trajectories = echo_rollouts(policy, n_groups=2, group_size=1)
    finally:
        hook.remove()
    batch = build_rollout_batch(trajectories, pad_id=policy.pad_token_id)
    for row in range(len(batch)):
        ids = trained_ids(batch, row)
        assert len(ids) == 3 and eos not in ids


def test_rows_of_a_branch_prefix_are_not_trained():
    sample = SampledAction(text="red", prompt_ids=(2, 5), action_ids=(7, 3), logprobs=(-0.5, -0.25))
    turns = [Turn("say red", "red", "say cat", 1.0, False, True, "say red", sample=sample) for _ in range(3)]
    trajectory = Trajectory("echo", {}, 0, 0, 0, turns=turns, branch_turn=2)
    batch = build_rollout_batch([trajectory], pad_id=0)
    assert batch.row_keys == [(0, 2)]
    assert batch.tokens.input_ids.tolist() == [[2, 5, 7, 3]]
    assert batch.tokens.response_mask.tolist() == [[0.0, 0.0, 1.0, 1.0]]
    assert batch.sampling_logp.tolist() == [[0.0, 0.0, -0.5, -0.25]]


def test_a_turn_without_sampled_ids_is_refused():
    turn = Turn("say red", "red", "say cat", 1.0, True, True, "say red")
    with pytest.raises(ValueError, match="no sampled token ids"):
        build_rollout_batch([Trajectory("echo", {}, 0, 0, 0, turns=[turn])], pad_id=0)


def test_two_collections_with_colliding_ids_are_refused_and_offsets_fix_it():
    policy = sampling_policy(build_tiny_tokenizer(EchoEnv().vocabulary()))
    first = echo_rollouts(policy, n_groups=2)
    second = echo_rollouts(policy, n_groups=2)
    with pytest.raises(ValueError, match=r"trajectory_id\(s\) \[0, 1, 2, 3\] appear more than once"):
        build_rollout_batch(first + second, pad_id=policy.pad_token_id)
    third = echo_rollouts(policy, n_groups=2, first_group_id=2, first_trajectory_id=len(first))
    batch = build_rollout_batch(first + third, pad_id=policy.pad_token_id)
    assert len(set(batch.trajectory_ids.tolist())) == len(first) + len(third)


def test_weights_are_copied_to_every_row_of_their_trajectory():
    policy = sampling_policy(build_tiny_tokenizer(EchoEnv().vocabulary()))
    trajectories = echo_rollouts(policy, n_groups=1, group_size=2)
    batch = build_rollout_batch(trajectories, pad_id=policy.pad_token_id, weights=[0.5, 2.0])
    expected = [0.5 if i == 0 else 2.0 for i, _ in batch.row_keys]
    assert batch.weights.tolist() == expected
