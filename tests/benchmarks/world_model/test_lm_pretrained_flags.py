"""``--lm-pretrained`` / ``--lm-lora-rank``: the benchmark's LM starts from a pretrained source (a folder, a
.gguf file or ``smollm2``) read as ``world_model.lm.pretrained`` is, with K LoRA adapters."""

from __future__ import annotations

import pytest

pytest.importorskip("gguf", reason="pip install gguf (make install does)")

from benchmarks.world_model.cli import lm_options, parser  # noqa: E402
from policy.model_source import ModelSourceError  # noqa: E402
from tests.policy.tiny_gguf import write_tiny_gguf  # noqa: E402


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "reverie" / "models"


def options(*flags: str):
    return lm_options(parser().parse_args(["--models", "lm", *flags]))


def test_without_the_flags_the_lm_is_built_from_its_config():
    built = options()
    assert built.pretrained is None and built.lora_rank == 0


def test_a_gguf_file_becomes_its_de_quantised_folder_with_lora_adapters(tmp_path, cache):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    built = options("--lm-pretrained", str(path), "--lm-lora-rank", "3")
    folders = list(cache.iterdir())
    assert len(folders) == 1 and built.pretrained == str(folders[0]) and built.lora_rank == 3
    assert (folders[0] / "config.json").is_file()


def test_a_missing_source_fails_in_one_line_naming_the_world_model_key(tmp_path, cache):
    with pytest.raises(ModelSourceError) as caught:
        options("--lm-pretrained", str(tmp_path / "nowhere.gguf"))
    message = str(caught.value)
    assert message.startswith("world_model.lm.pretrained=") and "\n" not in message and "does not exist" in message


def test_lora_without_a_pretrained_source_is_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"world_model\.lm\.lora_rank needs world_model\.lm\.pretrained"):
        options("--lm-lora-rank", "8")
