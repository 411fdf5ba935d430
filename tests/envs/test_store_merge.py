"""The store's merge plan against base-``fanout`` counting, and merging on disk: order, crashes, readers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.store import TrajectoryStore
from envs.store_merge import level, merge_start
from tests.envs.test_store import REPO, make_traj


def simulate(n_appends: int, fanout: int) -> list[int]:
    """Append counts per shard after ``n_appends`` single appends under the plan."""
    shards: list[int] = []
    for _ in range(n_appends):
        shards.append(1)
        start = merge_start(shards, fanout)
        shards = shards[:start] + [sum(shards[start:])] if start < len(shards) else shards
    return shards


def base_digits(n: int, base: int) -> list[int]:
    """Digits of ``n`` in ``base``, most significant first."""
    digits = []
    while n:
        n, d = divmod(n, base)
        digits.append(d)
    return digits[::-1]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), fanout=st.integers(2, 6))
def test_plan_counts_appends_in_base_fanout(n: int, fanout: int) -> None:
    """After n appends the shards hold fanout**k appends each, digit_k of them: n written in base fanout."""
    digits = base_digits(n, fanout)
    expected = [fanout ** (len(digits) - 1 - k) for k, d in enumerate(digits) for _ in range(d)]
    assert simulate(n, fanout) == expected


def test_level_and_plan_by_hand() -> None:
    assert [level(a, 8) for a in (1, 7, 8, 63, 64, 512)] == [0, 0, 1, 1, 2, 3]
    assert merge_start([8, 1, 1], 8) == 3  # nothing due
    assert merge_start([8] * 7 + [1] * 8, 8) == 0  # a cascade: eight 1s make an 8, then eight 8s
    assert merge_start([1] * 20, 8) == 0  # a store from before merging folds into one shard
    assert merge_start([64, 1, 1, 1], 2) == 1  # level <= 1 at the tail: three shards, merged


def test_appends_merge_into_few_shards_in_order(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path, merge_fanout=3)
    expected = []
    for i in range(11):  # 11 = 102 in base 3: shards of 9, 1, 1 appends (no 3s)
        batch = [make_traj(2 * i), make_traj(2 * i + 1, source="imagined")]
        store.append(batch)
        expected += batch
    assert store.num_shards() == 3
    assert TrajectoryStore(tmp_path).load() == expected
    on_disk = sorted(n for n in os.listdir(tmp_path) if n.startswith("shard-"))
    assert on_disk == [entry["name"] for entry in store._shards()]  # merged-away shards are deleted
    assert [entry["appends"] for entry in store._shards()] == [9, 1, 1]


def test_compact_folds_everything_into_one_shard(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path, merge_fanout=None)
    trajs = [make_traj(i, n_turns=i % 3) for i in range(7)]
    for traj in trajs:
        store.append([traj])
    assert store.num_shards() == 7
    store.compact()
    assert store.num_shards() == 1 and store.load() == trajs
    assert sorted(os.listdir(tmp_path)) == [".lock", "manifest.json", "shard-00007"]


class Crash(BaseException):
    """A kill at a chosen point: not an ``Exception``, so nothing catches it on the way out."""


# The second append with fanout 2 commits, then merges two shards. In order, it calls
# save_to_disk (append, merge), os.rename (append, merge), os.replace (append commit, merge commit)
# and shutil.rmtree (deleting the merged-away shards).
CRASH_POINTS = {
    "writing the merged shard": ("datasets.Dataset.save_to_disk", 2),
    "renaming the merged shard into place": ("os.rename", 2),
    "committing the merge": ("os.replace", 2),
    "deleting the merged-away shards": ("shutil.rmtree", 1),
}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_mid_merge_loses_and_duplicates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    target, crash_at = CRASH_POINTS[point]
    module_name, attr = target.rsplit(".", 1)
    owner = (
        datasets.Dataset if module_name == "datasets.Dataset" else {"os": os, "shutil": shutil}[module_name]
    )
    real = getattr(owner, attr)
    calls = {"n": 0}

    def crashing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == crash_at:
            raise Crash(point)
        return real(*args, **kwargs)

    store = TrajectoryStore(tmp_path, merge_fanout=2)
    store.append([make_traj(0)])
    monkeypatch.setattr(owner, attr, crashing)
    with pytest.raises(Crash):
        store.append([make_traj(1), make_traj(2)])
    monkeypatch.setattr(owner, attr, real)
    assert calls["n"] == crash_at  # the crash happened where it was meant to
    expected = [make_traj(0), make_traj(1), make_traj(2)]  # the append committed before its merge
    assert TrajectoryStore(tmp_path).load() == expected
    store.append([make_traj(3)])  # cleans the leftovers and merges again
    assert TrajectoryStore(tmp_path).load() == expected + [make_traj(3)]
    listed = {entry["name"] for entry in store._shards()}
    assert set(os.listdir(tmp_path)) == listed | {".lock", "manifest.json"}


@pytest.mark.slow
def test_a_process_killed_after_committing_a_merge_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL between the merge's commit and its clean-up: the old shards linger, unread."""
    store = TrajectoryStore(tmp_path, merge_fanout=2)
    store.append([make_traj(0)])
    script = textwrap.dedent(
        f"""
        import os, shutil, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        shutil.rmtree = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
        from envs.store import TrajectoryStore
        from tests.envs.test_store import make_traj
        TrajectoryStore({str(tmp_path)!r}, merge_fanout=2).append([make_traj(1)])
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, cwd=REPO)
    assert proc.returncode == -9, proc.stderr.decode()
    assert {"shard-00000", "shard-00001", "shard-00002"} <= set(os.listdir(tmp_path))  # merged, not cleaned
    assert TrajectoryStore(tmp_path).num_shards() == 1
    assert TrajectoryStore(tmp_path).load() == [make_traj(0), make_traj(1)]


def test_a_failed_merge_warns_and_keeps_the_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = TrajectoryStore(tmp_path, merge_fanout=2)
    store.append([make_traj(0)])
    real_concat = datasets.concatenate_datasets

    def disk_full(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(datasets, "concatenate_datasets", disk_full)
    with pytest.warns(UserWarning, match="merging shards failed after the append committed.*disk full"):
        store.append([make_traj(1)])
    monkeypatch.setattr(datasets, "concatenate_datasets", real_concat)
    assert store.num_shards() == 2 and store.load() == [make_traj(0), make_traj(1)]


def test_a_reader_rereads_the_manifest_when_a_merge_removed_its_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = TrajectoryStore(tmp_path, merge_fanout=None)
    for i in range(3):
        writer.append([make_traj(i)])
    real_load = datasets.load_from_disk
    merged = {"done": False}

    def merge_then_load(path, *args, **kwargs):
        if not merged["done"]:  # another process compacts after this reader read the manifest
            merged["done"] = True
            TrajectoryStore(tmp_path).compact()
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_from_disk", merge_then_load)
    assert TrajectoryStore(tmp_path).load() == [make_traj(0), make_traj(1), make_traj(2)]
    assert merged["done"]
