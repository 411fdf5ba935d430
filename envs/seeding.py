"""Seeds derived from the run's one seed, so every stream (train rollouts, evaluation, init, imagined
steps) differs, and the same seed gives the same streams in any process.

Two derivations exist because runs recorded with each must keep their numbers: ``derive_seed`` (31 bits,
the tags joined as text) seeds the run's streams; ``derive_seed_63bit`` (63 bits, the ``repr`` of the
parts) seeds the world model's imagined steps and the step groups. They give different seeds for the
same parts; use ``derive_seed`` for anything new.
"""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *tags: object) -> int:
    """A 31-bit seed determined by ``seed`` and ``tags`` alone (stable across processes and runs)."""
    text = ":".join([str(seed), *map(str, tags)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") & 0x7FFFFFFF


def derive_seed_63bit(*parts: object) -> int:
    """A 63-bit seed from ``parts`` (their ``repr``), equal across runs and platforms. The stream of the
    dream env and the step groups; not interchangeable with ``derive_seed``."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def seed_global_rngs(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global RNGs (CUDA too). The loop draws from streams of its
    own, so this is a safety net: anything a library draws from a global RNG is seeded as well, and
    two runs in one process (or in two) start from the same global state."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
