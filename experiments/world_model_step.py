"""4. The model-based phase: score the world model on the new real episodes, move the gate, refit, imagine."""

from __future__ import annotations

import dataclasses
import time
from collections import deque

from envs.seeding import derive_seed
from experiments.build import RunParts
from experiments.distributed import Collection, broadcast_json, broadcast_module_
from experiments.imagining import imagine
from experiments.loop_progress import LoopProgress
from experiments.phase_record import PhaseRecord
from experiments.phase_timer import PhaseTimer
from imagination.imagine import ImaginedGroups
from imagination.metrics import imagination_metrics
from imagination.refit import refit_and_gate


def model_based_step(
    parts: RunParts, progress: LoopProgress, iteration: int, real: Collection, n_imagined: int, timer: PhaseTimer
) -> tuple[dict[str, float], ImaginedGroups, PhaseRecord]:
    """4. Model-based: score the world model on the new real episodes (held out: it has not been
    fitted on them), open or close the gate, refit on the store's newest real episodes, and imagine
    the update's other groups from recent real states. Nothing without a world model. Returns the
    figures, the imagined groups and the record of the gate, the fit and the ids used. ``timer``: the
    scoring, the fit and the imagination are charged to their phases (``wm_score``, ``wm_fit``, ``imagine_*``)."""
    model_metrics: dict[str, float] = {}
    imagined = ImaginedGroups([], [], [])
    world_model, fabric = parts.world_model, parts.fabric
    if world_model is None:
        return model_metrics, imagined, PhaseRecord()
    model_start = time.monotonic()
    recent = deque(progress.recent, maxlen=progress.recent.maxlen)  # what the loop holds once it applies the record
    recent.extend(real.collected)
    gate = dataclasses.replace(progress.gate)  # moved here; the loop takes its new state from the record
    # Nothing new to score and nothing ever fitted (imagination.open_at_start at a high ratio: the first
    # iterations may collect no real episode): the first fit waits for real data.
    waits = not progress.world_model_fitted and not real.collected
    if parts.rank0 and not waits:  # rank 0 scores and refits on its store; the other ranks take its weights and gate
        model_metrics = refit_and_gate(world_model, gate, parts.store, real.collected, parts.run.imagination, iteration,
                                       first_fit=not progress.world_model_fitted,
                                       new_real_steps=progress.real_env_steps - progress.ledger.steps_at_refit,
                                       iteration_at_refit=progress.ledger.iteration_at_refit,
                                       fit_seed=derive_seed(parts.run.seed, "world-model-fit", iteration),
                                       log=lambda text, steps=progress.real_env_steps: parts.logger.log_text(
                                           "imagination/gate", text, real_env_steps=steps),
                                       phase=timer.phase)
    model_metrics, gate.is_open = broadcast_json(fabric, [model_metrics, gate.is_open])
    broadcast_module_(fabric, world_model)
    if n_imagined and gate.is_open:
        imagined = imagine(parts, progress, iteration, real.kept, n_imagined, recent, timer)
    record = PhaseRecord(
        groups=len(imagined.groups), trajectories=len(imagined.trajectories), recent=real.collected,
        gate_open=gate.is_open, world_model_fitted="wm/fit_trajectories" in model_metrics,  # (not without data)
        world_model_refit="wm/fit_trajectories" in model_metrics,  # every real step so far is in its data
        refit_iteration=iteration if "wm/fit_trajectories" in model_metrics else None,
        imagined_groups=len(imagined.groups), update_groups=len(imagined.groups) + len({t.group_id for t in real.kept}),
    )
    model_metrics.update(imagination_metrics(imagined, real.kept, real.collected,
                                             progress.imagined_groups_total + record.imagined_groups,
                                             progress.groups_total + record.update_groups, gate))
    model_metrics["time/model_s"] = time.monotonic() - model_start
    return model_metrics, imagined, record
