"""The ledger of a run's env steps: every real env step the run consumed, and what it was used for.

The x-axis of every report is ``real_env_steps``: steps played in the real env during RL. The
other entries say which other real data the run drew on, so that none of it is off the books:

- ``warm_start_expert_steps``: the expert demonstrations' steps (behaviour cloning, before RL);
- ``warm_start_check_steps``: the steps of the warm start's success checks (episodes on training
  tasks every ``trainer.warm_start.eval_every`` cloning steps that decide when cloning stops); a run
  whose warm start came from a cache folder reports the cloning run's count, None (unknown) when
  that folder predates the count; 0 without a warm start;
- ``world_model_expert_steps``: the part of those the world model was also fitted on
  (``imagination.fit_on_warm_start``; 0 for a model-free run or with it off);
- ``world_model_real_steps``: the RL real steps collected up to the world model's last fit; every
  refit trains on the store's newest episodes, so these are the RL steps it has been fitted on;
- ``critic_real_steps``: the real steps in the critic's updates (the turns of the kept real
  episodes; a critic also sees imagined turns, which are not real steps);
- ``eval_env_steps``: steps of the held-out evaluations, apart: they never train anything;
- ``imported_world_model_real_steps`` / ``imported_world_model_expert_steps``: the steps a saved world
  model this run started from (``world_model.init``) had been fitted on, by its ``fitted_on.json``:
  real data drawn on before this run, expert demonstrations apart; 0 without one;
- ``imported_critic_real_steps`` / ``imported_critic_expert_steps``: likewise for ``critic.init``. A world
  model and a critic saved by one run were fitted on much the same steps: the entries are not summed.

``steps_at_refit`` is the loop's own counter for ``imagination.refit_every_steps``: the real env
steps at the world model's last fit; ``iteration_at_refit`` the iteration of that fit (0: before RL),
which tells the refit rules the trajectories collected since it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

IMPORTED = tuple(f"imported_{model}_{kind}_steps" for model in ("world_model", "critic") for kind in ("real", "expert"))
"""The ledger's entries of the saved models a run started from."""


@dataclass
class Ledger:
    world_model_expert_steps: int = 0
    world_model_real_steps: int = 0
    critic_real_steps: int = 0
    eval_env_steps: int = 0
    evaluations: int = 0
    steps_at_refit: int = 0
    iteration_at_refit: int = 0
    imported_world_model_real_steps: int = 0
    imported_world_model_expert_steps: int = 0
    imported_critic_real_steps: int = 0
    imported_critic_expert_steps: int = 0

    def as_record(self) -> dict[str, int]:
        """Plain JSON for a checkpoint."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any] | None) -> Ledger:
        """Back from a checkpoint; one written before the ledger existed gives zeros."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: int(v) for k, v in (record or {}).items() if k in known})

    def count_evaluation(self, env_steps: int) -> None:
        self.evaluations += 1
        self.eval_env_steps += env_steps

    def count_imported(self, steps: dict[str, int]) -> None:
        """The steps of the saved models the run started from (entries of ``IMPORTED``): set, not
        added, so a resumed run that reads the same folders counts them once."""
        for name, value in steps.items():
            if name not in IMPORTED:
                raise KeyError(f"not an imported-steps entry of the ledger: {name}")
            setattr(self, name, value)

    def count_fit(self, real_env_steps: int, iteration: int | None = None) -> None:
        """The world model was (re)fitted after ``real_env_steps`` real steps (at ``iteration`` when
        given): all of them are in its data."""
        self.world_model_real_steps = real_env_steps
        self.steps_at_refit = real_env_steps
        if iteration is not None:
            self.iteration_at_refit = iteration


def ledger_summary(
    ledger: Ledger, *, real_env_steps: int, warm_start_expert_steps: int, warm_start_check_steps: int | None
) -> dict[str, int | None]:
    """The ledger as ``summary.json`` shows it (see the module docstring for each entry)."""
    return {
        "real_env_steps": real_env_steps,
        "warm_start_expert_steps": warm_start_expert_steps,
        "warm_start_check_steps": warm_start_check_steps,
        "world_model_expert_steps": ledger.world_model_expert_steps,
        "world_model_real_steps": ledger.world_model_real_steps,
        "critic_real_steps": ledger.critic_real_steps,
        "eval_env_steps": ledger.eval_env_steps,
        "evaluations": ledger.evaluations,
        **imported_entries(ledger),
    }


def imported_entries(ledger: Ledger) -> dict[str, int]:
    return {name: getattr(ledger, name) for name in IMPORTED}
