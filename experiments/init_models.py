"""A training run started from saved models: ``world_model.init=DIR`` and ``critic.init=DIR``.

``DIR`` is a saved model folder (one holding ``fitted_on.json`` and ``model.safetensors``), or a
folder that saved one: a training run's (``models/world_model``, ``models/critic``; an older run's
``world_model/``, ``critic/``, ``experiments/run_layout.py``) or ``experiments.fit_world_model``'s.
The run builds its model as configured, then loads the saved weights into it and goes on refitting
as configured; the weights must fit the run's model settings exactly.

Checked at start, each refusal one line naming the key: at validation (``check_init_keys``) the
folder, its record (``experiments/fitted_on.py``) and weights file, the env and its options, and that
the run has the model at all; when the model is built (``start_from_saved``) its tokenizer's hash and
the weights' names and shapes. Weights are read with safetensors only: nothing is unpickled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_model

from critic import TokenCritic
from experiments.fitted_on import FITTED_ON, FittedOn, Source, env_options, read_fitted_on, vocabulary_sha256
from experiments.run_layout import saved_model_dir

WEIGHTS = "model.safetensors"  # every saved world model and critic names its weights so
INIT_KEYS = {"world_model": "world_model.init", "critic": "critic.init"}


@dataclass(frozen=True)
class Imported:
    """A saved model a run started from: where, what it was fitted on, and the weights' hash as loaded."""

    folder: Path
    fitted_on: FittedOn
    weights_sha256: str

    def as_record(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "weights_sha256": self.weights_sha256,
                "fitted_on": self.fitted_on.as_record()}


def builds_world_model(run: Any) -> bool:
    """Whether the run has a world model: it imagines (ratio above 0) or its algorithm needs one."""
    return run.imagination.enabled or run.algo.name == "counterfactual_gigpo"


def saved_folder(path: str | Path, name: str) -> Path:
    """The saved model ``name`` that ``path`` names (the folder itself, or the one a run saved); a
    ``ValueError`` of one line naming the key when there is none, or it lacks its record or weights."""
    key, folder = INIT_KEYS[name], Path(path)
    if not folder.is_dir():
        raise ValueError(f"{key}: {folder} is not a folder")
    if not ((folder / FITTED_ON).is_file() or (folder / WEIGHTS).is_file()):
        folder = saved_model_dir(folder, name)
        if not folder.is_dir():
            raise ValueError(f"{key}: {path} is neither a saved {name} folder nor a folder that saved one "
                             f"({folder} does not exist)")
    if not (folder / WEIGHTS).is_file():
        raise ValueError(f"{key}: {folder} has no {WEIGHTS} (only safetensors weights are loaded)")
    return folder


def check_env(fitted_on: FittedOn, key: str, env_name: str, env_kwargs: Mapping[str, Any]) -> None:
    """Refuse a model saved for another env or other env options, in one line naming ``key``."""
    if fitted_on.env != env_name:
        raise ValueError(f"{key}: saved for env {fitted_on.env}, this run is {env_name}")
    ours, saved = env_options(env_name, dict(env_kwargs)), fitted_on.env_options
    differ = sorted(k for k in set(ours) | set(saved) if ours.get(k) != saved.get(k))
    if differ:
        raise ValueError(f"{key}: saved for {env_name} with " + ", ".join(f"{k}={saved.get(k)!r}" for k in differ)
                         + ", this run has " + ", ".join(f"{k}={ours.get(k)!r}" for k in differ))


def check_saved(path: str | Path, name: str, env_name: str, env_kwargs: Mapping[str, Any]) -> None:
    """The folder, record, weights file and env of the saved model ``name`` that ``path`` names."""
    key = INIT_KEYS[name]
    check_env(read_fitted_on(saved_folder(path, name), key), key, env_name, env_kwargs)


def check_init_keys(run: Any) -> None:
    """The validation of ``world_model.init`` and ``critic.init`` that needs no model built (a ``Resolved``),
    and ``imagination.open_at_start``, which needs ``world_model.init``."""
    if run.world_model.init is not None:
        if not builds_world_model(run):
            raise ValueError(f"world_model.init: this run builds no world model (imagination.ratio is 0 and "
                             f"algo={run.algo.name}); drop it or imagine (imagination=dyna)")
        check_saved(run.world_model.init, "world_model", run.env.name, run.env.kwargs)
    if run.imagination.open_at_start and run.world_model.init is None:  # a model fitted on nothing imagines noise
        raise ValueError("imagination.open_at_start=true needs world_model.init=DIR (a saved world model): "
                         "without one the first iteration would imagine in a model fitted on nothing")
    if run.critic.init is not None:
        if not run.algo.uses_critic:
            raise ValueError(f"critic.init: algo={run.algo.name} has no critic; drop it or use a critic-based "
                             "algorithm (ppo_turn, ppo_token, sppo)")
        check_saved(run.critic.init, "critic", run.env.name, run.env.kwargs)


def model_tokenizers(model: torch.nn.Module, policy_tokenizer: Any = None) -> list[Any]:
    """The tokenizers whose vocabularies ``model`` reads: the policy's for the token critic; else its
    own word tokenizer, and an LM world model's LM tokenizer when it has one."""
    if isinstance(model, TokenCritic):
        return [policy_tokenizer]
    lm_tokenizer = getattr(model, "lm_tokenizer", None)
    return [model.tokenizer.tokenizer, *([] if lm_tokenizer is None else [lm_tokenizer])]


def weights_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over the tensors of ``state`` by sorted name: name, dtype, shape and bytes of each."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def start_from_saved(model: torch.nn.Module, path: str | Path, name: str, env_name: str,
                     env_kwargs: Mapping[str, Any], tokenizers: list[Any]) -> Imported:
    """Load the saved model ``name`` of ``path`` into the run's freshly built ``model`` (whose
    vocabularies are ``tokenizers``), after checking its env and tokenizer; one-line refusals naming the key."""
    key = INIT_KEYS[name]
    folder = saved_folder(path, name)
    fitted_on = read_fitted_on(folder, key)
    check_env(fitted_on, key, env_name, env_kwargs)
    ours = vocabulary_sha256(*tokenizers)
    if fitted_on.tokenizer_sha256 != ours:
        raise ValueError(f"{key}: saved for another tokenizer (vocabulary sha256 {fitted_on.tokenizer_sha256[:12]}, "
                         f"this run's {ours[:12]})")
    try:
        load_model(model, folder / WEIGHTS, strict=True)  # names and shapes must match the run's model
    except Exception as error:  # safetensors and torch raise several types for a mismatch or a bad file
        text = " ".join(str(error).split())
        raise ValueError(f"{key}: {folder / WEIGHTS} does not fit this run's {name} settings "
                         f"({text[:300]})") from error
    with safe_open(folder / WEIGHTS, framework="pt") as saved:  # tied weights are saved under one name
        names = set(saved.keys())
    state = model.state_dict()  # the run's model as loaded: its hash is the saved file's
    return Imported(folder, fitted_on, weights_sha256({name: state[name] for name in names}))


def fitted_on_record(imported: Imported | None, env_name: str, env_kwargs: Mapping[str, Any],
                     tokenizers: list[Any], own: Source) -> FittedOn:
    """What a model this run saves was fitted on: the saved model's sources it started from, then its own."""
    sources = [] if imported is None else imported.fitted_on.sources
    return FittedOn(env_name, env_options(env_name, dict(env_kwargs)), vocabulary_sha256(*tokenizers),
                    [*sources, own])
