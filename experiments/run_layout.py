"""Where a run folder keeps its saved models: ``<run>/models/policy``, ``models/critic``, ``models/world_model``.

Why under ``models/``: Python started inside a run folder (``cd <run> && python``) looks in the current
folder first, and a folder named like one of Reverie's packages there (``critic/``, no
``__init__.py``) is taken as a namespace package before an editable install's finder is asked, so
``from critic import LatentCritic`` fails. ``models/`` and ``checkpoints/`` share no package's name.

Runs saved before kept these folders at the run's root: ``saved_model_dir`` finds either layout, and
every reader of a run folder goes through it.
"""

from __future__ import annotations

from pathlib import Path

MODELS = "models"
SAVED_MODELS = ("policy", "critic", "world_model")  # the folders a run may save, by name


def model_dir(run_dir: str | Path, name: str) -> Path:
    """Where a run saves the model ``name`` (one of ``SAVED_MODELS``)."""
    if name not in SAVED_MODELS:
        raise ValueError(f"unknown saved model {name!r}; one of {', '.join(SAVED_MODELS)}")
    return Path(run_dir) / MODELS / name


def saved_model_dir(run_dir: str | Path, name: str) -> Path:
    """The saved model ``name`` of ``run_dir``: ``models/<name>`` when it is there, else ``<name>`` at
    the root when an older run saved it there, else ``models/<name>`` (for the caller's "missing" message)."""
    new = model_dir(run_dir, name)
    old = Path(run_dir) / name
    return old if not new.is_dir() and old.is_dir() else new
