"""What a saved model was fitted on: ``fitted_on.json`` beside its safetensors weights.

A saved world model or critic folder (a training run's ``models/world_model`` and ``models/critic``,
``experiments.fit_world_model``'s ``models/world_model``) holds, besides the weights, the record a
later run needs to start from it honestly (``world_model.init`` / ``critic.init``,
``experiments/init_models.py``):

- ``env`` and ``env_options``: the env and every one of its options, the env's defaults filled in, so
  ``{}`` and ``{"n": 16}`` are one setting; any other option value is another env;
- ``tokenizer_sha256``: a hash of the vocabularies the model reads (``vocabulary_sha256``), so a model
  over other words is refused even when its weight shapes happen to fit;
- ``real_steps`` and ``expert_steps``: the env steps its weights were fitted on, expert demonstrations
  apart from every other agent's steps (the RL policy's, a random agent's), summed over ``sources``;
- ``sources``: who collected them, one entry per fit in its history (a run that started from another
  model adds its own entry after the imported ones), each with its own two counts.

Plain JSON: nothing here is unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.registry import env_class
from envs.strict_json import strict_dumps

FITTED_ON = "fitted_on.json"
FORMAT = 1  # raise when the record's fields change meaning


@dataclass(frozen=True)
class Source:
    """One fit's data: who collected it and its env steps (expert demonstrations apart)."""

    collected_by: str
    real_steps: int
    expert_steps: int


@dataclass(frozen=True)
class FittedOn:
    env: str
    env_options: dict[str, Any]
    tokenizer_sha256: str
    sources: list[Source] = field(default_factory=list)

    @property
    def real_steps(self) -> int:
        return sum(s.real_steps for s in self.sources)

    @property
    def expert_steps(self) -> int:
        return sum(s.expert_steps for s in self.sources)

    def with_source(self, source: Source) -> FittedOn:
        """The same model fitted once more, on ``source``'s data."""
        return dataclasses.replace(self, sources=[*self.sources, source])

    def as_record(self) -> dict[str, Any]:
        return {"format": FORMAT, "env": self.env, "env_options": self.env_options,
                "tokenizer_sha256": self.tokenizer_sha256, "real_steps": self.real_steps,
                "expert_steps": self.expert_steps, "sources": [dataclasses.asdict(s) for s in self.sources]}


def env_options(env_name: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every option of ``env_name`` with ``env_kwargs`` over the env's defaults, as JSON values (tuples
    become lists), so two spellings of one setting compare equal."""
    parameters = inspect.signature(env_class(env_name)).parameters.values()
    defaults = {p.name: p.default for p in parameters
                if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is not p.empty}
    return json.loads(json.dumps({**defaults, **dict(env_kwargs)}, sort_keys=True, default=str))


def vocabulary_sha256(*tokenizers: Any) -> str:
    """sha256 of each tokenizer's vocabulary (``get_vocab()``: word -> id, sorted), in order."""
    digest = hashlib.sha256()
    for tokenizer in tokenizers:
        digest.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    return digest.hexdigest()


def write_fitted_on(folder: str | Path, record: FittedOn) -> Path:
    path = Path(folder) / FITTED_ON
    path.write_text(strict_dumps(record.as_record(), indent=2) + "\n", encoding="utf-8")
    return path


def read_fitted_on(folder: str | Path, key: str) -> FittedOn:
    """The record in ``folder``; a ``ValueError`` of one line naming ``key`` when there is none or it
    cannot be read."""
    path = Path(folder) / FITTED_ON
    if not path.is_file():
        raise ValueError(f"{key}: {folder} has no {FITTED_ON} (what the model was fitted on; models saved "
                         "before it was recorded cannot be started from)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        sources = [Source(str(s["collected_by"]), _count(s["real_steps"]), _count(s["expert_steps"]))
                   for s in data["sources"]]
        record = FittedOn(str(data["env"]), dict(data["env_options"]), str(data["tokenizer_sha256"]), sources)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{key}: {path} cannot be read ({type(error).__name__}: {error})") from error
    return record


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a step count must be an int >= 0, got {value!r}")
    return value
