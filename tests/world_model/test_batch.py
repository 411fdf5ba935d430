"""build_training_batch: one row per trajectory, what is scored, and what is refused."""

from dataclasses import replace

import pytest
import torch

from world_model import build_training_batch


def test_rows_hold_each_turn_in_place(hn_tokenizer, hn_trajectories):
    tk = hn_tokenizer
    batch = build_training_batch(hn_trajectories, tk)
    n = max(t.num_turns for t in hn_trajectories)
    assert batch.turn_ids.shape[:2] == (len(hn_trajectories), n)
    assert batch.text_ids.shape[:2] == (len(hn_trajectories), n + 1)
    assert batch.num_outcomes == sum(t.num_turns for t in hn_trajectories)
    b = max(range(len(hn_trajectories)), key=lambda i: hn_trajectories[i].num_turns)
    trajectory = hn_trajectories[b]
    for t, turn in enumerate(trajectory.turns):
        ids, mask = tk.encode_turns([turn.action], [turn.next_observation])
        assert batch.turn_ids[b, t, : ids.shape[1]].tolist() == ids[0].tolist()
        assert batch.turn_mask[b, t].sum() == mask.sum()
        text, _ = tk.encode_texts([turn.next_observation])
        assert batch.text_ids[b, t + 1, : text.shape[1]].tolist() == text[0].tolist()
        query, _ = tk.encode_queries([turn.action])
        assert batch.query_ids[b, t, : query.shape[1]].tolist() == query[0].tolist()
        assert batch.rewards[b, t] == turn.reward and batch.dones[b, t] == float(turn.done)
    first, _ = tk.encode_texts([trajectory.turns[0].observation])
    assert batch.text_ids[b, 0, : first.shape[1]].tolist() == first[0].tolist()
    assert batch.dones.sum() == sum(t.turns[-1].done for t in hn_trajectories)


def test_masks_skip_padding_and_restored_prefixes(hn_tokenizer, hn_trajectories):
    long = next(t for t in hn_trajectories if t.num_turns >= 3)
    branched = replace(long, trajectory_id=999, branch_turn=2)
    batch = build_training_batch([long, branched], hn_tokenizer)
    turns = long.num_turns
    assert batch.outcome_mask[0].tolist() == [True] * turns
    assert batch.outcome_mask[1].tolist() == [False, False] + [True] * (turns - 2)
    assert batch.latent_mask[0].tolist() == [True] * (turns + 1)
    assert batch.latent_mask[1].tolist() == [False, False] + [True] * (turns - 1)
    short = min(hn_trajectories, key=lambda t: t.num_turns)
    mixed = build_training_batch([short, long], hn_tokenizer)
    assert mixed.outcome_mask[0].sum() == short.num_turns
    assert not mixed.turn_mask[0, short.num_turns :].any()


def test_imagined_and_empty_inputs_are_refused(hn_tokenizer, hn_trajectories):
    imagined = replace(hn_trajectories[0], trajectory_id=41, source="imagined")
    with pytest.raises(ValueError, match=r"\[41\]"):
        build_training_batch([hn_trajectories[1], imagined], hn_tokenizer)
    empty = replace(hn_trajectories[0], turns=[])
    with pytest.raises(ValueError, match="no trajectory"):
        build_training_batch([empty], hn_tokenizer)
    fully_restored = replace(hn_trajectories[0], branch_turn=hn_trajectories[0].num_turns)
    with pytest.raises(ValueError, match="no trajectory"):
        build_training_batch([fully_restored], hn_tokenizer)


def test_to_moves_every_tensor(hn_tokenizer, hn_trajectories):
    batch = build_training_batch(hn_trajectories[:2], hn_tokenizer).to("cpu")
    assert batch.rewards.dtype == torch.float32 and batch.turn_count.dtype == torch.long
