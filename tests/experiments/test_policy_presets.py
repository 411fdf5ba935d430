"""The policy presets of ``conf/policy/`` compose and validate into the PolicyConfig they promise."""

from __future__ import annotations

import pytest

from experiments.config import validate
from tests.experiments.in_process import compose_config


def test_smollm2_is_the_packaged_gguf_with_lora_and_scored_logits():
    policy = validate(compose_config(["policy=smollm2"])).policy
    assert policy.pretrained == "smollm2"
    assert policy.lora.rank == 8 and policy.lora.targets == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert policy.scored_logits is True and policy.model_cache_dir is None


def test_the_tiny_policy_keeps_every_weight_trainable_and_the_full_logits():
    policy = validate(compose_config([])).policy
    assert policy.pretrained is None and policy.lora.rank == 0 and policy.scored_logits is False


def test_lora_on_the_tiny_model_is_refused_naming_the_key():
    with pytest.raises(Exception, match=r"lora\.rank > 0 needs a pretrained model"):
        validate(compose_config(["policy.lora.rank=4"]))


def test_a_run_recorded_before_the_lora_keys_resumes_as_it_ran():
    from experiments.config_renames import upgrade_record
    from experiments.resume import config_differences, config_record

    current = config_record(validate(compose_config(["policy=pretrained", "policy.pretrained=/models/x",
                                                     "policy.scored_logits=false"])))
    old = {group: dict(values) if isinstance(values, dict) else values for group, values in current.items()}
    for key in ("lora", "scored_logits", "model_cache_dir"):
        del old["policy"][key]
    assert config_differences(upgrade_record(old), current) == []
