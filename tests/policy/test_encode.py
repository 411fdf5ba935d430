"""Masks checked token by token on hand-built multi-turn trajectories."""

import pytest
import torch

from envs.trajectory import Trajectory
from policy.encode import encode_prompts, encode_samples, response_lengths, turn_samples
from policy.model import build_tiny_tokenizer
from tests.policy.fake_envs import ERROR, hand_turn

TOKENIZER = build_tiny_tokenizer(["say red cat dog sun fish done", ERROR])
ERR = ["invalid", ":", "reply", "with", "one", "word"]  # ERROR, word by word

TRAJECTORY = Trajectory(
    "echo", {}, seed=0, group_id=0, trajectory_id=0,
    turns=[
        hand_turn("say red", "red", "say cat"),
        hand_turn("say cat", "cat dog", f"{ERROR}\nsay sun", valid=False),  # invalid, two words
        hand_turn(f"{ERROR}\nsay sun", "sun", "say fish"),
        hand_turn("say fish", "", "done"),  # empty action
    ],
)


def row(batch, b):
    """(token, attention, response) for each column of row b."""
    tokens = TOKENIZER.convert_ids_to_tokens(batch.input_ids[b].tolist())
    return list(zip(tokens, batch.attention_mask[b].tolist(), batch.response_mask[b].tolist(), strict=True))


def real(batch, b):
    """(token, response) for the real (non-padding) columns of row b."""
    return [(t, r) for t, a, r in row(batch, b) if a == 1]


def prompt(*tokens):
    return [(t, 0.0) for t in tokens]


def response(*tokens):
    return [(t, 1.0) for t in tokens]


def encode(samples, max_prompt_tokens=64, max_action_tokens=8):
    return encode_samples(
        TOKENIZER, [s.prompt for s in samples], [s.action for s in samples],
        max_prompt_tokens=max_prompt_tokens, max_action_tokens=max_action_tokens,
    )


def test_one_sample_per_turn_with_the_window_before_it():
    other = Trajectory("echo", {}, 1, 1, 1, turns=[hand_turn("say dog", "dog", "done")])
    samples = turn_samples([TRAJECTORY, other], history_window=1)
    assert [(s.trajectory_index, s.turn_index) for s in samples] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert [s.action for s in samples] == ["red", "cat dog", "sun", "", "dog"]
    assert samples[0].prompt == "say red\n>"
    assert samples[2].prompt == f"say cat\n> cat dog\n{ERROR}\nsay sun\n>"
    assert samples[4].prompt == "say dog\n>"


def test_masks_token_by_token_with_a_truncated_window_and_an_invalid_action():
    batch = encode(turn_samples([TRAJECTORY], history_window=1))
    assert real(batch, 0) == prompt("<s>", "say", "red", "\n", ">") + response("red", "</s>")
    # the invalid action is the agent's own output: trained
    assert real(batch, 1) == prompt("<s>", "say", "red", "\n", ">", "red", "\n", "say", "cat", "\n", ">") + response(
        "cat", "dog", "</s>"
    )
    # window K=1 drops turn 0; the invalid action and the error answer are history: masked
    assert real(batch, 2) == prompt(
        "<s>", "say", "cat", "\n", ">", "cat", "dog", "\n", *ERR, "\n", "say", "sun", "\n", ">"
    ) + response("sun", "</s>")
    # an empty action trains the EOS alone
    assert real(batch, 3) == prompt(
        "<s>", *ERR, "\n", "say", "sun", "\n", ">", "sun", "\n", "say", "fish", "\n", ">"
    ) + response("</s>")
    assert response_lengths(batch).tolist() == [2, 3, 2, 1]


def test_rows_are_left_padded_with_nothing_trained_on_padding():
    batch = encode(turn_samples([TRAJECTORY], history_window=1))
    width = batch.input_ids.shape[1]
    assert width == 21  # the longest row: turn 2
    columns = row(batch, 0)
    assert columns[: width - 7] == [("<pad>", 0, 0.0)] * (width - 7)
    assert batch.input_ids.dtype == torch.long and batch.response_mask.dtype == torch.float
    assert batch.attention_mask.sum(1).tolist() == [7, 14, 21, 19]
    assert torch.all(batch.response_mask <= batch.attention_mask)


def test_window_zero_shows_only_the_current_observation():
    batch = encode(turn_samples([TRAJECTORY], history_window=0))
    assert real(batch, 2) == prompt("<s>", *ERR, "\n", "say", "sun", "\n", ">") + response("sun", "</s>")


def test_overlong_prompt_is_left_truncated_and_keeps_bos_and_the_end():
    samples = turn_samples([TRAJECTORY], history_window=1)
    batch = encode(samples, max_prompt_tokens=6, max_action_tokens=8)
    # BOS + the last 5 prompt tokens ("... one word \n say sun \n >" keeps "\n say sun \n >")
    assert real(batch, 2) == prompt("<s>", "\n", "say", "sun", "\n", ">") + response("sun", "</s>")
    assert real(batch, 0) == prompt("<s>", "say", "red", "\n", ">") + response("red", "</s>")  # short: untouched


def test_overlong_action_is_cut_before_the_eos():
    batch = encode(turn_samples([TRAJECTORY], history_window=0), max_action_tokens=1)
    assert real(batch, 1)[-2:] == response("cat", "</s>")
    assert response_lengths(batch).tolist() == [2, 2, 2, 1]


def test_generation_prompts_are_exactly_the_prompt_part_of_training_rows():
    samples = turn_samples([TRAJECTORY], history_window=2)
    batch = encode(samples, max_prompt_tokens=9)
    ids, mask = encode_prompts(TOKENIZER, [s.prompt for s in samples], max_prompt_tokens=9)
    for b in range(len(samples)):
        n_prompt = int(mask[b].sum())
        n_resp = int(batch.response_mask[b].sum())
        trained_row = batch.input_ids[b][batch.attention_mask[b] == 1]
        assert trained_row[:n_prompt].tolist() == ids[b, -n_prompt:].tolist()
        assert len(trained_row) == n_prompt + n_resp


def test_chat_template_prompts_get_no_extra_bos():
    tokenizer = build_tiny_tokenizer(["say red user assistant", ERROR])
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }} {{ m['content'] }}\n{% endfor %}assistant"
    samples = turn_samples([TRAJECTORY], history_window=0, tokenizer=tokenizer)
    assert samples[0].prompt.endswith("user say red\nassistant")
    batch = encode_samples(tokenizer, [samples[0].prompt], ["red"], max_prompt_tokens=64, max_action_tokens=4)
    tokens = tokenizer.convert_ids_to_tokens(batch.input_ids[0].tolist())
    assert "<s>" not in tokens
    assert tokens[-6:] == ["say", "red", "\n", "assistant", "red", "</s>"]
    assert batch.response_mask[0, -3:].tolist() == [0.0, 1.0, 1.0]


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError, match="2 prompts but 1 actions"):
        encode_samples(TOKENIZER, ["a", "b"], ["a"], max_prompt_tokens=8, max_action_tokens=2)
