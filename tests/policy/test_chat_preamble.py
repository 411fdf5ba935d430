"""A pretrained policy's chat prompt: the env's own format line as its system message, few-shot expert
turns before the history, and the same prompt for sampling and for cloning. The tiny policies' plain-text
prompts show none of it."""

from __future__ import annotations

import pytest

from envs.trajectory import Trajectory
from policy.chat_preamble import chat_preamble, env_system_prompt, few_shot_messages
from policy.config import PolicyConfig
from policy.encode import turn_samples
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer
from policy.render import render_prompt, render_text
from tests.policy.fake_envs import hand_turn
from tests.policy.test_render import CURRENT, TEMPLATE, TURNS

PRIOR = [{"role": "user", "content": "say red"}, {"role": "assistant", "content": "red"}]


def episode(*pairs: tuple[str, str]) -> Trajectory:
    turns = [hand_turn(observation, action, "next") for observation, action in pairs]
    return Trajectory(env_name="fake", env_kwargs={}, seed=0, group_id=0, trajectory_id=0, turns=turns)


def test_the_default_system_message_quotes_the_envs_format_answer_and_an_example():
    # hidden_number's answer to a malformed action (envs/hidden_number.py, n = 16 by default), written out
    text = env_system_prompt("hidden_number", {})
    assert '"invalid action . call guess(k) with k in 1 .. 16"' in text
    example = text.splitlines()[-1].removeprefix("An example of a well-formed action: ")
    assert example.startswith("guess(") and 1 <= int(example[6:-1]) <= 16
    assert '"invalid action . call guess(k) with k in 1 .. 5"' in env_system_prompt("hidden_number", {"n": 5})


def test_few_shot_episodes_become_user_and_assistant_turns_in_order():
    episodes = [episode(("a", "1"), ("b", "2")), episode(("c", "3"))]
    assert few_shot_messages(episodes) == [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "1"},
        {"role": "user", "content": "b"}, {"role": "assistant", "content": "2"},
        {"role": "user", "content": "c"}, {"role": "assistant", "content": "3"},
    ]


def test_one_expert_episode_of_hidden_number_ends_with_the_hidden_number():
    preamble = chat_preamble("hidden_number", {"n": 4}, system_prompt="act", few_shot=1, seed=0, max_turns=None)
    assert preamble["system_prompt"] == "act"
    actions = [m["content"] for m in preamble["prior"] if m["role"] == "assistant"]
    # binary search over 1..4 by the expert: at most 3 guesses, each of the form guess(k)
    assert 1 <= len(actions) <= 3 and all(a.startswith("guess(") for a in actions)


def test_prior_messages_sit_between_the_system_message_and_the_history():
    tokenizer = build_tiny_tokenizer(["say red cat dog sun fish"])
    tokenizer.chat_template = TEMPLATE
    prompt = render_prompt(tokenizer, TURNS[2:], CURRENT, 1, "act", PRIOR)
    assert prompt.startswith("<|system|>act\n<|user|>say red\n<|assistant|>red\n<|user|>")
    assert prompt.endswith("<|assistant|>sun\n<|user|>say fish\n<|assistant|>")


def test_a_plain_text_prompt_shows_no_system_message_and_no_prior_turns():
    tokenizer = build_tiny_tokenizer(["say red cat dog sun fish"])
    assert render_prompt(tokenizer, TURNS, CURRENT, 2, "act", PRIOR) == render_text(TURNS, CURRENT, 2)


def test_cloning_renders_the_prompts_that_sampling_renders():
    tokenizer = build_tiny_tokenizer(["say red cat dog sun fish next"])
    tokenizer.chat_template = TEMPLATE
    cfg = PolicyConfig(history_window=1)
    policy = LMPolicy(build_tiny_lm(cfg, tokenizer, seed=0), tokenizer, cfg, system_prompt="act", prior=PRIOR)
    demo = episode(("say sun", "sun"), ("say fish", "fish"))
    _, samples = policy.encode([demo])
    assert [s.prompt for s in samples] == [policy.render(demo.turns[:t], demo.turns[t].observation) for t in (0, 1)]
    assert samples[0].prompt == "<|system|>act\n<|user|>say red\n<|assistant|>red\n<|user|>say sun\n<|assistant|>"
    again = policy.with_seed(3)  # an evaluation copy prompts the same way
    assert (again.system_prompt, again.prior) == (policy.system_prompt, policy.prior)


def test_a_negative_few_shot_count_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="few_shot"):
        PolicyConfig(few_shot=-1)
    assert turn_samples([episode(("a", "1"))], 0)[0].prompt == "a\n>"  # the tiny default, unchanged
