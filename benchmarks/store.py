"""Trajectory store at scale: append time, open and load time, files on disk, with and without merging.

    python -m benchmarks.store [--appends 1000] [--trajectories 100] [--turns 10] [--quick]

Writes ``--appends`` batches of ``--trajectories`` synthetic trajectories of ``--turns`` short turns
each (defaults: 1,000 appends, a million turns) into two fresh stores: one shard per append
(``merge_fanout=None``, how the store worked before merging) and the tiered merge (the default
``merge_fanout``). At a few points along the way, and at the end, it opens the store with a fresh
handle and times:

- ``open``: ``TrajectoryStore(path).dataset()``, reading the manifest and memory-mapping every shard;
  this is what grows with the number of shards;
- ``load``: ``load()``, decoding every trajectory into Python objects (only at the end: it grows
  with the data under both layouts).

Also per store: total and slowest single append (a merge lands on some appends), shards, files
and bytes on disk. Wall-clock times on whatever else the machine is doing: compare the two
layouts within one run. Prints a table and writes ``store_scaling.png`` (open time against
appends) into ``--out``. A figure, not a timed test.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from envs.store import DEFAULT_MERGE_FANOUT, TrajectoryStore
from envs.trajectory import Trajectory, Turn


@dataclass(frozen=True)
class Point:
    """One measurement of a store after ``appends`` appends."""

    appends: int
    turns: int
    shards: int
    files: int
    megabytes: float
    open_s: float


@dataclass(frozen=True)
class Result:
    layout: str
    points: list[Point]
    append_total_s: float
    append_max_s: float
    load_s: float
    loaded_turns: int


def synthetic_batch(first_id: int, trajectories: int, turns: int) -> list[Trajectory]:
    """Small, distinct trajectories: short strings, so the measurement is of the store, not the text."""
    batch = []
    for t in range(first_id, first_id + trajectories):
        batch.append(
            Trajectory(
                env_name="hidden_number",
                env_kwargs={"n": 16},
                seed=t,
                group_id=t // 4,
                trajectory_id=t,
                source="real",
                turns=[
                    Turn(f"o{k}", f"guess({k})", f"r{t % 7}", 0.0, k == turns - 1, True, f"a{k}")
                    for k in range(turns)
                ],
                success=t % 2 == 0,
                iteration=t // trajectories,
            )
        )
    return batch


def disk_usage(folder: Path) -> tuple[int, float]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files) / 1e6


def run_layout(
    layout: str,
    merge_fanout: int | None,
    folder: Path,
    appends: int,
    trajectories: int,
    turns: int,
    measure_at: set[int],
) -> Result:
    store = TrajectoryStore(folder, merge_fanout=merge_fanout)
    points, durations = [], []
    for a in tqdm(range(1, appends + 1), desc=layout, unit="append"):
        batch = synthetic_batch((a - 1) * trajectories, trajectories, turns)
        start = time.perf_counter()
        store.append(batch)
        durations.append(time.perf_counter() - start)
        if a in measure_at:
            start = time.perf_counter()
            fresh = TrajectoryStore(folder, merge_fanout=merge_fanout)
            ds = fresh.dataset()
            open_s = time.perf_counter() - start
            assert len(ds) == a * trajectories
            files, megabytes = disk_usage(folder)
            points.append(Point(a, a * trajectories * turns, fresh.num_shards(), files, megabytes, open_s))
    start = time.perf_counter()
    loaded = TrajectoryStore(folder).load()
    load_s = time.perf_counter() - start
    loaded_turns = sum(t.num_turns for t in loaded)
    assert [t.trajectory_id for t in loaded] == list(range(appends * trajectories)), "order or count is wrong"
    return Result(layout, points, sum(durations), max(durations), load_s, loaded_turns)


def format_table(results: list[Result]) -> str:
    lines = [
        f"{'layout':<22} {'appends':>7} {'turns':>9} {'shards':>6} {'files':>6} {'MB':>7} {'open s':>7}",
    ]
    for result in results:
        for p in result.points:
            lines.append(
                f"{result.layout:<22} {p.appends:>7} {p.turns:>9} {p.shards:>6} {p.files:>6} "
                f"{p.megabytes:>7.1f} {p.open_s:>7.3f}"
            )
    lines.append("")
    lines.append(
        f"{'layout':<22} {'append total s':>14} {'slowest append s':>16} {'load s':>7} {'loaded turns':>12}"
    )
    for r in results:
        lines.append(
            f"{r.layout:<22} {r.append_total_s:>14.1f} {r.append_max_s:>16.3f} {r.load_s:>7.1f} {r.loaded_turns:>12}"
        )
    return "\n".join(lines)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        ax.plot([p.appends for p in r.points], [p.open_s for p in r.points], marker="o", label=r.layout)
    ax.set_xlabel("appends (data grows with them)")
    ax.set_ylabel("open time, s (fresh handle, dataset())")
    ax.set_title("TrajectoryStore: opening cost")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--trajectories", type=int, default=100, help="trajectories per append")
    parser.add_argument("--turns", type=int, default=10, help="turns per trajectory")
    parser.add_argument("--fanout", type=int, default=DEFAULT_MERGE_FANOUT)
    parser.add_argument("--points", type=int, default=4, help="measurements along the way")
    parser.add_argument("--quick", action="store_true", help="100 appends of 10 two-turn trajectories")
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks/store"))
    args = parser.parse_args()
    if args.quick:
        args.appends, args.trajectories, args.turns = 100, 10, 2
    measure_at = {max(1, round(args.appends * (k + 1) / args.points)) for k in range(args.points)}
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f"{args.appends} appends x {args.trajectories} trajectories x {args.turns} turns = "
        f"{args.appends * args.trajectories * args.turns:,} turns"
    )
    results = []
    with tempfile.TemporaryDirectory(dir=args.out) as scratch:
        for layout, fanout in (
            ("one shard per append", None),
            (f"tiered merge (fanout {args.fanout})", args.fanout),
        ):
            folder = Path(scratch) / layout.split()[0]
            results.append(
                run_layout(layout, fanout, folder, args.appends, args.trajectories, args.turns, measure_at)
            )
            shutil.rmtree(folder)
    print(format_table(results))
    plot(results, args.out / "store_scaling.png")
    print(f"figure: {args.out / 'store_scaling.png'}")


if __name__ == "__main__":
    main()
