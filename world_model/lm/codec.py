"""Token rows of the LM world model: the prompt (the history the policy sees plus the action, in the
chat roles of ``envs.chat``) and the target (the next observation, then EOS).

Two codecs answer the same calls:

- ``WordCodec`` over the env's word tokenizer (``TurnTokenizer``), for tiny models built from a
  config. Roles are its marker words: ``<obs>`` the user's first observation, ``<act>`` an
  assistant action, ``<res>`` a tool result::

      <s> <obs> first [<act> action <res> result]* <act> action <res>  ->  next observation </s>

- ``ChatCodec`` over a pretrained model's own tokenizer: the same messages through its chat template
  (or ``role: content`` lines without one), cut where the next tool message's content starts.

Every text is first put in the env's canonical word form (``TurnTokenizer``: words joined by spaces,
the word caps applied), so a real history and an imagined one read the same way and a written
observation compares equal to the real one exactly when their words do.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

from world_model.lm.history import Turns
from world_model.turn_tokens import TurnTokenizer


def canonical(tk: TurnTokenizer, texts: Sequence[str], cap: int) -> list[str]:
    """``texts`` as the env's capped words joined back (how the model reads and writes them)."""
    return [tk.decode(words) for words in tk.words(list(texts), cap)]


class WordCodec:
    """Rows over the env's word tokenizer (see the module docstring)."""

    def __init__(self, tk: TurnTokenizer) -> None:
        self.tk = tk
        self.eos_id, self.pad_id = tk.eos_id, tk.pad_id
        self.banned_ids = [tk.pad_id, tk.bos_id, tk.tokenizer.unk_token_id, tk.obs_id, tk.act_id, tk.res_id,
                           tk.look_id]
        self.max_new_tokens = tk.limits.observation + 1  # the words, then </s>

    def max_prompt_tokens(self, window: int) -> int:
        """The longest prompt with ``window`` turns of history."""
        obs, act = self.tk.limits.observation, self.tk.limits.action
        return 2 + obs + window * (2 + act + obs) + 2 + act

    def prompts(self, first: Sequence[str], turns: Sequence[Turns], actions: Sequence[str]) -> list[list[int]]:
        tk = self.tk
        observations = tk.observation_words([*first, *(o for row in turns for _, o in row)])
        acted = tk.action_words([*(a for row in turns for a, _ in row), *actions])
        rows, o, a = [], len(first), 0
        for b in range(len(first)):
            ids = [tk.bos_id, tk.obs_id, *observations[b]]
            for _ in turns[b]:
                ids += [tk.act_id, *acted[a], tk.res_id, *observations[o]]
                o, a = o + 1, a + 1
            rows.append(ids)
        for row, words in zip(rows, acted[a:], strict=True):
            row += [tk.act_id, *words, tk.res_id]
        return rows

    def targets(self, observations: Sequence[str]) -> list[list[int]]:
        return [[*words, self.eos_id] for words in self.tk.observation_words(list(observations))]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tk.decode(ids)


class ChatCodec:
    """Rows over a pretrained model's tokenizer and chat template (see the module docstring)."""

    MARK = "\u2063"  # an invisible separator: where the generated tool content starts

    def __init__(self, tokenizer: PreTrainedTokenizerBase, tk: TurnTokenizer, *, max_new_tokens: int) -> None:
        self.tokenizer, self.tk = tokenizer, tk
        self.eos_id, self.pad_id = tokenizer.eos_token_id, tokenizer.pad_token_id
        self.banned_ids = [] if self.pad_id == self.eos_id else [self.pad_id]
        self.max_new_tokens = max_new_tokens

    def max_prompt_tokens(self, window: int) -> int:
        return getattr(self.tokenizer, "model_max_length", 4096)

    def _render(self, messages: list[dict[str, str]]) -> str:
        messages = [*messages, {"role": "tool", "content": self.MARK}]
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(messages, tokenize=False)
        else:
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return text[: text.index(self.MARK)]

    def prompts(self, first: Sequence[str], turns: Sequence[Turns], actions: Sequence[str]) -> list[list[int]]:
        obs_cap, act_cap = self.tk.limits.observation, self.tk.limits.action
        texts = []
        for f, row, action in zip(first, turns, actions, strict=True):
            messages = [{"role": "user", "content": canonical(self.tk, [f], obs_cap)[0]}]
            for a, o in row:
                messages += [{"role": "assistant", "content": canonical(self.tk, [a], act_cap)[0]},
                             {"role": "tool", "content": canonical(self.tk, [o], obs_cap)[0]}]
            messages.append({"role": "assistant", "content": canonical(self.tk, [action], act_cap)[0]})
            texts.append(self._render(messages))
        return self.tokenizer(texts, add_special_tokens=False)["input_ids"]

    def targets(self, observations: Sequence[str]) -> list[list[int]]:
        texts = canonical(self.tk, observations, self.tk.limits.observation)
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [[*row[: self.max_new_tokens - 1], self.eos_id] for row in ids]

    def decode(self, ids: Sequence[int]) -> str:
        kept = []
        for i in ids:
            if i == self.eos_id:
                break
            kept.append(int(i))
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        return canonical(self.tk, [text], self.tk.limits.observation)[0]
