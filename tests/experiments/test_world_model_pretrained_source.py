"""``world_model.lm.pretrained`` takes what ``policy.pretrained`` takes (a folder, a .gguf file, a packaged
model's name): ``build_world_model`` reads a GGUF file through the de-quantised cache, and a source that
names nothing loadable fails in one line naming ``world_model.lm.pretrained``."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gguf", reason="pip install gguf (make install does)")

from envs import make  # noqa: E402
from experiments.world_model_builder import build_world_model  # noqa: E402
from policy.model_source import ModelSourceError  # noqa: E402
from tests.policy.tiny_gguf import write_tiny_gguf  # noqa: E402
from world_model.config import WorldModelOptions  # noqa: E402
from world_model.lm.config import LMOptions  # noqa: E402

ENV = "hidden_number"


def built(pretrained: str, **lm):
    options = WorldModelOptions(name="lm", num_members=2, lm=LMOptions(pretrained=pretrained, **lm))
    return build_world_model(options, ENV, {}, make(ENV).vocabulary(), seed=0)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "reverie" / "models"


def embeddings(model) -> list[np.ndarray]:
    """Every token-embedding matrix in the model (one per member, or one shared frozen base)."""
    return [p.detach().numpy() for name, p in model.named_parameters() if name.endswith("embed_tokens.weight")]


@pytest.mark.parametrize("lora_rank", [0, 2])
def test_a_gguf_file_builds_the_lm_world_model_from_its_weights(tmp_path, cache, lora_rank):
    path = tmp_path / "tiny.gguf"
    written = write_tiny_gguf(path)
    model = built(str(path), lora_rank=lora_rank)
    found = embeddings(model)
    assert found  # the weights were read, and they are the file's
    for matrix in found:
        np.testing.assert_array_equal(matrix, written["token_embd.weight"])
    folders = list(cache.iterdir())
    assert len(folders) == 1 and model.config.options.pretrained == str(folders[0])  # the de-quantised copy


def one_line_error(value: str) -> str:
    with pytest.raises(ModelSourceError) as caught:
        built(value)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("world_model.lm.pretrained=")
    return message


def test_a_missing_path_fails_in_one_line_naming_the_world_model_key(tmp_path, cache):
    assert "does not exist" in one_line_error(str(tmp_path / "nowhere.gguf"))


def test_a_file_that_is_not_gguf_fails_in_one_line_naming_the_world_model_key(tmp_path, cache):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"PK\x03\x04 a zip, not a GGUF file")
    assert "is a file but not a GGUF file" in one_line_error(str(path))
    assert not cache.exists()  # refused before anything is read or written


def test_a_latent_world_model_ignores_the_lm_section():
    options = WorldModelOptions(name="latent", num_members=2)
    assert build_world_model(options, ENV, {}, make(ENV).vocabulary(), seed=0) is not None
