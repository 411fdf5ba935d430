"""The checkpoint format: exact round trips without pickle, atomic publishing, the newest two kept,
and every kind of damage refused with one ``CheckpointError`` naming the folder."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.checkpoint import (
    STATE_JSON,
    STATE_TENSORS,
    Checkpoint,
    CheckpointError,
    LoopState,
    flatten_state,
    list_checkpoints,
    load_checkpoint,
    load_latest,
    save_checkpoint,
    unflatten_state,
)


def loop_state(iteration: int, **changes) -> LoopState:
    fields = dict(
        iteration=iteration,
        real_env_steps=10 * iteration,
        warm_start_env_steps=7,
        next_ids={"group": 2 * iteration, "trajectory": 8 * iteration},
        history=[{"iteration": 0, "eval/success_rate": 0.25, "wm/loss": float("nan")}],
        metrics_lines=iteration + 1,
        store_trajectories=8 * iteration,
        elapsed_s=1.5,
        imagination={"recent_ids": [3, 1, 2], "real_credit": 0.1 + 0.2},
    )
    return LoopState(**{**fields, **changes})


def same(a, b) -> bool:
    """Structural equality that also compares types (tuple vs list, int vs float) and tensors exactly."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


tensors = st.builds(
    lambda shape, dtype, seed: (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 100).to(
        dtype
    ),
    st.lists(st.integers(0, 3), max_size=3).map(tuple),
    st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.uint8, torch.bool]),
    st.integers(0, 2**31),
)
leaves = (
    st.none() | st.booleans() | st.integers(-(2**62), 2**62) | st.floats() | st.text(max_size=5) | tensors
)
nested = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(-5, 5), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(nested)
def test_flatten_then_unflatten_gives_back_the_same_structure(state):
    tensors_out, layout = flatten_state(state)
    layout = json.loads(json.dumps(layout))  # what state.json really holds
    assert same(unflatten_state(layout, tensors_out), state)


def test_tied_weights_are_stored_apart_and_unknown_types_refused():
    shared = torch.ones(3)
    tensors_out, layout = flatten_state({"embed": shared, "head": shared})
    assert (
        tensors_out["state/embed"].data_ptr() != tensors_out["state/head"].data_ptr()
    )  # safetensors needs this
    with pytest.raises(TypeError, match="state/x: cannot store a set"):
        flatten_state({"x": {1, 2}})


def adam_after_steps(steps: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(model.weight, 0.5)
    torch.nn.init.constant_(model.bias, -0.25)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for step in range(steps):
        optimizer.zero_grad()
        model(torch.full((4, 3), float(step + 1))).pow(2).sum().backward()
        optimizer.step()
    return model, optimizer


def test_a_saved_optimizer_continues_exactly(tmp_path):
    # Two Adam steps, checkpoint, a third step: the same as three steps without a checkpoint, bit for bit.
    model, optimizer = adam_after_steps(2)
    rng = random.Random(5)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": rng.getstate()}
    folder = save_checkpoint(tmp_path, Checkpoint({"seed": 1}, loop_state(2), state))
    loaded = load_checkpoint(folder)
    assert loaded.config == {"seed": 1}
    assert same(dataclasses.asdict(loaded.loop), dataclasses.asdict(loop_state(2)))  # NaN and 0.1 + 0.2 exact
    resumed_model, resumed_optimizer = adam_after_steps(0)
    resumed_model.load_state_dict(loaded.state["model"])
    resumed_optimizer.load_state_dict(loaded.state["optimizer"])
    restored = random.Random()
    restored.setstate(loaded.state["rng"])
    assert restored.random() == rng.random()
    for m, o in ((model, optimizer), (resumed_model, resumed_optimizer)):
        o.zero_grad()
        m(torch.full((4, 3), 3.0)).pow(2).sum().backward()
        o.step()
    reference, _ = adam_after_steps(3)
    for p, q, r in zip(model.parameters(), resumed_model.parameters(), reference.parameters(), strict=True):
        assert torch.equal(p, q) and torch.equal(p, r)


def test_only_the_newest_two_are_kept_and_temp_folders_are_never_read(tmp_path):
    leftover = tmp_path / ".tmp-killed"
    leftover.mkdir(parents=True)
    (leftover / STATE_JSON).write_text("{")
    assert list_checkpoints(tmp_path) == []
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        load_latest(tmp_path)
    extra = []
    for iteration in (2, 4, 6):
        save_checkpoint(
            tmp_path,
            Checkpoint({}, loop_state(iteration), {"w": torch.arange(iteration)}),
            write_extra=lambda folder: extra.append(folder.name) or (folder / "x.txt").write_text("x"),
        )
    assert sorted(os.listdir(tmp_path)) == ["iteration_00004", "iteration_00006"]  # the leftover is gone too
    assert all(name.startswith(".tmp-") for name in extra)  # extra files are written before publishing
    latest = load_latest(tmp_path)
    assert latest.loop.iteration == 6 and torch.equal(latest.state["w"], torch.arange(6))


def damage_truncate(folder):
    path = folder / STATE_TENSORS
    path.write_bytes(path.read_bytes()[:-7])


def damage_flip_a_byte(folder):
    path = folder / STATE_TENSORS
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def damage_state_json(folder):
    path = folder / STATE_JSON
    path.write_text(path.read_text().replace('"real_env_steps": 40', '"real_env_steps": 41'))


def damage_truncate_json(folder):
    path = folder / STATE_JSON
    path.write_text(path.read_text()[:100])


def damage_remove_extra(folder):
    (folder / "x.txt").unlink()


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (damage_truncate, "state.safetensors does not match its checksum"),
        (damage_flip_a_byte, "state.safetensors does not match its checksum"),
        (damage_state_json, "state.json does not match its checksum"),
        (damage_truncate_json, "JSONDecodeError"),
        (damage_remove_extra, "x.txt"),
    ],
    ids=["truncated", "flipped", "edited_json", "truncated_json", "missing_file"],
)
def test_damage_is_refused_with_one_message_naming_the_folder(tmp_path, damage, expected):
    folder = save_checkpoint(
        tmp_path,
        Checkpoint({}, loop_state(4), {"w": torch.ones(64)}),
        write_extra=lambda f: (f / "x.txt").write_text("x"),
    )
    damage(folder)
    with pytest.raises(CheckpointError) as caught:
        load_latest(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"checkpoint {folder} is damaged") and expected in message, message
    assert "\n" not in message
