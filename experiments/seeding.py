"""Seeds derived from the run's one seed, so every stream (train rollouts, evaluation, init) differs."""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *tags: object) -> int:
    """A 31-bit seed determined by ``seed`` and ``tags`` alone (stable across processes and runs)."""
    text = ":".join([str(seed), *map(str, tags)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") & 0x7FFFFFFF


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
