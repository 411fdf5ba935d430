"""A prompt longer than ``max_prompt_tokens`` loses its start: that is said once, with the numbers."""

from __future__ import annotations

import logging
import warnings

import pytest

import policy.encode as encode
from policy.encode import PromptCutWarning, prompt_ids
from policy.model import build_tiny_tokenizer

TOKENIZER = build_tiny_tokenizer(["a", "b", "c"])


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    monkeypatch.setattr(encode, "_warned_caps", set())


def test_a_cut_prompt_warns_once_with_its_length_and_the_cap(caplog):
    long_prompt = " ".join(["a"] * 20)  # 20 tokens, + BOS = 21
    with caplog.at_level(logging.WARNING, logger="policy.encode"):
        with pytest.warns(PromptCutWarning, match=r"a prompt of 21 tokens was cut to policy.max_prompt_tokens=8: its first 13"):
            ids = prompt_ids(TOKENIZER, [long_prompt, "b"], max_prompt_tokens=8)
        assert [len(row) for row in ids] == [8, 2]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a second cut under the same cap must stay silent
            prompt_ids(TOKENIZER, [long_prompt + " c c"], max_prompt_tokens=8)
    assert sum("was cut to" in record.message for record in caplog.records) == 1  # into the run's log too


def test_prompts_that_fit_say_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prompt_ids(TOKENIZER, ["a b c"], max_prompt_tokens=4)  # BOS + 3 tokens: fits exactly
