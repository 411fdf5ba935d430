"""Structured Hydra configs: the schema every YAML under ``conf/`` is checked against.

One dataclass per group, each in its package's ``config.py`` (``docs/configuration.md`` has the
table): ``env/`` ``EnvConfig``, ``policy/`` ``PolicyConfig``, ``algo/`` ``AlgoConfig``, ``critic/``
``CriticConfig``, ``world_model/`` ``WorldModelOptions``, ``imagination/`` ``ImaginationConfig``; this
file holds ``trainer/`` (``TrainerConfig``) and the top level (``TrainConfig``), plus the optional
``experiment/`` presets' registration. A typo'd key or a wrong type fails at start with Hydra's
message; ``validate`` then builds the dataclasses so each ``__post_init__`` checks its ranges,
naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from critic.config import CriticConfig
from envs.checks import check_bool, check_int
from envs.config import EnvConfig
from experiments.init_models import check_init_keys
from experiments.resolve import validate as validate_groups
from imagination.config import ImaginationConfig
from policy.advantages.config import AlgoConfig
from policy.config import PolicyConfig
from world_model.config import WorldModelOptions


@dataclass
class WarmStartConfig:
    enabled: bool = True
    """Behaviour-clone expert trajectories before RL so it starts from a weak, non-zero policy."""
    target_success: float = 0.3
    """Stop cloning once evaluated success reaches this."""
    expert_episodes: int = 256
    """Expert episodes to clone from."""
    max_steps: int = 600
    """Most gradient steps of cloning."""
    lr: float = 1e-3
    """Learning rate of cloning."""
    batch_size: int = 64
    """Turns per cloning step."""
    eval_every: int = 10
    """Cloning steps between success checks."""
    eval_episodes: int = 64
    """Episodes per success check."""
    transcripts: str | None = None
    """A chat JSONL file of recorded episodes (the format ``envs.chat`` exports, e.g. a user's SFT data)
    to clone instead of the env's scripted expert; only the agent's (assistant) turns are learned. For
    an env without an expert, this, ``random_actions`` or ``enabled=false`` (docs/adapters.md)."""
    random_actions: bool = False
    """Clone the env's random well-formed actions (``random_action``) instead of an expert: for an env
    with neither expert nor transcripts, it teaches the action format, not the strategy, and stops once
    ``target_valid`` of the evaluated actions are valid (docs/adapters.md)."""
    target_valid: float = 0.7
    """With ``random_actions``: stop cloning once this share of evaluated actions is valid. Random
    actions are not all valid where validity depends on the state (a repeated guess, an illegal
    move), so a clone of them levels off below 1 (about 0.76 on GuessTheNumber-v0)."""
    cache_dir: str | None = None
    """A folder shared by runs: the first run of an (env, policy, warm-start options, seed) saves its
    cloned weights there and later runs load them instead of cloning (``experiments/warm_start_cache.py``)."""

    def __post_init__(self) -> None:
        if self.random_actions and self.transcripts is not None:
            raise ValueError("trainer.warm_start: give transcripts or random_actions=true, not both")
        if not 0.0 <= self.target_valid <= 1.0:
            raise ValueError(f"trainer.warm_start.target_valid must be in [0, 1], got {self.target_valid}")
        if not 0.0 <= self.target_success <= 1.0:
            raise ValueError(f"trainer.warm_start.target_success must be in [0, 1], got {self.target_success}")
        for name in ("expert_episodes", "max_steps", "batch_size", "eval_every", "eval_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"trainer.warm_start.{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class TrainerConfig:
    iterations: int = 60
    """RL iterations: collect, estimate advantages, update."""
    groups_per_iteration: int = 8
    """Groups of rollouts per iteration; members of a group share the start state."""
    group_size: int = 8
    """Rollouts per group."""
    max_turns: int | None = None
    """Turn cap per episode; None uses the environment's own."""
    eval_every: int = 10
    """Iterations between evaluations on held-out seeds (used when ``eval_every_steps`` is None)."""
    eval_every_steps: int | None = None
    """Evaluate at fixed marks of real env steps N, 2N, 3N, ...: after the first iteration whose
    cumulative real steps reach each mark (an iteration reaching several evaluates once and records
    them all), so arms that spend real steps at different rates get the same looks
    (``experiments/eval_schedule.py``). Set, it replaces ``eval_every``. None: every ``eval_every``
    iterations."""
    eval_episodes: int = 128
    """Episodes per evaluation."""
    time_budget_s: float | None = None
    """Stop after this many seconds of RL (None: run all iterations)."""
    max_env_steps: int | None = None
    """Stop once this many real env steps have been collected (None: no limit). Unlike a time budget,
    it gives the same run on a busy machine as on an idle one."""
    accelerator: str = "cpu"
    """Lightning Fabric accelerator: cpu, cuda, auto."""
    devices: int = 1
    """Fabric devices per node: processes (CPU) or GPUs. Above 1 the loop runs data-parallel and needs
    ``strategy=ddp_spawn`` (README, "Several processes")."""
    num_nodes: int = 1
    """Machines, each running the same command with ``devices`` processes (Fabric's ``num_nodes``)."""
    strategy: str = "auto"
    """Fabric strategy: auto (one process), ddp_spawn (several)."""
    precision: str = "32-true"
    """Fabric precision, e.g. bf16-mixed on GPUs; a mixed precision needs ``algo.ppo.old_logp=recompute``
    (sampling runs outside the learner's autocast, so its log-probs are not the learner's)."""
    checkpoint_every: int = 0
    """Iterations between checkpoints in ``checkpoints/iteration_N/`` (0: none, only the final ``models/policy/``).
    Each holds everything ``resume=RUN_DIR`` needs to continue the run exactly (the newest two are
    kept), and is also a policy folder ``experiments.evaluate`` can play."""
    transcripts_every: int = 10
    """Iterations between logged sample transcripts."""
    progress: bool = True
    """Show progress bars."""
    max_nonfinite_updates: int = 3
    """Policy updates in a row allowed a non-finite loss or gradient (those optimizer steps are skipped,
    and logged with the iteration); one more stops the run with an error saying so."""
    on_env_error: str = "skip"
    """An environment raising inside ``step``: ``skip`` marks that episode failed, logs it with its seed
    and goes on without it; ``raise`` stops the run."""
    env_step_timeout_s: float | None = None
    """Seconds a single env step may take; a step still running then counts as one that raised (see
    ``on_env_error``: with ``skip`` the episode is dropped and logged, the run goes on). For third-party
    envs that can hang. None: no limit (steps run inline, as without this option)."""
    compile: bool = False
    """``torch.compile`` the policy for the learner's update (its old log-prob pass and minibatch steps).
    Compiling costs about a minute of CPU up front, so it pays off only on long runs (README,
    "Compiling the update"); sampling stays eager. Saved weights and checkpoints are the same as without."""
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    """Behaviour-cloning warm start."""

    def __post_init__(self) -> None:
        check_bool("trainer.compile", self.compile)  # Hydra checks the type; this guards direct construction
        for name in ("iterations", "groups_per_iteration", "group_size", "eval_every", "eval_episodes", "devices",
                     "num_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"trainer.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"trainer.max_turns must be >= 1 or null, got {self.max_turns}")
        check_int("trainer.max_nonfinite_updates", self.max_nonfinite_updates, 0)
        check_int("trainer.eval_every_steps", self.eval_every_steps, 1, optional=True)
        if self.on_env_error not in ("skip", "raise"):
            raise ValueError(f"trainer.on_env_error must be 'skip' or 'raise', got {self.on_env_error!r}")
        timeout = self.env_step_timeout_s
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"trainer.env_step_timeout_s must be a number > 0 or null, got {timeout!r}")
        if self.max_env_steps is not None and self.max_env_steps < 1:
            raise ValueError(f"trainer.max_env_steps must be >= 1 or null, got {self.max_env_steps}")
        if self.checkpoint_every < 0:
            raise ValueError(f"trainer.checkpoint_every must be >= 0, got {self.checkpoint_every}")


@dataclass
class TrainConfig:
    env: Any = MISSING
    policy: Any = MISSING
    algo: Any = MISSING
    critic: Any = MISSING
    trainer: Any = MISSING
    world_model: Any = MISSING
    imagination: Any = MISSING
    seed: int = 0
    """The one seed: env seeds, model init, sampling and shuffling derive from it."""
    resume: str | None = None
    """A run folder to continue from its newest checkpoint, in that folder (``experiments/resume.py``)."""


@dataclass
class Resolved:
    """The validated dataclasses of one run."""

    env: EnvConfig
    policy: PolicyConfig
    algo: AlgoConfig
    critic: CriticConfig
    trainer: TrainerConfig
    world_model: WorldModelOptions
    imagination: ImaginationConfig
    seed: int
    resume: str | None = None


def register_configs() -> None:
    # conf/train.yaml: a resumed run's Hydra folder is the run folder, without a new .hydra/ record.
    OmegaConf.register_new_resolver("resume_or", lambda resume, default: default if resume is None else resume,
                                    replace=True)
    OmegaConf.register_new_resolver("hydra_subdir", lambda resume: ".hydra" if resume is None else None,
                                    replace=True)
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    store.store(group="env", name="env_schema", node=EnvConfig)
    store.store(group="policy", name="policy_schema", node=PolicyConfig)
    store.store(group="algo", name="algo_schema", node=AlgoConfig)
    store.store(group="critic", name="critic_schema", node=CriticConfig)
    store.store(group="trainer", name="trainer_schema", node=TrainerConfig)
    store.store(group="world_model", name="world_model_schema", node=WorldModelOptions)
    store.store(group="imagination", name="imagination_schema", node=ImaginationConfig)


def validate(cfg: DictConfig) -> Resolved:
    """Build every dataclass (running its ``__post_init__`` checks) from a composed config, then check
    the saved models it starts from (``world_model.init``, ``critic.init``)."""
    run = validate_groups(cfg, Resolved)
    check_init_keys(run)
    return run
