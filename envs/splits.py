"""Held-out evaluation: which env seeds train and which evaluate, decided here and nowhere else.

Two rules keep evaluation honest:

1. Seeds: training draws env seeds from ``TRAIN_SEEDS``, evaluation from ``EVAL_SEEDS``; the
   ranges are disjoint, so no seed serves both.
2. Tasks: where an env draws a task per episode (a random map, a room, a catalogue with an
   instruction), a task is an eval task iff the sha256 of its ``task_key()`` falls in the lowest
   ``eval_fraction`` of hash values. A candidate seed is kept only if its task is in the wanted
   split, so an eval task never shows up in training even when two different seeds draw the same
   task, as small maps do. The hash is stable across processes and machines (Python's ``hash``
   is salted per process, so it would not be).

Envs whose ``task_key()`` is None (no observable task, e.g. hidden_number) rely on rule 1 alone.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from envs.base import TaskEnv
from envs.registry import make

Split = Literal["train", "eval"]
SPLITS: tuple[Split, ...] = ("train", "eval")
EVAL_FRACTION = 0.2
TRAIN_SEEDS = range(0, 2**31)
EVAL_SEEDS = range(2**31, 2**32)
_SEEDS = {"train": TRAIN_SEEDS, "eval": EVAL_SEEDS}
_CACHE_SIZE = 512  # requests remembered; evaluation asks for the same seeds every time
_cache: dict[tuple, tuple[int, ...]] = {}


def is_eval_task(task_key: str, eval_fraction: float = EVAL_FRACTION) -> bool:
    """Whether the task with this key is held out for evaluation: sha256 of the key, read as a
    fraction of its range, falls below ``eval_fraction``."""
    _check_fraction(eval_fraction)
    digest = hashlib.sha256(task_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < eval_fraction * 2**64


def task_split(env: TaskEnv, *, eval_fraction: float = EVAL_FRACTION) -> Split:
    """The split the task of ``env``'s current episode (after ``reset``) belongs to.

    ValueError for an env with no observable task (``task_key()`` None): its split is its seed's range.
    """
    key = env.task_key()
    if key is None:
        raise ValueError(
            f"{env.name} has no observable task (task_key() is None): its split is set by the seed range alone"
        )
    return "eval" if is_eval_task(key, eval_fraction) else "train"


def split_seeds(
    env_name: str,
    env_kwargs: Mapping[str, Any] | None,
    split: Split,
    *,
    seed: int,
    count: int,
    eval_fraction: float = EVAL_FRACTION,
) -> list[int]:
    """``count`` distinct env seeds of ``split`` for env ``env_name`` built with ``env_kwargs``.

    Deterministic in its arguments; a different ``seed`` gives different candidates. Candidates
    come from the split's seed range and are kept only when their task is in ``split`` (see the
    module docstring). Results are cached, so asking for the same seeds again is free. ValueError
    when the env's tasks are too few to fill the split (e.g. a tiny map whose every layout hashes
    to one side).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an integer >= 0, got {count!r}")
    _check_fraction(eval_fraction)
    env_kwargs = dict(env_kwargs or {})
    request = (env_name, _hashable(env_kwargs), split, seed, count, eval_fraction)
    if request not in _cache:
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))  # the oldest request
        _cache[request] = _draw(env_name, env_kwargs, split, seed, count, eval_fraction)
    return list(_cache[request])


def _draw(
    env_name: str, env_kwargs: dict[str, Any], split: Split, seed: int, count: int, eval_fraction: float
) -> tuple[int, ...]:
    env = make(env_name, **env_kwargs)
    share = eval_fraction if split == "eval" else 1.0 - eval_fraction
    budget = 1000 + 20 * math.ceil(count / share)  # about 20x the expected number of tries
    kept: list[int] = []
    seen: set[int] = set()
    for tried, candidate in enumerate(_candidates(split, seed)):
        if len(kept) == count:
            break
        if tried == budget:
            raise ValueError(
                f"found only {len(kept)} of {count} {split} seeds for {env_name} {env_kwargs} in {budget} "
                f"candidates: its tasks are too few to split with eval_fraction={eval_fraction}"
            )
        if candidate in seen:
            continue
        seen.add(candidate)
        env.reset(candidate)
        key = env.task_key()
        if key is None or is_eval_task(key, eval_fraction) == (split == "eval"):
            kept.append(candidate)
    return tuple(kept)


def _candidates(split: Split, seed: int) -> Iterator[int]:
    """Pseudo-random seeds in the split's range, a stream determined by ``(split, seed)``."""
    seeds = _SEEDS[split]
    for index in itertools.count():
        digest = hashlib.sha256(f"{split}:{seed}:{index}".encode()).digest()
        yield seeds.start + int.from_bytes(digest[:8], "big") % len(seeds)


def _hashable(value: Any) -> Any:
    """A hashable stand-in for env kwargs (lists and YAML ListConfigs become tuples)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(_hashable(v) for v in value)
    return value


def _check_fraction(eval_fraction: float) -> None:
    if isinstance(eval_fraction, bool) or not isinstance(eval_fraction, (int, float)) or not 0 < eval_fraction < 1:
        raise ValueError(f"eval_fraction must be strictly between 0 and 1, got {eval_fraction!r}")
