"""How a multi-turn history becomes the policy's prompt. Pure functions: no model, no tensors.

Only the last ``history_window`` turns (K) are shown before the current observation; K = 0 shows the
current observation alone. Past turns are shown as they happened: an invalid action and the env's
error answer appear verbatim (the error answer is the next turn's observation).

Plain text (tiny word-level models, or any tokenizer without a chat template)::

    <observation of turn t-K>
    > <action of turn t-K>
    ...
    <current observation>
    >

The action is generated after the final ``>``. A tokenizer with a chat template instead gets
messages (system, then user/assistant pairs, then the current observation as a user message)
rendered with ``add_generation_prompt=True``. ``prior`` messages (few-shot turns: earlier episodes as
user/assistant pairs) go between the system message and the history.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.trajectory import Turn

ACTION_MARKER = ">"
RENDER_VOCABULARY = (ACTION_MARKER,)  # words the plain-text prompt adds to an env's vocabulary
SYSTEM_PROMPT = "You are an agent in a text environment. Reply with your next action only."


def history_slice(turns: Sequence[Turn], history_window: int) -> Sequence[Turn]:
    """The last ``history_window`` turns, oldest first (none when the window is 0)."""
    if history_window < 0:
        raise ValueError(f"history_window must be >= 0, got {history_window}")
    if history_window == 0:
        return turns[:0]
    return turns[-history_window:]


def render_text(turns: Sequence[Turn], observation: str, history_window: int) -> str:
    """The plain-text prompt: windowed past turns, the current observation, then the action marker."""
    parts = [f"{turn.observation}\n{ACTION_MARKER} {turn.action}\n" for turn in history_slice(turns, history_window)]
    parts.append(f"{observation}\n{ACTION_MARKER}")
    return "".join(parts)


def render_messages(
    turns: Sequence[Turn], observation: str, history_window: int, system_prompt: str | None = SYSTEM_PROMPT,
    prior: Sequence[dict[str, str]] = (),
) -> list[dict[str, str]]:
    """Chat messages: optional system prompt, the ``prior`` messages, then (user observation, assistant
    action) per windowed turn, then the current observation as the last user message."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.extend(dict(message) for message in prior)
    for turn in history_slice(turns, history_window):
        messages.append({"role": "user", "content": turn.observation})
        messages.append({"role": "assistant", "content": turn.action})
    messages.append({"role": "user", "content": observation})
    return messages


def has_chat_template(tokenizer) -> bool:
    """Whether the tokenizer carries a chat template (pretrained chat models do; word-level ones don't)."""
    return bool(getattr(tokenizer, "chat_template", None))


def render_prompt(
    tokenizer, turns: Sequence[Turn], observation: str, history_window: int, system_prompt: str | None = SYSTEM_PROMPT,
    prior: Sequence[dict[str, str]] = (),
) -> str:
    """The prompt text for this tokenizer: its chat template when it has one, else the plain-text format
    (which shows neither the system prompt nor the ``prior`` messages)."""
    if has_chat_template(tokenizer):
        messages = render_messages(turns, observation, history_window, system_prompt, prior)
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return render_text(turns, observation, history_window)
