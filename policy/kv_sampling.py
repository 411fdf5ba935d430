"""The policy's KV-cache sampling loop: the one in ``world_model.kv_sampling``, shared with the LM world model."""

import inspect  # noqa: F401  (tests patch ``inspect.signature`` through this module)

from world_model.kv_sampling import Decoded, cache_keyword, can_drop_rows, sample_with_cache

__all__ = ["Decoded", "cache_keyword", "can_drop_rows", "sample_with_cache"]
