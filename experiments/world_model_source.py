"""``world_model.lm.pretrained`` accepts what ``policy.pretrained`` does: a local Hugging Face folder, a
``.gguf`` file or a packaged model's name (``smollm2``). The world model reads folders only (it may not
import the policy layer), so the value is turned into a folder here, before the model is built: a GGUF
file through the policy's de-quantised cache (once per file, then seconds)."""

from __future__ import annotations

import os
from dataclasses import replace

from policy.model_source import cached_folder, resolve_pretrained
from world_model.config import WorldModelOptions

KEY = "world_model.lm.pretrained"


def resolve_lm_pretrained(options: WorldModelOptions, cache_dir: str | os.PathLike | None = None
                          ) -> WorldModelOptions:
    """``options`` with ``lm.pretrained`` a local folder (a GGUF's de-quantised copy in ``cache_dir``,
    the default cache when None); unchanged without one. A source that names nothing loadable fails in
    one line naming ``world_model.lm.pretrained``."""
    if options.name != "lm" or options.lm.pretrained is None:
        return options
    return replace(options, lm=replace(options.lm, pretrained=lm_pretrained_folder(options.lm.pretrained, cache_dir)))


def lm_pretrained_folder(value: str, cache_dir: str | os.PathLike | None = None) -> str:
    """The local folder that ``world_model.lm.pretrained=value`` stands for."""
    source = resolve_pretrained(value, KEY)
    return str(source if source.is_dir() else cached_folder(source, cache_dir, KEY))
