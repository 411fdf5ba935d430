"""Fitting either world model: the fit function of each model kind, and the loop's refit on its store."""

from __future__ import annotations

from collections.abc import Sequence

from envs.store import TrajectoryStore
from envs.trajectory import Trajectory
from world_model.lightning_module import fit_world_model, refit_on_store
from world_model.lm.fit import fit_lm_world_model
from world_model.lm.model import LMWorldModel
from world_model.model import WorldModel

FITS = {WorldModel: fit_world_model, LMWorldModel: fit_lm_world_model}
"""Model class -> its Lightning fit (same keywords, same returned keys)."""


def fit_any(train: Sequence[Trajectory], val: Sequence[Trajectory], model, **options) -> dict[str, float]:
    """Fit ``model`` (either kind) in place with ``fit_world_model``'s keywords."""
    if type(model) not in FITS:
        raise TypeError(f"no fit known for {type(model).__name__}; known: {sorted(c.__name__ for c in FITS)}")
    return FITS[type(model)](train, val, model, **options)


def refit_any_on_store(model, store: TrajectoryStore, **options) -> dict[str, float]:
    """``refit_on_store`` (real episodes only, newest ``last``) for either kind of model."""
    return refit_on_store(model, store, fit=fit_any, **options)
