"""Several Fabric processes in the training loop: who collects what, what they exchange, who writes.

``trainer.devices`` (times ``trainer.num_nodes``) ranks run the same loop with ``strategy=ddp_spawn``.
Each rank collects its contiguous share of the iteration's real groups (a group never spans ranks),
then every rank gathers every rank's episodes, so the store, the metrics and the advantages see the
whole iteration as one process would; the update is data-parallel: each rank trains on its share of
the batch's rows and DDP averages the gradients. Rank 0 alone writes files, evaluates, and refits
the world model, whose weights it then broadcasts.

Episodes cross between ranks as JSON (``envs.store``'s record plus the sampled token ids), never as
pickles; module weights cross as tensors.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from lightning.fabric import Fabric

from envs.collect import EnvFailure
from envs.seeding import derive_seed
from envs.store import record_to_trajectory, trajectory_to_record
from envs.trajectory import SampledAction, Trajectory
from imagination.imagine import ImaginedGroups
from policy.value_targets import ValueTargets

MULTI_PROCESS_STRATEGY = "ddp_spawn"
# Only the multi-process test sets this: each rank appends its policy's weight hash after every update.
REPLICA_HASH_DIR_ENV = "REVERIE_REPLICA_HASH_DIR"
Result = TypeVar("Result")


def world_size(trainer: Any) -> int:
    return trainer.devices * trainer.num_nodes


def check_multi_process(run: Any) -> None:
    """Refuse, naming the keys, what several processes cannot run (before any process starts)."""
    trainer = run.trainer
    size = world_size(trainer)
    if size == 1:
        return
    if trainer.strategy != MULTI_PROCESS_STRATEGY:
        raise ValueError(
            f"trainer.devices={trainer.devices} (trainer.num_nodes={trainer.num_nodes}) needs "
            f"trainer.strategy={MULTI_PROCESS_STRATEGY}, got {trainer.strategy!r}: strategy=ddp starts each extra "
            "process by re-running the command line, which under Hydra re-runs the job (a whole sweep with -m)"
        )
    if trainer.groups_per_iteration % size:
        raise ValueError(
            f"trainer.groups_per_iteration={trainer.groups_per_iteration} must be a multiple of the {size} processes "
            f"(trainer.devices x trainer.num_nodes): each process collects an equal share of whole groups"
        )
    if run.resume is not None:
        raise ValueError(
            f"resume with trainer.devices x trainer.num_nodes = {size} is not supported: checkpoints hold rank 0's "
            "sampling stream only; resume with trainer.devices=1"
        )


def launch_ranks(fabric: Fabric, function: Callable[..., Result], *args: Any) -> Result:
    """``fabric.launch(function, *args)``, with every rank closing its process group once ``function`` is done.

    Lightning closes the group at exit for NCCL only. A gloo rank that exits with the group still open
    can abort while the interpreter shuts down (SIGABRT, "terminate called without an active
    exception"): its transport threads still hold work that the dying interpreter cannot free, and
    the launch fails although every rank finished its work.
    """
    return fabric.launch(_run_then_close_group, function, *args)


def _run_then_close_group(fabric: Fabric, function: Callable[..., Result], *args: Any) -> Result:
    try:
        result = function(fabric, *args)
        fabric.barrier()  # no rank closes its connections while another still exchanges over them
        return result
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def shard(count: int, size: int, rank: int) -> range:
    """Rank ``rank``'s contiguous share of ``count`` items (sizes differ by at most one)."""
    return range(count * rank // size, count * (rank + 1) // size)


def rank_seed(seed: int, rank: int) -> int:
    """Rank 0 keeps ``seed`` (a one-process run is unchanged); the others draw streams of their own."""
    return seed if rank == 0 else derive_seed(seed, "rank", rank)


# --- exchanging episodes -------------------------------------------------------------------------


def trajectory_to_json(trajectory: Trajectory) -> dict[str, Any]:
    """The store's record plus each turn's sampled token ids (which the update trains on)."""
    record = trajectory_to_record(trajectory)
    record["samples"] = [
        None if turn.sample is None else dataclasses.asdict(turn.sample) for turn in trajectory.turns
    ]
    return record


def trajectory_from_json(record: dict[str, Any]) -> Trajectory:
    samples = record.pop("samples")
    trajectory = record_to_trajectory(record)
    for turn, sample in zip(trajectory.turns, samples, strict=True):
        turn.sample = None if sample is None else SampledAction(**sample)
    return trajectory


def all_gather_json(fabric: Fabric, value: Any) -> list[Any]:
    """Every rank's ``value`` (JSON-encodable), in rank order, on every rank."""
    if fabric.world_size == 1:
        return [value]
    data = torch.frombuffer(bytearray(json.dumps(value).encode()), dtype=torch.uint8).to(
        fabric.device
    )  # (n,)
    lengths = fabric.all_gather(torch.tensor(len(data), device=fabric.device)).reshape(-1).tolist()  # (R,)
    padded = torch.zeros(max(lengths), dtype=torch.uint8, device=fabric.device)
    padded[: len(data)] = data
    gathered = fabric.all_gather(padded).reshape(len(lengths), -1).cpu()  # (R, max n)
    return [json.loads(bytes(row[:n].tolist())) for row, n in zip(gathered, lengths, strict=True)]


def broadcast_json(fabric: Fabric, value: Any) -> Any:
    """Rank 0's ``value`` on every rank (the other ranks' arguments are ignored)."""
    if fabric.world_size == 1:
        return value
    return all_gather_json(fabric, value if fabric.global_rank == 0 else None)[0]


def broadcast_module_(fabric: Fabric, module: torch.nn.Module) -> None:
    """Overwrite ``module``'s weights and buffers with rank 0's, in place (tensors, no pickles)."""
    if fabric.world_size == 1:
        return
    for tensor in module.state_dict().values():
        staged = tensor.to(fabric.device)  # the backend's device (itself on CPU with gloo)
        dist.broadcast(staged, src=0)
        if staged is not tensor:
            tensor.copy_(staged)


def any_rank(fabric: Fabric, flag: bool) -> bool:
    """True on every rank when ``flag`` is true on some rank (to stop together)."""
    if fabric.world_size == 1:
        return flag
    return bool(fabric.all_reduce(torch.tensor(float(flag), device=fabric.device), reduce_op="sum") > 0)


# --- one iteration's real collection, made global ------------------------------------------------


@dataclass
class Collection:
    """One rank's (or, gathered, the iteration's) real episodes and what came with them."""

    collected: list[Trajectory]
    """Every episode, dropped groups included (ids global once gathered)."""
    kept: list[Trajectory]
    """The update's episodes: ``collected`` itself, or relabelled copies of the informative groups."""
    faults: list[EnvFailure] | list[str]
    """Episodes whose env raised (trainer.on_env_error=skip); their descriptions once gathered."""
    groups_used: int
    """Group ids used (one per group started, in every round)."""
    trajectories_used: int
    """Trajectory ids used (a failed episode's id stays used)."""
    rounds: int


def offset_ids(trajectories: list[Trajectory], groups: int, trajectories_by: int) -> None:
    for trajectory in trajectories:
        trajectory.group_id += groups
        trajectory.trajectory_id += trajectories_by


def gather_collection(
    fabric: Fabric, local: Collection, *, first_group: int, first_trajectory: int, relabelled: bool
) -> Collection:
    """The iteration's collection on every rank, in rank order, with ids made unique.

    Each rank collected with ids counted from 0: rank ``r``'s are moved past those of ranks before it
    and past ``first_group`` / ``first_trajectory``. ``relabelled``: ``kept`` holds copies whose group
    ids count the kept groups from 0 (dynamic sampling); otherwise ``kept`` is ``collected``.
    """
    kept_groups = len({t.group_id for t in local.kept}) if relabelled else 0
    counts = all_gather_json(fabric, [local.groups_used, local.trajectories_used, kept_groups])
    rank = fabric.global_rank
    group_offset = first_group + sum(c[0] for c in counts[:rank])
    trajectory_offset = first_trajectory + sum(c[1] for c in counts[:rank])
    offset_ids(
        local.collected + [failure.trajectory for failure in local.faults], group_offset, trajectory_offset
    )
    if relabelled:
        offset_ids(local.kept, sum(c[2] for c in counts[:rank]), trajectory_offset)
    faults = [failure.describe() for failure in local.faults]
    if fabric.world_size == 1:
        return dataclasses.replace(local, faults=faults)
    payload = {
        "collected": [trajectory_to_json(t) for t in local.collected],
        "kept": [[t.trajectory_id, t.group_id] for t in local.kept],  # pointers into collected
        "faults": faults,
        "rounds": local.rounds,
    }
    parts = all_gather_json(fabric, payload)
    collected = [trajectory_from_json(record) for part in parts for record in part["collected"]]
    by_id = {t.trajectory_id: t for t in collected}
    kept = []
    for trajectory_id, group_id in (pair for part in parts for pair in part["kept"]):
        trajectory = copy.copy(by_id[trajectory_id]) if relabelled else by_id[trajectory_id]
        trajectory.group_id = group_id
        kept.append(trajectory)
    return Collection(
        collected=collected,
        kept=kept,
        faults=[f for part in parts for f in part["faults"]],
        groups_used=sum(c[0] for c in counts),
        trajectories_used=sum(c[1] for c in counts),
        rounds=max(part["rounds"] for part in parts),
    )


def gather_imagined(
    fabric: Fabric,
    local: ImaginedGroups,
    branches: list[tuple[Trajectory, int]],
    *,
    first_group: int,
    first_trajectory: int,
) -> ImaginedGroups:
    """Every rank's imagined groups (each played from its share of ``branches``) on every rank, ids made
    unique past ``first_group`` / ``first_trajectory`` as in ``gather_collection``."""
    counts = all_gather_json(fabric, [len(local.groups), len(local.trajectories), local.halted])
    rank = fabric.global_rank
    offset_ids(
        local.trajectories,
        first_group + sum(c[0] for c in counts[:rank]),
        first_trajectory + sum(c[1] for c in counts[:rank]),
    )
    if fabric.world_size == 1:
        return local
    parts = all_gather_json(fabric, [trajectory_to_json(t) for t in local.trajectories])
    trajectories = [trajectory_from_json(record) for part in parts for record in part]
    groups: dict[int, list[Trajectory]] = {}  # in order of first appearance
    for trajectory in trajectories:
        groups.setdefault(trajectory.group_id, []).append(trajectory)
    return ImaginedGroups(
        trajectories, list(groups.values()), list(branches), halted=sum(c[2] for c in counts)
    )


# --- the update's rows --------------------------------------------------------------------------


def rows_of_rank(fabric: Fabric, rows: int) -> torch.Tensor | None:
    """``(b,)`` this rank's contiguous share of the update batch's rows; None for all of them.

    Advantages are computed on the whole batch on every rank (group statistics see whole groups), so
    the rows can be split evenly regardless of groups. One process, or fewer rows than ranks: every
    rank trains on the whole batch (DDP's average of equal gradients is that gradient).
    """
    if fabric.world_size == 1 or rows < fabric.world_size:
        return None
    share = shard(rows, fabric.world_size, fabric.global_rank)
    return torch.arange(share.start, share.stop)


def value_rows(value: ValueTargets | None, rows: torch.Tensor) -> ValueTargets | None:
    """The critic's targets of ``rows`` only."""
    if value is None:
        return None
    return ValueTargets(
        value.level,
        value.returns[rows],
        old_values=None if value.old_values is None else value.old_values[rows],
        states=None if value.states is None else value.states.index(rows),
        mask=None if value.mask is None else value.mask[rows],
    )


# --- checks and a do-nothing logger for ranks other than 0 ----------------------------------------


def weights_hash(module: torch.nn.Module) -> str:
    """SHA-256 of every tensor of ``module``'s state dict, in key order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def check_replicas_agree(fabric: Fabric, module: torch.nn.Module, iteration: int) -> None:
    """Raise on every rank when the ranks' copies of ``module`` differ (a missed gradient sync)."""
    if fabric.world_size == 1:
        return
    mine = weights_hash(module)
    folder = os.environ.get(REPLICA_HASH_DIR_ENV)
    if folder:
        with open(Path(folder) / f"rank{fabric.global_rank}.txt", "a", encoding="utf-8") as handle:
            handle.write(f"{iteration} {mine}\n")
    hashes = all_gather_json(fabric, mine)
    if len(set(hashes)) > 1:
        raise RuntimeError(
            f"after iteration {iteration} the ranks' policy weights differ (hashes {hashes}): "
            "the gradient sync is broken"
        )


class NullLogger:
    """What ranks other than 0 log to: nothing (only rank 0 writes files)."""

    jsonl_path = None

    def log(self, metrics: dict[str, float], *, real_env_steps: int, iteration: int) -> None:
        pass

    def log_text(self, tag: str, text: str, *, real_env_steps: int) -> None:
        pass

    def close(self) -> None:
        pass
