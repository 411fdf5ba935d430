"""An append-only, crash-safe trajectory store on Hugging Face ``datasets``, with tiered merging.

Each append writes a new shard into a temporary folder, renames it into place and commits it by one
atomic replace of ``manifest.json``, the only thing readers trust; a killed writer leaves leftovers
that are never read and that the next writer (holding the store's ``flock``) deletes. After an
append the newest shards are merged as ``envs.store_merge`` plans, so opening the store stays
O(log appends). Per-turn records use ``datasets.List``; ``Turn.sample`` (token ids, log-probs) is
never stored. Why each step is safe, and the folder layout: ``docs/store.md``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import datasets
from datasets import Dataset, Features, List, Value

from envs.durable import fsync_dir, fsync_tree
from envs.store_merge import merge_start
from envs.strict_json import strict_dumps
from envs.trajectory import Trajectory, Turn

FORMAT = "reverie-trajectory-store"
VERSION = 2  # 2: shard numbers may skip (merged shards); version-1 manifests are read as before
READABLE_VERSIONS = (1, 2)
DEFAULT_MERGE_FANOUT = 8
MANIFEST = "manifest.json"
LOCK = ".lock"
_SHARD_NAME = re.compile(r"shard-\d{5,}")

TURN_FEATURES = {
    "observation": Value("string"),
    "action": Value("string"),
    "next_observation": Value("string"),
    "reward": Value("float64"),  # float64 so Python floats round-trip exactly
    "done": Value("bool"),
    "valid": Value("bool"),
    "anchor_observation": Value("string"),
}
FEATURES = Features(
    {
        "env_name": Value("string"),
        "env_kwargs": Value("string"),  # JSON: kwargs vary per env, a fixed schema cannot hold them
        "seed": Value("int64"),
        "group_id": Value("int64"),
        "trajectory_id": Value("int64"),
        "source": Value("string"),
        "success": Value("bool"),
        "episode_return": Value("float64"),  # derived; stored for direct use of the dataset
        "turns": List(TURN_FEATURES),
        # Appended after the original columns, so older shards gain them at the end (see _upgrade).
        "truncated": Value("bool"),
        "branch_turn": Value("int64"),
        "iteration": Value("int64"),  # null: not recorded
        "policy_version": Value("int64"),  # null: not recorded
    }
)
_ADDED_COLUMNS = {"truncated": False, "branch_turn": 0, "iteration": None, "policy_version": None}
_FIRST_FEATURES = Features({name: f for name, f in FEATURES.items() if name not in _ADDED_COLUMNS})


class StoreError(RuntimeError):
    """A folder is not a trajectory store, or a committed part of one cannot be read."""


def env_kwargs_to_json(env_kwargs: dict[str, Any]) -> str:
    """Encode env kwargs as JSON, refusing values that would not come back equal (tuples, int keys)."""
    text = json.dumps(env_kwargs, ensure_ascii=False)
    if json.loads(text) != env_kwargs:
        raise ValueError(f"env_kwargs {env_kwargs!r} do not survive JSON: use str keys and lists, not tuples")
    return text


def trajectory_to_record(traj: Trajectory) -> dict[str, Any]:
    """One dataset row (matching ``FEATURES``) for a trajectory."""
    if traj.source not in ("real", "imagined"):
        raise ValueError(f"trajectory source must be 'real' or 'imagined', got {traj.source!r}")
    return {
        "env_name": traj.env_name,
        "env_kwargs": env_kwargs_to_json(traj.env_kwargs),
        "seed": traj.seed,
        "group_id": traj.group_id,
        "trajectory_id": traj.trajectory_id,
        "source": traj.source,
        "success": traj.success,
        "episode_return": traj.episode_return,
        "turns": [{name: getattr(turn, name) for name in TURN_FEATURES} for turn in traj.turns],
        "truncated": traj.truncated,
        "branch_turn": traj.branch_turn,
        "iteration": traj.iteration,
        "policy_version": traj.policy_version,
    }


def record_to_trajectory(record: dict[str, Any]) -> Trajectory:
    """The trajectory a dataset row holds (``episode_return`` is recomputed from the turns)."""
    return Trajectory(
        env_name=record["env_name"],
        env_kwargs=json.loads(record["env_kwargs"]),
        seed=record["seed"],
        group_id=record["group_id"],
        trajectory_id=record["trajectory_id"],
        source=record["source"],
        turns=[Turn(**turn) for turn in record["turns"]],
        success=record["success"],
        truncated=record["truncated"],
        branch_turn=record["branch_turn"],
        iteration=record["iteration"],
        policy_version=record["policy_version"],
    )


class TrajectoryStore:
    """Trajectories on disk under ``path``. A missing or empty folder is an empty store.

    ``merge_fanout``: how many shards of one level are merged into one after an append (see
    ``envs.store_merge``); None never merges automatically (one shard per append, as a baseline).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, merge_fanout: int | None = DEFAULT_MERGE_FANOUT
    ) -> None:
        if merge_fanout is not None and merge_fanout < 2:
            raise ValueError(f"merge_fanout must be >= 2 or None, got {merge_fanout}")
        self.path = Path(path)
        self.merge_fanout = merge_fanout
        self._shards()  # fail now, naming the path, if this folder is not a store

    def __len__(self) -> int:
        return sum(entry["num_trajectories"] for entry in self._shards())

    def __repr__(self) -> str:
        return f"TrajectoryStore({str(self.path)!r})"

    def num_shards(self) -> int:
        """Committed shards (each a ``save_to_disk`` folder)."""
        return len(self._shards())

    def append(self, trajectories: Sequence[Trajectory]) -> None:
        """Commit ``trajectories`` as one new shard; all of them become visible at once, or none.

        Then merge the newest shards if the merge plan says so (a failed merge only warns).
        """
        records = [trajectory_to_record(t) for t in trajectories]  # validate before touching disk
        if not records:
            return
        shard = Dataset.from_list(records, features=FEATURES)
        self._shards()  # refuse, before creating anything, to write into a folder that is not a store
        self.path.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(self.path):
            entries = self._shards()
            self._remove_leftovers({entry["name"] for entry in entries})
            name = self._publish(shard, entries)
            entries = entries + [{"name": name, "num_trajectories": len(records), "appends": 1}]
            self._write_manifest(entries)  # the append is committed here
            if self.merge_fanout is not None:
                start = merge_start([entry.get("appends", 1) for entry in entries], self.merge_fanout)
                if start < len(entries) - 1:
                    try:
                        self._merge(entries, start)
                    except Exception as err:  # noqa: BLE001 - the data is committed; a retry would duplicate it
                        warnings.warn(
                            f"{self.path}: merging shards failed after the append committed ({err}); "
                            "the store is intact and the next append retries",
                            stacklevel=2,
                        )

    def compact(self) -> None:
        """Merge every committed shard into one (a no-op for a store with at most one shard)."""
        if not self.path.exists():
            return
        with _exclusive_lock(self.path):
            entries = self._shards()
            self._remove_leftovers({entry["name"] for entry in entries})
            if len(entries) > 1:
                self._merge(entries, 0)

    def dataset(self) -> Dataset:
        """All committed trajectories as one (memory-mapped) ``datasets.Dataset`` with ``FEATURES``."""
        for attempt in range(3):
            entries = self._shards()
            try:
                parts = [self._read_shard(entry) for entry in entries]
                break
            except StoreError:
                if attempt == 2 or self._shards() == entries:
                    raise  # damaged, not merged away while we read
        if not parts:
            return Dataset.from_dict({column: [] for column in FEATURES}, features=FEATURES)
        return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]

    def load(self) -> list[Trajectory]:
        """Every committed trajectory, in append order."""
        return [record_to_trajectory(row) for row in self.dataset()]

    def filter(self, *, source: str | None = None, env_name: str | None = None) -> list[Trajectory]:
        """The trajectories whose ``source`` and ``env_name`` match (``None`` matches anything)."""
        ds = self.dataset()
        # select() builds an index mapping in memory: no cache file lands in the store folder.
        return [record_to_trajectory(row) for row in ds.select(_matching_rows(ds, source, env_name))]

    def newest(
        self, count: int, *, source: str | None = None, env_name: str | None = None,
        where: Callable[[Trajectory], bool] | None = None,
    ) -> list[Trajectory]:
        """The last ``count`` trajectories (append order) that ``filter`` and ``where`` would keep.

        Equal to ``[t for t in self.filter(...) if where(t)][-count:]``, but only the rows near the
        end are decoded: a training loop that refits on its newest data every iteration would
        otherwise decode the whole, ever-growing store each time.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be an integer >= 1, got {count!r}")
        ds = self.dataset()
        rows = _matching_rows(ds, source, env_name)
        found: list[Trajectory] = []
        end = len(rows)
        while end > 0 and len(found) < count:  # decode backwards, one chunk of the missing size at a time
            start = max(0, end - (count - len(found)))
            chunk = [record_to_trajectory(row) for row in ds.select(rows[start:end])]
            found = [t for t in chunk if where is None or where(t)] + found
            end = start
        return found[-count:]

    # -- internals ----------------------------------------------------------------------------

    def _shards(self) -> list[dict[str, Any]]:
        """The committed shard entries from the manifest; [] for an empty store."""
        if not self.path.exists():
            return []
        if not self.path.is_dir():
            raise StoreError(f"{self.path} is not a trajectory store: it is a file, not a folder")
        manifest = self.path / MANIFEST
        if not manifest.exists():
            strangers = sorted(n for n in os.listdir(self.path) if n != LOCK and not _is_leftover(n, set()))
            if strangers:
                raise StoreError(
                    f"{self.path} is not a trajectory store: no {MANIFEST}, and it holds {strangers[:5]}"
                )
            return []
        try:
            content = json.loads(manifest.read_text(encoding="utf-8"))
            if content.get("format") != FORMAT or content.get("version") not in READABLE_VERSIONS:
                raise ValueError(f"format/version is {content.get('format')!r}/{content.get('version')!r}")
            entries = content["shards"]
            numbers = [_shard_number(entry["name"]) for entry in entries]
            if numbers != sorted(set(numbers)):
                raise ValueError(f"shard names are not in increasing order: {[e['name'] for e in entries]}")
            for entry in entries:
                appends = entry.get("appends", 1)
                if (
                    not isinstance(entry["num_trajectories"], int)
                    or not isinstance(appends, int)
                    or appends < 1
                ):
                    raise ValueError(f"bad shard entry {entry!r}")
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise StoreError(f"{manifest} is not a valid trajectory-store manifest: {err}") from err
        return entries

    def _read_shard(self, entry: dict[str, Any]) -> Dataset:
        path = self.path / entry["name"]
        try:
            ds = datasets.load_from_disk(str(path))
        except Exception as err:  # datasets raises several types for a damaged folder
            raise StoreError(f"{path}: committed shard cannot be read ({err})") from err
        if isinstance(ds, Dataset) and ds.features == _FIRST_FEATURES:
            ds = _upgrade(ds)
        if not isinstance(ds, Dataset) or ds.features != FEATURES or len(ds) != entry["num_trajectories"]:
            raise StoreError(f"{path}: committed shard does not match the manifest or the store schema")
        return ds

    def _publish(self, shard: Dataset, entries: list[dict[str, Any]]) -> str:
        """Write ``shard`` durably under a fresh name (not yet committed); return the name."""
        number = 1 + max((_shard_number(entry["name"]) for entry in entries), default=-1)
        name = f"shard-{number:05d}"
        tmp = self.path / f".tmp-{uuid.uuid4().hex}"
        with _quiet_progress_bars():
            shard.save_to_disk(str(tmp))
        fsync_tree(tmp)
        os.rename(tmp, self.path / name)
        return name

    def _merge(self, entries: list[dict[str, Any]], start: int) -> None:
        """Replace ``entries[start:]`` by one shard holding their rows in order. Hold the lock."""
        run = entries[start:]
        merged = datasets.concatenate_datasets([self._read_shard(entry) for entry in run])
        name = self._publish(merged, entries)
        total = {key: sum(entry.get(key, 1) for entry in run) for key in ("num_trajectories", "appends")}
        self._write_manifest(entries[:start] + [{"name": name, **total}])  # the merge is committed here
        self._remove_leftovers({entry["name"] for entry in entries[:start]} | {name})

    def _write_manifest(self, entries: list[dict[str, Any]]) -> None:
        tmp = self.path / f"{MANIFEST}.tmp-{uuid.uuid4().hex}"
        content = {"format": FORMAT, "version": VERSION, "shards": entries}
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(strict_dumps(content, indent=1))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / MANIFEST)  # the commit point
        fsync_dir(self.path)

    def _remove_leftovers(self, committed: set[str]) -> None:
        """Delete what killed writers left behind. Call only while holding the store lock."""
        for name in os.listdir(self.path):
            if _is_leftover(name, committed):
                target = self.path / name
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()


def _matching_rows(ds: Dataset, source: str | None, env_name: str | None) -> list[int]:
    """Row indices whose ``source`` and ``env_name`` match; reads those two columns only."""
    return [
        i
        for i, (src, env) in enumerate(zip(ds["source"], ds["env_name"], strict=True))
        if (source is None or src == source) and (env_name is None or env == env_name)
    ]


def _shard_number(name: str) -> int:
    if not isinstance(name, str) or _SHARD_NAME.fullmatch(name) is None:
        raise ValueError(f"bad shard name {name!r}")
    return int(name.removeprefix("shard-"))


def _upgrade(ds: Dataset) -> Dataset:
    """A shard from before the added columns, with them filled in (in memory: the shard is not touched)."""
    for name, default in _ADDED_COLUMNS.items():
        ds = ds.add_column(name, [default] * len(ds), feature=FEATURES[name])
    return ds


def _is_leftover(name: str, committed: set[str]) -> bool:
    """True for temp files/folders and for shard folders the manifest does not list."""
    if name.startswith(".tmp-") or name.startswith(f"{MANIFEST}.tmp-"):
        return True
    return _SHARD_NAME.fullmatch(name) is not None and name not in committed


@contextmanager
def _exclusive_lock(folder: Path) -> Iterator[None]:
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


@contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """Silence ``save_to_disk``'s progress bar, restoring the caller's setting afterwards."""
    was_disabled = datasets.utils.are_progress_bars_disabled()
    datasets.utils.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            datasets.utils.enable_progress_bars()
