"""Every ``world_model.*`` key, for every kind: another value either changes what is built (weights,
structure, device, what it says about a turn, or how it fits) or is refused at start naming the key.

The keys are the leaves of ``WorldModelOptions``' dataclass fields, walked here; a new key without a
rule for its other value fails the walk until it gets one.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from envs import RandomAgent, collect
from envs.registry import make
from experiments.world_model_builder import build_world_model
from tests.world_model.lm.test_lm_pretrained import save_local_model
from world_model.config import KIND_KEYS, KIND_NAMES, WorldModelOptions
from world_model.kinds import kind_of
from world_model.lm.config import TINY_SHAPE, LMOptions

ENV = "hidden_number"
BASES = {  # tiny models of each kind, every other key at its default
    "latent": {"name": "latent", "num_members": 2, "head_hidden": 8, "latent_size": 16,
               "encoder": {"embed_size": 8, "feature_size": 16, "conv_layers": 1},
               "decoder": {"model_size": 8, "num_layers": 1, "num_heads": 2, "latent_slots": 2}},
    "lm": {"name": "lm", "num_members": 2, "head_hidden": 8,
           "lm": {"hidden_size": 16, "intermediate_size": 32, "num_layers": 1, "num_heads": 2, "history_turns": 1}},
}
PRETRAINED = "<a local pretrained folder>"  # replaced by the fixture's folder
OTHER_VALUES = {"disagreement": "max", "lm.dtype": "bfloat16", "lm.device": "cuda", "lm.pretrained": PRETRAINED,
                "max_observation_words": 2, "max_action_words": 1}
"""Keys whose other value the generic rule (flip a bool, double a number, 1 for 0) cannot give."""
TINY_DEFAULTS = {f"lm.{f.name}": f.default for f in dataclasses.fields(LMOptions) if f.name in TINY_SHAPE}
NEEDS = {"decoder.aligned_copy": {"decoder.copy_observation": True}, "lm.pretrained": TINY_DEFAULTS,
         "lm.lora_rank": {**TINY_DEFAULTS, "lm.pretrained": PRETRAINED},
         "lm.lora_alpha": {**TINY_DEFAULTS, "lm.pretrained": PRETRAINED, "lm.lora_rank": 1}}
"""Keys that only mean something with others set (a pretrained checkpoint has its own shape): those
are set on both sides of the comparison."""


def leaves(cls: type, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted key, field default) of every leaf of dataclass ``cls``."""
    out = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            out += leaves(type(default), f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, default))
    return out


# The name picks the kind; init is where a run or fit starts from, not what is built: loading it is
# tested in tests/experiments/test_init_models.py.
KEYS = [key for key, _ in leaves(WorldModelOptions) if key not in ("name", "init")]


def lookup(options: dict, key: str, default):
    for part in key.split(".")[:-1]:
        options = options.get(part, {})
    return options.get(key.split(".")[-1], default)


def with_key(options: dict, key: str, value) -> dict:
    out = copy.deepcopy(options)
    *sections, leaf = key.split(".")
    inner = out
    for part in sections:
        inner = inner.setdefault(part, {})
    inner[leaf] = value
    return out


def other_value(key: str, current, folder: str):
    if key in OTHER_VALUES:
        value = OTHER_VALUES[key]
        return folder if value == PRETRAINED else value
    if isinstance(current, bool):
        return not current
    if isinstance(current, (int, float)):
        return 2 * current if current else 1
    raise AssertionError(f"no other value known for world_model.{key}: add one to OTHER_VALUES")


def pair(kind: str, key: str, folder: str) -> tuple[dict, dict]:
    """The kind's tiny options with the key's prerequisites, and the same with the key changed."""
    base = BASES[kind]
    for need, value in NEEDS.get(key, {}).items():
        base = with_key(base, need, folder if value == PRETRAINED else value)
    default = dict(leaves(WorldModelOptions))[key]
    return base, with_key(base, key, other_value(key, lookup(base, key, default), folder))


def build(options: dict):
    return build_world_model(WorldModelOptions(**options), ENV, {}, make(ENV).vocabulary(), seed=0)


def weights(model) -> dict[str, torch.Tensor]:
    return {name: t.detach().cpu() for name, t in model.state_dict().items()}


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[n].dtype == b[n].dtype and a[n].shape == b[n].shape
                                        and torch.equal(a[n], b[n]) for n in a)


def probe(model, episodes) -> torch.Tensor:
    """What the model says about real turns: its disagreement over each real next observation."""
    turns = [turn for t in episodes for turn in t.turns]
    states = model.states_before_turns(episodes)
    return model.disagreement(states, [t.action for t in turns], [t.next_observation for t in turns]).cpu()


def fitted(model, episodes) -> tuple[dict, dict]:
    metrics = kind_of(model).fit(episodes, [], model, max_steps=2, batch_size=4, seed=0, progress=False,
                                 score_train=False)
    return weights(model), {k: v for k, v in metrics.items() if k.startswith("wm/")}


def differs(base: dict, changed: dict, episodes) -> bool:
    a, b = build(base), build(changed)
    if a.device != b.device or not same_weights(weights(a), weights(b)):
        return True
    if not torch.equal(probe(a, episodes[:2]), probe(b, episodes[:2])):
        return True
    (wa, ma), (wb, mb) = fitted(a, episodes), fitted(b, episodes)
    return ma != mb or not same_weights(wa, wb)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pretrained")
    save_local_model(path)
    return str(path)


@pytest.fixture(scope="module")
def episodes():
    return collect(RandomAgent(0), ENV, group_size=4, group_seeds=[3, 4], progress=False)


def test_every_key_is_read_by_some_kind_and_every_kind_is_listed():
    assert tuple(KIND_KEYS) == KIND_NAMES
    read = {key: [k for k, keys in KIND_KEYS.items() if any(key == r or key.startswith(r + ".") for r in keys)]
            for key, _ in leaves(WorldModelOptions)}
    assert [key for key, kinds in read.items() if not kinds] == []


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("key", KEYS)
def test_another_value_changes_the_model_or_is_refused_naming_the_key(kind, key, folder, episodes):
    base, changed = pair(kind, key, folder)
    read = any(key == r or key.startswith(r + ".") for r in KIND_KEYS[kind])
    if not read:
        with pytest.raises(ValueError, match=rf"world_model\.{key} is read only by the \w+ world model; "
                                             rf"world_model\.name={kind} does not use it"):
            WorldModelOptions(**changed)
        return
    if key == "lm.device" and not torch.cuda.is_available():  # the build moves the model there: CUDA is asked for
        with pytest.raises((AssertionError, RuntimeError), match="(?i)cuda|nvidia"):
            build(changed)
        return
    assert differs(base, changed, episodes), f"world_model.{key} set for {kind} changes nothing"


@pytest.mark.parametrize(("lm", "key"), [
    ({"pretrained": "/models/x", "hidden_size": 32}, "lm.hidden_size"),
    ({"pretrained": "/models/x", "num_layers": 1}, "lm.num_layers"),
    ({"lora_alpha": 8.0}, "lm.lora_alpha"),
])
def test_an_lm_option_its_build_would_drop_is_refused_naming_it(lm, key):
    with pytest.raises(ValueError, match=rf"world_model\.{key} "):
        WorldModelOptions(name="lm", lm=lm)
    assert LMOptions(**lm)  # a saved model's options load as they were built
