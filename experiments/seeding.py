"""Seeds derived from the run's one seed, so every stream (train rollouts, evaluation, init) differs."""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *tags: object) -> int:
    """A 31-bit seed determined by ``seed`` and ``tags`` alone (stable across processes and runs)."""
    text = ":".join([str(seed), *map(str, tags)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") & 0x7FFFFFFF
