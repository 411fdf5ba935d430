"""The policy as a run leaves it: a Hugging Face model directory."""

from __future__ import annotations

from pathlib import Path

from policy.lm_policy import LMPolicy


def save_policy(policy: LMPolicy, folder: Path) -> None:
    """A Hugging Face model directory (safetensors + config + tokenizer): loadable, never unpickled."""
    policy.save(folder)
