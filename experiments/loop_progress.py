"""What the training loop carries from one iteration to the next, and its record in a checkpoint.

The loop's built parts (policy, learner, world model, store, ...) do not change shape during a run;
this does: the real-step count (the x-axis), the next unused ids, the imagination gate and the
bookkeeping of how many groups were imagined, the recent real episodes to branch from, and the
logged history. The loop's phases only read it; each returns a ``PhaseRecord`` that the loop
applies (``LoopProgress.apply``). A checkpoint stores it as a ``LoopState`` whose fields and ``imagination`` keys
are fixed, so a checkpoint written by an earlier version of the loop still resumes.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from envs import Trajectory, TrajectoryStore
from experiments.checkpoint import LoopState
from experiments.ledger import Ledger
from experiments.phase_record import PhaseRecord
from experiments.phase_timer import PhaseTimer
from experiments.resume import trajectories_by_id
from imagination.config import ImaginationConfig
from imagination.gate import ImaginationGate


@dataclass
class LoopProgress:
    gate: ImaginationGate
    recent: deque[Trajectory]
    """Recent real episodes, the states imagination branches from."""
    branch_rng: random.Random
    """The stream that picks branch points (saved with the other RNG streams)."""
    warmup_left: int
    """Fully imagined iterations still to run once the gate opens (imagination.warmup_iterations)."""
    warm_start_env_steps: int = 0
    """The expert demonstrations' env steps: reported apart from the RL x-axis."""
    warm_start_check_steps: int | None = 0
    """The env steps of the warm start's success checks, also apart (None: unknown)."""
    real_env_steps: int = 0
    next_ids: dict[str, int] = field(default_factory=lambda: {"group": 0, "trajectory": 0})
    """Ids stay unique across every collection of the run."""
    real_credit: float = 0.0
    """The fractional real group carried over, so the long-run real share is the configured one."""
    imagined_groups_total: int = 0
    groups_total: int = 0
    world_model_fitted: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    """One record per logged iteration, as ``metrics.jsonl`` holds them."""
    start: float = 0.0
    """``time.monotonic()`` when RL began (moved back by the elapsed time of a resumed run)."""
    cpu_start: float | None = 0.0
    """``time.process_time()`` when RL began (moved back by the CPU seconds of a resumed run's earlier
    parts; None when its checkpoint did not record them)."""
    ledger: Ledger = field(default_factory=Ledger)
    budget_cut: dict[str, int] | None = None
    """Where ``trainer.max_env_steps`` stopped collection short (``step_budget.budget_cut_entry``); None: it did not."""
    """What the run's real env steps were used for, and the real steps at the last world-model fit."""
    timer: PhaseTimer = field(default_factory=PhaseTimer)
    """The current iteration's CPU and wall seconds per phase (logged as ``time/phase/*``; never saved)."""

    @classmethod
    def fresh(
        cls, imagination: ImaginationConfig, *, branch_seed: int, warm_start_env_steps: int,
        warm_start_check_steps: int | None = 0,
    ) -> LoopProgress:
        return cls(
            gate=ImaginationGate(imagination.gate_threshold, is_open=imagination.open_at_start),
            recent=deque(maxlen=imagination.recent_trajectories),
            branch_rng=random.Random(branch_seed),
            warmup_left=imagination.warmup_iterations,
            warm_start_env_steps=warm_start_env_steps,
            warm_start_check_steps=warm_start_check_steps,
        )

    def start_clocks(self) -> None:
        """RL begins now: the wall clock and the process's CPU clock of ``elapsed_s`` and ``cpu_seconds``."""
        self.start, self.cpu_start = time.monotonic(), time.process_time()

    def cpu_seconds(self) -> float | None:
        """This process's CPU seconds since RL began, a resumed run's earlier parts included; None when
        those were not recorded."""
        return None if self.cpu_start is None else time.process_time() - self.cpu_start

    def take_ids(self, groups: int, trajectories: int) -> None:
        """Mark ``groups`` group ids and ``trajectories`` trajectory ids from ``next_ids`` on as used."""
        self.next_ids["group"] += groups
        self.next_ids["trajectory"] += trajectories

    def apply(self, record: PhaseRecord) -> None:
        """What a phase of the loop did (``experiments.phase_record``): the only place the x-axis
        advances and the counters move. The steps come first, so a refit counts them."""
        self.real_env_steps += record.real_env_steps
        self.take_ids(record.groups, record.trajectories)
        self.recent.extend(record.recent)
        self.warmup_left -= record.warmup_iterations
        if record.real_credit is not None:
            self.real_credit = record.real_credit
        if record.gate_open is not None:
            self.gate.is_open = record.gate_open
        self.world_model_fitted = self.world_model_fitted or record.world_model_fitted
        if record.world_model_refit:
            self.ledger.count_fit(self.real_env_steps, record.refit_iteration)
        if record.world_model_expert_steps is not None:
            self.ledger.world_model_expert_steps = record.world_model_expert_steps
        self.imagined_groups_total += record.imagined_groups
        self.groups_total += record.update_groups
        self.ledger.critic_real_steps += record.critic_real_steps
        self.ledger.count_imported(record.imported_steps)
        for env_steps in record.evaluations:
            self.ledger.count_evaluation(env_steps)
        if record.history_row is not None:
            self.history.append(record.history_row)
        if record.budget_cut is not None:
            self.budget_cut = record.budget_cut
        if record.final_figures:
            self.history[-1].update(record.final_figures)

    def loop_state(
        self,
        iteration: int,
        *,
        stopped: bool,
        metrics_lines: int,
        store_trajectories: int,
        counterfactual_recent: Iterable[Trajectory] | None,
    ) -> LoopState:
        """The checkpoint record after ``iteration``; ``counterfactual_recent`` is the data of the
        counterfactual critic (None without one)."""
        return LoopState(
            iteration=iteration,
            real_env_steps=self.real_env_steps,
            warm_start_env_steps=self.warm_start_env_steps,
            next_ids=dict(self.next_ids),
            history=self.history,
            metrics_lines=metrics_lines,
            store_trajectories=store_trajectories,
            elapsed_s=time.monotonic() - self.start,
            stopped=stopped,
            ledger=self.ledger.as_record(),
            warm_start_check_steps=self.warm_start_check_steps,
            cpu_s=self.cpu_seconds(),
            imagination={
                "gate": dataclasses.asdict(self.gate),
                "real_credit": self.real_credit,
                "warmup_left": self.warmup_left,
                "imagined_groups_total": self.imagined_groups_total,
                "groups_total": self.groups_total,
                "world_model_fitted": self.world_model_fitted,
                "recent_ids": [t.trajectory_id for t in self.recent],
                "counterfactual_recent_ids": []
                if counterfactual_recent is None
                else [t.trajectory_id for t in counterfactual_recent],
            },
        )

    def restore(self, loop: LoopState, store: TrajectoryStore) -> None:
        """Every counter as it was after the checkpoint's iteration; the recent episodes reread from
        ``store``, and the clocks moved back by the time the run had spent."""
        self.real_env_steps, self.warm_start_env_steps = loop.real_env_steps, loop.warm_start_env_steps
        self.warm_start_check_steps = loop.warm_start_check_steps
        self.next_ids, self.history = dict(loop.next_ids), loop.history
        for name, value in loop.imagination["gate"].items():
            setattr(self.gate, name, value)
        self.real_credit, self.warmup_left = loop.imagination["real_credit"], loop.imagination["warmup_left"]
        self.imagined_groups_total = loop.imagination["imagined_groups_total"]
        self.groups_total = loop.imagination["groups_total"]
        self.world_model_fitted = loop.imagination["world_model_fitted"]
        self.recent.extend(trajectories_by_id(store, loop.imagination["recent_ids"]))
        self.ledger = Ledger.from_record(loop.ledger)
        self.start = time.monotonic() - loop.elapsed_s
        self.cpu_start = None if loop.cpu_s is None else time.process_time() - loop.cpu_s
