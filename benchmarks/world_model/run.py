"""The learning curves: per env, a fresh ``WorldModel`` fitted per training size, scored on held-out data."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tqdm import tqdm

from benchmarks.world_model.data import ENVS, KINDS_WITH_SHIFT, collect_pool, prefix
from benchmarks.world_model.evaluate import evaluate
from benchmarks.world_model.exact import exact_distributions
from benchmarks.world_model.models import MODELS, build, fit
from benchmarks.world_model_cost import imagine_step_seconds
from world_model.lm import LMOptions

DEFAULT_ENVS = ("hidden_number", "hidden_number_noisy", "frozen_lake", "frozen_lake_slippery", "sokoban", "minishop")
DEFAULT_SIZES = (300, 1000, 3000, 10000)
DEFAULT_STEPS = (300, 600, 1200, 2000)
IMAGINE_ROWS = 32
"""States per batched imagined step in the cost line."""


@dataclass(frozen=True)
class Row:
    """One fit, scored on held-out transitions."""

    env: str
    transitions: int
    """Real training transitions actually used (whole trajectories, so at least the size asked)."""
    steps: int
    fit_s: float
    """Wall seconds of the ``fit_world_model`` call: the steps plus its loss pass over the training set."""
    eval_transitions: int
    metrics: dict[str, float]
    fit_cpu_s: float = float("nan")
    """This process's CPU seconds in the fit: on a shared machine a steadier cost than ``fit_s``."""
    shift: bool = False
    """Trained on random-agent episodes only and scored on expert episodes (distribution shift)."""
    model: str = "latent"
    """Which world model (``models.MODELS``)."""

    @property
    def fit_s_per_step(self) -> float:
        return self.fit_s / self.steps if self.steps else float("nan")

    def get(self, key: str) -> float:
        return self.metrics.get(key, float("nan"))


@dataclass
class Result:
    rows: list[Row] = field(default_factory=list)
    calibration: dict[str, tuple[list[float], list[bool]]] = field(default_factory=dict)
    """Per env with exact distributions: (probability, happened) pairs of the largest size's fit."""
    cost: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per env (and model, as in ``calibration``): CPU seconds per fit step of the largest size's
    fit, and CPU seconds of one batched imagined step of its model over ``IMAGINE_ROWS`` held-out
    states."""


def _fit(env: str, train, n_steps: int, *, batch_size: int, lr: float, latent_size: int, members: int,
         seed: int, model: str = "latent", lm_options: LMOptions | None = None, bootstrap: bool = False):
    built = build(model, env, latent_size=latent_size, members=members, seed=seed, lm_options=lm_options,
                  bootstrap=bootstrap)
    fit_s, cpu_s = fit(built, train, n_steps, batch_size=batch_size, lr=lr, seed=seed)
    return built, fit_s, cpu_s


def check_arguments(envs: Sequence[str], sizes: Sequence[int], steps: Sequence[int], eval_transitions: int) -> None:
    unknown = [e for e in envs if e not in ENVS]
    if unknown:
        raise ValueError(f"unknown envs {unknown}; choose from {sorted(ENVS)}")
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"sizes must be integers >= 1, got {list(sizes)}")
    if len(steps) != len(sizes) or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in steps):
        raise ValueError(f"steps must be one integer >= 1 per size, got {list(steps)} for {list(sizes)}")
    if eval_transitions < 1:
        raise ValueError(f"eval_transitions must be >= 1, got {eval_transitions}")


def run(
    envs: Sequence[str] = DEFAULT_ENVS,
    sizes: Sequence[int] = DEFAULT_SIZES,
    steps: Sequence[int] = DEFAULT_STEPS,
    *,
    eval_transitions: int = 500,
    shift: tuple[int, int] | None = (1000, 600),
    batch_size: int = 32,
    lr: float = 1e-3,
    latent_size: int = 128,
    members: int = 5,
    bootstrap: bool = False,
    seed: int = 0,
    log: Callable[[Row], None] = lambda row: None,
    progress: bool = False,
    models: Sequence[str] = ("latent",),
    lm_options: LMOptions | None = None,
) -> Result:
    """Fit and score every (env, size); ``shift`` = (transitions, steps) of the extra random-only fit
    per deterministic or shop env, scored on expert episodes (None: no such fit). ``log`` gets each
    row as soon as it is scored. ``models``: which world models to fit and score on the same data
    (``latent``, ``lm``), each row tagged with its model; ``lm_options`` shape the LM one. ``bootstrap``
    trains each member (of either model) on its own resample of every batch."""
    check_arguments(envs, sizes, steps, eval_transitions)
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise ValueError(f"models must be some of {MODELS}, got {list(models)}")
    options = dict(batch_size=batch_size, lr=lr, latent_size=latent_size, members=members, seed=seed,
                   lm_options=lm_options, bootstrap=bootstrap)
    result = Result()
    bar = tqdm(total=len(envs) * len(sizes) * len(models), desc="fits", unit="fit", disable=not progress, leave=False)
    for env in envs:
        spec = ENVS[env]
        bar.set_postfix_str(f"{env}: collecting")
        pool = collect_pool(env, "train", max(sizes), seed=seed)
        # Expert first: a tiny held-out set (a smoke run's) then gets the short episodes.
        held_out = collect_pool(env, "eval", eval_transitions, seed=seed, policies=("expert", "random"))
        n_eval = sum(t.num_turns for t in held_out)
        exact = None
        if spec.kind in ("bayes", "slippery"):
            exact = exact_distributions(spec.name, spec.kwargs, held_out)
        for kind in models:
            for i, (size, n_steps) in enumerate(zip(sizes, steps, strict=True)):
                bar.set_postfix_str(f"{env}: {kind}, {size} transitions, {n_steps} steps")
                train = prefix(pool, size)
                model, fit_s, cpu_s = _fit(env, train, n_steps, model=kind, **options)
                scores = evaluate(model, spec, held_out, exact)
                row = Row(env, sum(t.num_turns for t in train), n_steps, fit_s, n_eval, scores.metrics, cpu_s,
                          model=kind)
                result.rows.append(row)
                name = env if kind == "latent" else f"{env} ({kind})"
                if i == len(sizes) - 1 and exact is not None:
                    result.calibration[name] = scores.calibration
                log(row)
                bar.update()
                if i == len(sizes) - 1:
                    result.cost[name] = (cpu_s / n_steps, imagine_step_seconds(model, held_out, IMAGINE_ROWS, 2))
        if shift is not None and spec.kind in KINDS_WITH_SHIFT:
            bar.set_postfix_str(f"{env}: random-only fit, {shift[0]} transitions")
            train = collect_pool(env, "train", shift[0], seed=seed, policies=("random",))
            expert = collect_pool(env, "eval", eval_transitions, seed=seed, policies=("expert",))
            for kind in models:
                model, fit_s, cpu_s = _fit(env, train, shift[1], model=kind, **options)
                scores = evaluate(model, spec, expert)
                row = Row(env, sum(t.num_turns for t in train), shift[1], fit_s,
                          sum(t.num_turns for t in expert), scores.metrics, cpu_s, shift=True, model=kind)
                result.rows.append(row)
                log(row)
    bar.close()
    return result
