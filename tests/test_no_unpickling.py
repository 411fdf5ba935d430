"""Nothing a user hands in is unpickled: a source audit, and a pickle payload that must never run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from policy.model import build_tiny_lm, build_tiny_tokenizer, load_local_pretrained

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "world_model", "critic", "policy", "imagination", "experiments")
# Calls that run a pickle's code. torch.load is allowed only with weights_only=True on the same call.
FORBIDDEN = re.compile(
    r"\b(pickle\.loads?|cloudpickle|dill\.|joblib\.load|fabric\.load|allow_pickle\s*=\s*True|"
    r"weights_only\s*=\s*False|torch\.serialization\.add_safe_globals)"
)
TORCH_LOAD = re.compile(r"torch\.load\(([^()]|\([^()]*\))*\)", re.S)


def source_files() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]


def test_library_code_never_unpickles() -> None:
    offences = []
    for path in source_files():
        text = path.read_text(encoding="utf-8")
        for match in FORBIDDEN.finditer(text):
            offences.append(
                f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
            )
        for match in TORCH_LOAD.finditer(text):
            if not re.search(r"weights_only\s*=\s*True", match.group(0)):
                offences.append(
                    f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}: torch.load "
                    "without weights_only=True"
                )
    assert offences == []


def test_the_audit_catches_what_it_forbids() -> None:
    assert FORBIDDEN.search("state = pickle.load(f)") and FORBIDDEN.search("fabric.load(path)")
    assert not re.search(
        r"weights_only\s*=\s*True", TORCH_LOAD.search("torch.load(p, map_location=dev('cpu'))")[0]
    )
    assert re.search(r"weights_only\s*=\s*True", TORCH_LOAD.search("torch.load(p, weights_only=True)")[0])


class Payload:
    """Unpickling this creates ``marker``: the proof that a pickle ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_policy_folder_holding_a_pickle_payload_never_runs_it(tmp_path: Path) -> None:
    tokenizer = build_tiny_tokenizer(["a", "b"])
    from policy.config import PolicyConfig

    build_tiny_lm(PolicyConfig(), tokenizer, seed=0).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    marker = tmp_path / "pwned"
    torch.save({"model.embed_tokens.weight": Payload(marker)}, tmp_path / "pytorch_model.bin")
    with pytest.raises(Exception):  # noqa: B017 - refused one way or another; what matters is the marker
        load_local_pretrained(tmp_path)
    assert not marker.exists()


def test_an_lm_world_model_folder_holding_only_a_pickle_payload_is_refused_unread(tmp_path: Path) -> None:
    from tests.world_model.lm.conftest import tiny_lm_world_model
    from world_model.lm import LMWorldModel
    from world_model.loading import load_world_model

    tiny_lm_world_model().save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    marker = tmp_path / "pwned"
    torch.save({"members.models.0.lm_head.weight": Payload(marker)}, tmp_path / "pytorch_model.bin")
    for load in (LMWorldModel.from_pretrained, load_world_model):
        with pytest.raises(ValueError, match="pytorch_model.bin, a pickle checkpoint"):
            load(tmp_path)
    assert not marker.exists()


def test_a_pickle_only_pretrained_base_for_the_lm_world_model_never_runs(tmp_path: Path) -> None:
    from tests.world_model.lm.test_lm_pretrained import pretrained_world_model, save_local_model

    save_local_model(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    marker = tmp_path / "pwned"
    torch.save({"model.embed_tokens.weight": Payload(marker)}, tmp_path / "pytorch_model.bin")
    with pytest.raises(Exception):  # noqa: B017 - transformers refuses it (safetensors only asked)
        pretrained_world_model(tmp_path, lora_rank=0)
    assert not marker.exists()
