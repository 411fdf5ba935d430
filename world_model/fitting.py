"""Fitting either world model: the fit of each model kind (``world_model.kinds``), and the loop's refit on its store."""

from __future__ import annotations

from collections.abc import Sequence

from envs.store import TrajectoryStore
from envs.trajectory import Trajectory
from world_model.kinds import kind_of
from world_model.lightning_module import refit_on_store


def fit_any(train: Sequence[Trajectory], val: Sequence[Trajectory], model, **options) -> dict[str, float]:
    """Fit ``model`` (either kind) in place with ``fit_world_model``'s keywords."""
    return kind_of(model).fit(train, val, model, **options)


def refit_any_on_store(model, store: TrajectoryStore, **options) -> dict[str, float]:
    """``refit_on_store`` (real episodes only, newest ``last``) for either kind of model."""
    return refit_on_store(model, store, fit=fit_any, **options)
