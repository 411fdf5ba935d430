"""Config keys renamed when the ``world_model`` and ``critic`` groups got nested sections, and keys
added since (``world_model.name`` and its ``lm`` section, with the values an older run meant).

A checkpoint records its run's config (``experiments.resume.config_record``); one written before the
rename holds the flat keys. ``upgrade_record`` moves them into their sections (and fills keys added
to a section since, such as ``world_model.decoder.copy_observation``) so such a run still
resumes, and is compared key by key with today's config. ``docs/configuration.md`` lists the same
renames for people.
"""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any

from policy.config import LoRAConfig
from policy.render import SYSTEM_PROMPT
from world_model.lm.config import LMOptions

RENAMED: dict[str, dict[str, tuple[str, str]]] = {
    "world_model": {
        "embed_size": ("encoder", "embed_size"),
        "feature_size": ("encoder", "feature_size"),
        "conv_layers": ("encoder", "conv_layers"),
        "model_size": ("decoder", "model_size"),
        "num_layers": ("decoder", "num_layers"),
        "num_heads": ("decoder", "num_heads"),
        "latent_slots": ("decoder", "latent_slots"),
    },
    "critic": {
        "hidden_size": ("token", "hidden_size"),
        "num_layers": ("token", "num_layers"),
        "num_heads": ("token", "num_heads"),
        "intermediate_size": ("token", "intermediate_size"),
        "latent_size": ("latent", "latent_size"),
        "latent_embed_size": ("latent", "embed_size"),
        "latent_feature_size": ("latent", "feature_size"),
        "latent_conv_layers": ("latent", "conv_layers"),
        "latent_head_hidden_size": ("latent", "head_hidden_size"),
        "latent_max_observation_words": ("latent", "max_observation_words"),
        "latent_max_action_words": ("latent", "max_action_words"),
    },
}
"""group -> old key -> (section, new key)."""


def added_keys() -> dict[str, dict[str, Any]]:
    """group -> keys added since, with the value that reproduces what a run recorded without them did
    (a record without ``world_model.name`` was written when the latent model was the only one; one
    without ``world_model.disagreement`` pooled the disagreement by its mean, so resuming it under
    today's default is reported as a difference: pass ``world_model.disagreement=mean``; one without
    ``world_model.ordinal_numbers`` had plain word embeddings; one without ``policy.lora``, ``policy.scored_logits``
    and ``policy.model_cache_dir`` trained every weight with full-vocabulary logits; one without
    ``policy.system_prompt`` and ``policy.few_shot`` prompted with the fixed system message, no few-shot turns;
    one without ``world_model.init`` or ``critic.init`` started from fresh weights)."""
    return {"world_model": {"name": "latent", "lm": asdict(LMOptions()), "bootstrap": False, "disagreement": "mean",
                            "ordinal_numbers": False, "init": None},
            "critic": {"init": None},
            "policy": {"lora": asdict(LoRAConfig()), "scored_logits": False, "model_cache_dir": None,
                       "system_prompt": SYSTEM_PROMPT, "few_shot": 0}}


def added_section_keys() -> dict[str, dict[str, dict[str, Any]]]:
    """group -> section -> keys added to that section since, with the value a run recorded without
    them ran with (``world_model.decoder.copy_observation`` and ``aligned_copy``: the decoder read no
    observation)."""
    return {"world_model": {"decoder": {"copy_observation": False, "aligned_copy": False}}}


def upgrade_record(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of a run's config record with every old flat key moved into its section."""
    record = copy.deepcopy(record)
    for group, moves in RENAMED.items():
        values = record.get(group)
        if not isinstance(values, dict):
            continue
        for old, (section, new) in moves.items():
            if old in values:  # no new-format key shares an old key's name, so this is idempotent
                values.setdefault(section, {})[new] = values.pop(old)
    for group, added in added_keys().items():
        values = record.get(group)
        if isinstance(values, dict):
            for key, value in added.items():
                values.setdefault(key, copy.deepcopy(value))
    for group, sections in added_section_keys().items():
        for section, added in sections.items():
            values = record.get(group, {}).get(section) if isinstance(record.get(group), dict) else None
            if isinstance(values, dict):
                for key, value in added.items():
                    values.setdefault(key, copy.deepcopy(value))
    return record
