import pytest

from policy.model import build_tiny_tokenizer
from policy.render import (
    SYSTEM_PROMPT,
    has_chat_template,
    history_slice,
    render_messages,
    render_prompt,
    render_text,
)
from tests.policy.fake_envs import ERROR, hand_turn

# A tiny Jinja chat template written for this test: "<|role|>content" per message, then "<|assistant|>".
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

TURNS = [
    hand_turn("say red", "red", "say cat"),
    hand_turn("say cat", "cat dog", f"{ERROR}\nsay sun", valid=False),
    hand_turn(f"{ERROR}\nsay sun", "sun", "say fish"),
]
CURRENT = "say fish"


def test_window_keeps_the_last_k_turns():
    assert list(history_slice(TURNS, 0)) == []
    assert list(history_slice(TURNS, 2)) == TURNS[1:]
    assert list(history_slice(TURNS, 10)) == TURNS
    with pytest.raises(ValueError, match="history_window"):
        history_slice(TURNS, -1)


def test_k0_shows_only_the_current_observation():
    assert render_text(TURNS, CURRENT, 0) == "say fish\n>"
    assert render_text([], "say red", 3) == "say red\n>"


def test_truncated_window_shows_invalid_action_and_error_as_they_happened():
    expected = (
        "say cat\n> cat dog\n"  # the invalid action, verbatim
        f"{ERROR}\nsay sun\n> sun\n"  # the env's error answer is the next observation
        "say fish\n>"
    )
    assert render_text(TURNS, CURRENT, 2) == expected
    assert render_text(TURNS, CURRENT, 3) == "say red\n> red\n" + expected


def test_messages_pair_observations_with_actions():
    assert render_messages(TURNS, CURRENT, 1) == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{ERROR}\nsay sun"},
        {"role": "assistant", "content": "sun"},
        {"role": "user", "content": "say fish"},
    ]
    assert render_messages(TURNS, CURRENT, 0, system_prompt=None) == [{"role": "user", "content": "say fish"}]


def test_prompt_uses_plain_text_without_a_chat_template():
    tokenizer = build_tiny_tokenizer(["say red cat dog sun fish", ERROR])
    assert not has_chat_template(tokenizer)
    prompt = render_prompt(tokenizer, TURNS, CURRENT, 2)
    assert prompt == render_text(TURNS, CURRENT, 2)
    assert tokenizer.unk_token_id not in tokenizer(prompt).input_ids  # the ">" marker is in the vocabulary


def test_prompt_uses_the_chat_template_when_there_is_one():
    tokenizer = build_tiny_tokenizer(["say red cat dog sun fish", ERROR])
    tokenizer.chat_template = TEMPLATE
    assert has_chat_template(tokenizer)
    prompt = render_prompt(tokenizer, TURNS, CURRENT, 1, system_prompt="act")
    assert prompt == f"<|system|>act\n<|user|>{ERROR}\nsay sun\n<|assistant|>sun\n<|user|>say fish\n<|assistant|>"
