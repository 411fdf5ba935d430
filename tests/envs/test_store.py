"""TrajectoryStore: exact round trips, append-only shards, killed writers, and foreign folders."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import fields, replace
from pathlib import Path

import pytest
from datasets import Dataset, Features
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.store import FEATURES, TURN_FEATURES, StoreError, TrajectoryStore, trajectory_to_record
from envs.trajectory import SampledAction, Trajectory, Turn

REPO = Path(__file__).resolve().parents[2]
# The columns of the first store schema, before truncation, branching and policy versions.
OLD_COLUMNS = {
    "env_name",
    "env_kwargs",
    "seed",
    "group_id",
    "trajectory_id",
    "source",
    "success",
    "episode_return",
    "turns",
}


def make_traj(trajectory_id: int, source: str = "real", n_turns: int = 2) -> Trajectory:
    turns = [
        Turn(
            observation=f"obs {k} — naïve café ✓",
            action=f"guess({k})\nline two",
            next_observation=f"result {k} 漢字",
            reward=0.1 * (k + 1) + 1 / 3,  # not representable in float32: checks float64 storage
            done=k == n_turns - 1,
            valid=k % 2 == 0,
            anchor_observation=f"anchor {k}",
        )
        for k in range(n_turns)
    ]
    return Trajectory(
        env_name="hidden_number",
        env_kwargs={"n": 16, "noise": 0.25, "variant": "hard", "tags": ["a", "b"]},
        seed=1_000_003 * 7 + trajectory_id,
        group_id=trajectory_id // 2,
        trajectory_id=trajectory_id,
        source=source,
        turns=turns,
        success=trajectory_id % 2 == 1,
        truncated=trajectory_id % 3 == 2,
        branch_turn=min(trajectory_id % 2, n_turns),
        iteration=None if trajectory_id % 2 else 3 * trajectory_id,
        policy_version=None if trajectory_id % 2 else 2**40 + trajectory_id,  # beyond int32
    )


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def test_schema_matches_the_dataclasses() -> None:
    assert set(TURN_FEATURES) == {f.name for f in fields(Turn)} - {"sample"}  # samples are not stored
    assert set(FEATURES) == {f.name for f in fields(Trajectory)} | {"episode_return"}


def test_turn_samples_are_not_stored(tmp_path: Path) -> None:
    traj = make_traj(0)
    traj.turns[0].sample = SampledAction("guess(0)", (5, 6), (7, 2), (-0.1, -0.2), ended=True)
    TrajectoryStore(tmp_path).append([traj])
    (loaded,) = TrajectoryStore(tmp_path).load()
    assert loaded.turns[0].sample is None
    traj.turns[0].sample = None
    assert loaded == traj


def test_new_fields_are_stored_with_nulls(tmp_path: Path) -> None:
    TrajectoryStore(tmp_path).append([make_traj(0), make_traj(1), make_traj(2)])
    ds = TrajectoryStore(tmp_path).dataset()
    assert ds["truncated"] == [False, False, True]
    assert ds["branch_turn"] == [0, 1, 0]
    assert ds["iteration"] == [0, None, 6]
    assert ds["policy_version"] == [2**40, None, 2**40 + 2]


def test_shards_written_before_the_new_fields_load_with_defaults(tmp_path: Path) -> None:
    """A store from before ``truncated``/``branch_turn``/``iteration``/``policy_version`` still loads
    (defaults False, 0, None, None), and takes appends in the current schema."""
    old_features = Features({name: f for name, f in FEATURES.items() if name in OLD_COLUMNS})
    written = replace(make_traj(2), branch_turn=1)  # every new field away from its default
    old_row = {name: value for name, value in trajectory_to_record(written).items() if name in OLD_COLUMNS}
    Dataset.from_list([old_row], features=old_features).save_to_disk(str(tmp_path / "shard-00000"))
    manifest = {
        "format": "reverie-trajectory-store",
        "version": 1,
        "shards": [{"name": "shard-00000", "num_trajectories": 1}],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    before = tree_digest(tmp_path / "shard-00000")
    store = TrajectoryStore(tmp_path)
    expected_old = replace(written, truncated=False, branch_turn=0, iteration=None, policy_version=None)
    assert store.load() == [expected_old]
    store.append([make_traj(2)])
    assert store.load() == [expected_old, make_traj(2)]
    assert store.dataset().features == FEATURES
    assert tree_digest(tmp_path / "shard-00000") == before  # upgraded in memory only


def test_round_trip_is_exact(tmp_path: Path) -> None:
    trajs = [make_traj(0), make_traj(1, n_turns=0), make_traj(2, source="imagined", n_turns=3)]
    TrajectoryStore(tmp_path / "store").append(trajs)
    store = TrajectoryStore(tmp_path / "store")  # a fresh handle reads from disk only
    assert len(store) == 3
    loaded = store.load()
    assert loaded == trajs
    assert loaded[0].turns[1].reward == 0.2 + 1 / 3  # bit-exact float


def test_dataset_has_declared_features_and_list_turns(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    store.append([make_traj(0), make_traj(1)])
    ds = store.dataset()
    assert ds.features == FEATURES
    assert json.loads(ds[0]["env_kwargs"]) == {"n": 16, "noise": 0.25, "variant": "hard", "tags": ["a", "b"]}
    assert isinstance(ds[0]["turns"], list) and ds[0]["turns"][1]["action"] == "guess(1)\nline two"
    assert ds["episode_return"] == [pytest.approx(0.3 + 2 / 3)] * 2


def test_append_keeps_earlier_data_and_never_rewrites_it(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path / "s")
    first, second = [make_traj(0), make_traj(1)], [make_traj(2, source="imagined")]
    store.append(first)
    before = tree_digest(tmp_path / "s" / "shard-00000")
    store.append(second)
    store.append([])  # a no-op, not an empty shard
    assert sorted(os.listdir(tmp_path / "s")) == [".lock", "manifest.json", "shard-00000", "shard-00001"]
    assert tree_digest(tmp_path / "s" / "shard-00000") == before
    assert len(store) == 3
    assert store.load() == first + second
    assert store.filter(source="imagined") == second
    assert store.filter(source="real", env_name="hidden_number") == first
    assert store.filter(env_name="other") == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(st.tuples(st.sampled_from(["real", "imagined"]), st.integers(0, 2)), max_size=12),
    appends=st.integers(1, 3), count=st.integers(1, 14),
)
def test_newest_equals_filtering_everything_then_taking_the_tail(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[tuple[str, int]], appends: int, count: int
) -> None:
    # Brute-force reference: decode every row, keep the matches, take the last ``count``.
    store = TrajectoryStore(tmp_path_factory.mktemp("newest") / "s")
    trajectories = [make_traj(i, source=source, n_turns=n_turns) for i, (source, n_turns) in enumerate(kinds)]
    for part in range(appends):  # several shards, so the tail can span shard boundaries
        store.append(trajectories[part::appends])
    played = lambda t: t.num_turns > t.branch_turn  # noqa: E731 - the world model's "trainable" rule
    everything = store.filter(source="real")
    assert store.newest(count, source="real", where=played) == [t for t in everything if played(t)][-count:]
    assert store.newest(count, source="real") == everything[-count:]
    assert store.newest(count, env_name="other") == []


def test_newest_refuses_a_count_below_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="count must be an integer >= 1"):
        TrajectoryStore(tmp_path / "s").newest(0)


def test_empty_or_missing_folder_is_an_empty_store(tmp_path: Path) -> None:
    for path in (tmp_path / "missing", tmp_path):
        store = TrajectoryStore(path)
        assert len(store) == 0 and store.load() == []
        assert store.dataset().features == FEATURES and len(store.dataset()) == 0


def test_leftovers_of_killed_writers_are_ignored_then_cleaned(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    store.append([make_traj(0)])
    # A writer killed mid-save_to_disk, one killed after renaming its shard but before the
    # manifest commit (a half-written arrow file), and one killed while writing the manifest.
    (tmp_path / ".tmp-deadbeef").mkdir()
    (tmp_path / ".tmp-deadbeef" / "data-00000-of-00001.arrow").write_bytes(b"\x00partial")
    (tmp_path / "shard-00001").mkdir()
    (tmp_path / "shard-00001" / "data-00000-of-00001.arrow").write_bytes(b"ARROW1\x00\x00trunc")
    (tmp_path / "manifest.json.tmp-cafe").write_text('{"format": "reverie-traj')
    assert len(TrajectoryStore(tmp_path)) == 1
    assert TrajectoryStore(tmp_path).load() == [make_traj(0)]
    store.append([make_traj(1)])
    assert sorted(os.listdir(tmp_path)) == [".lock", "manifest.json", "shard-00000", "shard-00001"]
    assert store.load() == [make_traj(0), make_traj(1)]


@pytest.mark.slow
def test_writer_killed_at_the_commit_point_loses_nothing(tmp_path: Path) -> None:
    """A real process gets SIGKILL just as it would replace the manifest (after its shard is renamed)."""
    store = TrajectoryStore(tmp_path)
    store.append([make_traj(0)])
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        from envs.store import TrajectoryStore
        from envs.trajectory import Trajectory
        TrajectoryStore({str(tmp_path)!r}).append([Trajectory("x", {{}}, 1, 1, 1)])
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr.decode()
    assert "shard-00001" in os.listdir(tmp_path)  # renamed into place, never committed
    assert TrajectoryStore(tmp_path).load() == [make_traj(0)]
    store.append([make_traj(2)])  # the dead writer's lock is gone; its orphan is cleaned and replaced
    assert store.load() == [make_traj(0), make_traj(2)]


def test_a_failed_save_leaves_the_store_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = TrajectoryStore(tmp_path)
    store.append([make_traj(0)])

    def half_write(self, path, **kwargs):
        os.makedirs(path)
        Path(path, "data-00000-of-00001.arrow").write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr("datasets.Dataset.save_to_disk", half_write)
    with pytest.raises(OSError, match="disk full"):
        store.append([make_traj(1)])
    assert store.load() == [make_traj(0)]


def test_folder_that_is_not_a_store_raises_naming_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(StoreError, match=re.escape(f"{tmp_path} is not a trajectory store")):
        TrajectoryStore(tmp_path)
    with pytest.raises(StoreError, match="notes.txt.*is a file"):
        TrajectoryStore(tmp_path / "notes.txt")


def test_corrupted_store_raises_naming_the_path(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    store.append([make_traj(0)])
    (tmp_path / "shard-00000" / "state.json").unlink()
    with pytest.raises(StoreError, match="shard-00000: committed shard cannot be read"):
        store.load()
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match="manifest.json is not a valid trajectory-store manifest"):
        TrajectoryStore(tmp_path)


def test_bad_trajectories_are_refused_before_touching_disk(tmp_path: Path) -> None:
    bad = make_traj(0)
    bad.env_kwargs = {"shape": (3, 4)}  # a tuple would come back as a list
    with pytest.raises(ValueError, match="do not survive JSON"):
        TrajectoryStore(tmp_path / "s").append([bad])
    assert not (tmp_path / "s").exists()


texts = st.text(max_size=12)
floats = st.floats(allow_nan=False, width=64)  # NaN never equals itself, so equality cannot check it
int64 = st.integers(-(2**63), 2**63 - 1)
turn_st = st.builds(Turn, texts, texts, texts, floats, st.booleans(), st.booleans(), texts)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | floats | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def traj_st(draw: st.DrawFn) -> Trajectory:
    turns = draw(st.lists(turn_st, max_size=3))
    return Trajectory(
        env_name=draw(texts),
        env_kwargs=draw(st.dictionaries(texts, json_value, max_size=3)),
        seed=draw(int64),
        group_id=draw(int64),
        trajectory_id=draw(int64),
        source=draw(st.sampled_from(["real", "imagined"])),
        turns=turns,
        success=draw(st.booleans()),
        truncated=draw(st.booleans()),
        branch_turn=draw(st.integers(0, len(turns))),
        iteration=draw(st.none() | int64),
        policy_version=draw(st.none() | int64),
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(traj_st(), max_size=3), min_size=1, max_size=2))
def test_random_trajectories_round_trip(batches: list[list[Trajectory]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = TrajectoryStore(folder)
        for batch in batches:
            store.append(batch)
        expected = [t for batch in batches for t in batch]
        assert len(store) == len(expected)
        assert TrajectoryStore(folder).load() == expected
