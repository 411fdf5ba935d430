"""Length-aware minibatches: the index arithmetic, trimming to the longest row, and the update they feed.

Trimming drops only columns that are padding in every row of a minibatch, so log-probs, losses and
metrics must match the full-width ones up to float rounding; ``length_buckets=0`` with
``trim_padding=False`` must be the plain shuffled update, bit for bit.
"""

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from critic import TokenCritic, TokenCriticConfig
from policy.batch import TokenBatch
from policy.config import PPOConfig
from policy.learner import PPOLearner
from policy.logprobs import token_logprobs
from policy.minibatches import minibatch_indices, padding_columns, trim_columns
from policy.value_targets import ValueTargets
from tests.policy.test_learner import VOCAB, fabric, tiny_lm


def indices(lengths, seed=0, **kwargs):
    return minibatch_indices(torch.tensor(lengths), generator=torch.Generator().manual_seed(seed), **kwargs)


def test_zero_buckets_is_a_plain_shuffle_per_epoch():
    generator = torch.Generator().manual_seed(7)
    expected = [torch.randperm(10, generator=generator).split(3) for _ in range(2)]

    got = indices([5] * 10, seed=7, epochs=2, minibatch_size=3, length_buckets=0)

    assert len(got) == 2
    for epoch, want in zip(got, expected, strict=True):
        assert [m.tolist() for m in epoch] == [m.tolist() for m in want]


def test_one_bucket_cuts_the_rows_sorted_by_length():
    # Lengths all distinct; one bucket (3 minibatches of 2 >= 6 rows): whatever the shuffle, the
    # minibatches are the length-sorted rows cut in pairs: {3, 0} (1, 2), {4, 1} (3, 4), {5, 2} (5, 6).
    lengths = [2, 4, 6, 1, 3, 5]
    for seed in range(5):
        (epoch,) = indices(lengths, seed=seed, epochs=1, minibatch_size=2, length_buckets=3)
        assert sorted(sorted(m.tolist()) for m in epoch) == [[0, 3], [1, 4], [2, 5]]


def test_buckets_sort_within_themselves_only():
    # Two buckets of 2 minibatches of 2 rows: every minibatch's rows are adjacent in its bucket's sort,
    # so a minibatch never mixes the two shortest of its bucket with the two longest.
    lengths = list(range(8))
    generator = torch.Generator().manual_seed(3)
    order = torch.randperm(8, generator=generator)  # what the function draws first
    buckets = [sorted(order[:4].tolist()), sorted(order[4:].tolist())]  # lengths equal the row ids here
    expected = sorted(sorted(b[i : i + 2]) for b in buckets for i in (0, 2))

    (epoch,) = indices(lengths, seed=3, epochs=1, minibatch_size=2, length_buckets=2)

    assert sorted(sorted(m.tolist()) for m in epoch) == expected


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=150),
    minibatch_size=st.integers(1, 70),
    length_buckets=st.integers(0, 5),
    epochs=st.integers(1, 3),
    seed=st.integers(0, 2**31),
)
def test_every_epoch_is_a_permutation_cut_into_minibatches(
    lengths, minibatch_size, length_buckets, epochs, seed
):
    kwargs = {"epochs": epochs, "minibatch_size": minibatch_size, "length_buckets": length_buckets}
    got = indices(lengths, seed=seed, **kwargs)
    rows = len(lengths)

    assert len(got) == epochs
    for epoch in got:
        assert sorted(torch.cat(epoch).tolist()) == list(range(rows))  # every row once
        sizes = [len(m) for m in epoch]
        assert len(sizes) == math.ceil(rows / minibatch_size)  # as many steps as the plain shuffle
        assert sorted(sizes)[1:] == [minibatch_size] * (len(sizes) - 1)  # all full but one
    again = indices(lengths, seed=seed, **kwargs)
    assert all(torch.equal(a, b) for x, y in zip(got, again, strict=True) for a, b in zip(x, y, strict=True))


def test_other_seeds_give_other_minibatches():
    lengths = [i % 7 + 1 for i in range(100)]
    first, second = (
        indices(lengths, seed=s, epochs=1, minibatch_size=8, length_buckets=2)[0] for s in (0, 1)
    )
    assert [m.tolist() for m in first] != [m.tolist() for m in second]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="length_buckets >= 0"):
        indices([1, 2], epochs=1, minibatch_size=1, length_buckets=-1)
    with pytest.raises(ValueError, match="lengths must be"):
        indices([[1, 2]], epochs=1, minibatch_size=1, length_buckets=0)
    with pytest.raises(ValueError, match="length_buckets must be an integer"):
        PPOConfig(length_buckets=-1)
    with pytest.raises(ValueError, match="old_logp must be one of"):
        PPOConfig(old_logp="cached")


def test_padding_columns_counts_columns_padded_in_every_row():
    mask = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert padding_columns(mask) == 2
    assert padding_columns(torch.ones(2, 3)) == 0
    assert padding_columns(torch.zeros(2, 3)) == 0  # nothing real: nothing cut
    batch = TokenBatch(torch.arange(15).view(3, 5), mask, mask.float())
    trimmed = trim_columns(batch, 2)
    assert trimmed.input_ids.tolist() == [[2, 3, 4], [7, 8, 9], [12, 13, 14]]
    assert torch.equal(trimmed.attention_mask, mask[:, 2:])


def padded_batch() -> TokenBatch:
    """Six left-padded turns of 3 to 8 tokens in 10 columns: every minibatch has padding columns to drop."""
    torch.manual_seed(0)
    lengths, actions, width = [3, 8, 5, 4, 7, 6], [2, 3, 2, 1, 3, 2], 10
    ids = torch.zeros(6, width, dtype=torch.long)
    mask = torch.zeros(6, width, dtype=torch.long)
    response = torch.zeros(6, width)
    for b, (n, a) in enumerate(zip(lengths, actions, strict=True)):
        ids[b, width - n :] = torch.randint(1, VOCAB, (n,))
        mask[b, width - n :] = 1
        response[b, width - a :] = 1.0
    return TokenBatch(ids, mask, response)


def test_trimmed_log_probs_equal_full_width_ones():
    model = tiny_lm().eval()
    batch = padded_batch()
    rows = torch.tensor([0, 3, 5])  # lengths 3, 4, 6 in 10 columns: 4 columns are padding in every row
    part = batch.index(rows)
    start = padding_columns(part.attention_mask)
    assert start == 4
    with torch.no_grad():
        full, full_entropy = token_logprobs(model, part.input_ids, part.attention_mask)
        cut, cut_entropy = token_logprobs(
            model, *(t[:, start:] for t in (part.input_ids, part.attention_mask))
        )
    # Compared where the token and its predecessor are real (a first token has no real prefix).
    scored = (part.attention_mask[:, start:] * part.attention_mask[:, start - 1 : -1]).bool()
    assert scored.sum() == 3 + 4 + 6 - 3
    torch.testing.assert_close(cut[scored], full[:, start:][scored], atol=1e-5, rtol=0)
    torch.testing.assert_close(cut_entropy[scored], full_entropy[:, start:][scored], atol=1e-5, rtol=0)


def tiny_critic() -> TokenCritic:
    return TokenCritic(
        TokenCriticConfig(vocab_size=VOCAB, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32),
        seed=0,
    )


@pytest.mark.parametrize(
    "options",
    [
        {"loss_agg": "token-mean"},
        {"loss_agg": "seq-mean-token-sum-norm", "loss_scale_factor": 3.0, "entropy_coef": 0.01},
        {"loss_agg": "token-mean", "kl_coef": 0.1, "critic": True},
    ],
    ids=["token-mean", "drgrpo", "kl-and-token-critic"],
)
def test_trimming_changes_no_loss_metric_or_step(options):
    """Same minibatch partition (plain shuffle) with and without trimming: same metrics and weights."""
    options = dict(options)
    with_critic = options.pop("critic", False)
    batch = padded_batch()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0], [-0.3], [0.8]])  # (B, L)
    weights = torch.tensor([1.0, 0.5, 1.0, 0.0, 1.0, 2.0])  # (B,)
    base, critic = tiny_lm(), tiny_critic() if with_critic else None
    results = []
    for trim in (False, True):
        cfg = PPOConfig(epochs=2, minibatch_size=3, lr=1e-2, length_buckets=0, trim_padding=trim, **options)
        learner = PPOLearner(
            fabric(),
            copy.deepcopy(base),
            cfg,
            seed=0,
            critic=copy.deepcopy(critic),
            ref_model=copy.deepcopy(base) if cfg.kl_coef else None,
        )
        value = None
        if with_critic:
            returns = batch.response_mask * torch.tensor([[1.0], [0.0], [0.5], [1.0], [0.2], [0.0]])
            value = ValueTargets("token", returns, old_values=learner.critic_token_values(batch, 4))
        stats = [learner.update(batch, advantages, weights=weights, value=value) for _ in range(2)]
        params = [p.detach().clone() for p in learner.policy.parameters()]
        if with_critic:
            params += [p.detach().clone() for p in learner.critic.parameters()]
        results.append((stats, params))
    (full_stats, full_params), (cut_stats, cut_params) = results
    for full, cut in zip(full_stats, cut_stats, strict=True):
        assert full.keys() == cut.keys()
        assert full["losses/grad_norm"] > 0
        for key in full:
            assert cut[key] == pytest.approx(full[key], abs=1e-5), key
    for full, cut in zip(full_params, cut_params, strict=True):
        torch.testing.assert_close(cut, full, atol=1e-5, rtol=0)


def test_plain_minibatches_at_full_width_are_the_earlier_update_bit_for_bit():
    """``length_buckets=0, trim_padding=False`` against the update assembled from its parts the way it was
    before length-aware minibatches: a randperm per epoch cut in order, old log-probs from eval-mode
    forward passes over the first epoch's full-width minibatches, then one step per minibatch."""
    batch = padded_batch()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0], [-0.3], [0.8]])
    cfg = PPOConfig(
        epochs=2, minibatch_size=2, lr=1e-2, length_buckets=0, trim_padding=False, old_logp="recompute"
    )
    base = tiny_lm()
    learner = PPOLearner(fabric(), copy.deepcopy(base), cfg, seed=5)
    for _ in range(2):
        learner.update(batch, advantages)

    reference = PPOLearner(fabric(), copy.deepcopy(base), cfg, seed=5)
    for update in range(2):
        generator = torch.Generator().manual_seed(5 + update)
        orders = [torch.randperm(len(batch), generator=generator) for _ in range(cfg.epochs)]
        minibatches = [order.split(cfg.minibatch_size) for order in orders]
        old = torch.zeros(batch.input_ids.shape)
        reference.policy.eval()
        with torch.no_grad():
            for idx in minibatches[0]:
                part = batch.index(idx)
                old[idx] = token_logprobs(reference.policy, part.input_ids, part.attention_mask)[0]
        reference.policy.train()
        for epoch in minibatches:
            for idx in epoch:
                one_micro_batch = [(batch.index(idx), {"advantages": advantages[idx], "old_logp": old[idx]}, None)]
                reference._step(one_micro_batch, None, None)

    for a, b in zip(learner.policy.parameters(), reference.policy.parameters(), strict=True):
        assert torch.equal(a, b)


def test_default_update_is_the_same_for_the_same_seed():
    batch = padded_batch()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0], [-0.3], [0.8]])
    runs = []
    for _ in range(2):
        learner = PPOLearner(fabric(), tiny_lm(), PPOConfig(epochs=2, minibatch_size=2, lr=1e-2), seed=3)
        torch.manual_seed(len(runs))  # the global RNG must not matter
        learner.update(batch, advantages, old_logp=torch.zeros(batch.input_ids.shape))
        runs.append([p.detach().clone() for p in learner.policy.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))
