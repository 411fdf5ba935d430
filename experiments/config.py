"""Structured Hydra configs: the schema every YAML under ``conf/`` is checked against.

Groups: ``env/``, ``policy/``, ``algo/``, ``critic/``, ``trainer/``, ``world_model/``, ``imagination/`` and optional ``experiment/`` presets. A
typo'd key or a wrong type fails at start with Hydra's message; ``validate`` then builds the
dataclasses so each ``__post_init__`` checks its ranges, naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from imagination.config import ImaginationConfig
from policy.advantages.config import AlgoConfig
from policy.config import PolicyConfig

CRITICS = ("token", "latent")


@dataclass
class EnvConfig:
    name: str = MISSING
    """An environment name known to ``envs.make`` (hidden_number, frozen_lake, sokoban, minishop)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword options of that environment; unknown ones fail at start with the list of valid ones."""


def check_int(key: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}{' or null' if optional else ''}, got {value!r}")


@dataclass
class WorldModelOptions:
    """Sizes of the world model (``WorldModelConfig.for_tokenizer`` keywords) and its word caps."""

    latent_size: int = 128
    """Size D of the history latent."""
    num_members: int = 5
    """Ensemble members K; 1 gives no disagreement."""
    head_hidden: int = 64
    """Hidden width of each member's reward and done heads."""
    embed_size: int = 64
    """Encoder: width of token embeddings and convolutions."""
    feature_size: int = 128
    """Encoder: width of one row's feature, the GRU's input."""
    conv_layers: int = 2
    """Encoder: residual convolution blocks (0: none)."""
    model_size: int = 64
    """Decoder: width of each member's Transformer decoder."""
    num_layers: int = 2
    """Decoder: blocks per member."""
    num_heads: int = 4
    """Decoder: attention heads; must divide model_size."""
    latent_slots: int = 8
    """Decoder: memory vectors cut from the latent."""
    max_observation_words: int | None = None
    """Words kept of each observation; None uses the env's own cap (``default_token_limits``)."""
    max_action_words: int | None = None
    """Words kept of each action; None uses the env's own cap."""

    def __post_init__(self) -> None:
        for name in ("latent_size", "num_members", "head_hidden", "embed_size", "feature_size", "model_size",
                     "num_layers", "num_heads", "latent_slots"):
            check_int(f"world_model.{name}", getattr(self, name), 1)
        check_int("world_model.conv_layers", self.conv_layers, 0)
        for name in ("max_observation_words", "max_action_words"):
            check_int(f"world_model.{name}", getattr(self, name), 1, optional=True)
        if self.model_size % self.num_heads:
            raise ValueError(f"world_model.num_heads ({self.num_heads}) must divide world_model.model_size "
                             f"({self.model_size})")

    def config_kwargs(self) -> dict[str, Any]:
        """``WorldModelConfig.for_tokenizer`` keywords."""
        return {
            "latent_size": self.latent_size,
            "num_members": self.num_members,
            "head_hidden": self.head_hidden,
            "encoder": {"embed_size": self.embed_size, "feature_size": self.feature_size,
                        "conv_layers": self.conv_layers},
            "decoder": {"model_size": self.model_size, "num_layers": self.num_layers, "num_heads": self.num_heads,
                        "latent_slots": self.latent_slots},
        }


@dataclass
class CriticConfig:
    name: str = "token"
    """Which critic values states for the critic-based algorithms: ``token``, a small decoder over the
    prompt ids the policy saw (ppo_turn, ppo_token, sppo); ``latent``, the world model's history
    encoder with a value head, reading the episode so far (ppo_turn, sppo; it has no per-token values)."""
    hidden_size: int = 32
    """Width of the token critic's decoder."""
    num_layers: int = 1
    """Decoder blocks of the token critic."""
    num_heads: int = 2
    """Attention heads of the token critic; must divide hidden_size."""
    intermediate_size: int = 64
    """Width of each block's MLP."""
    latent_size: int = 64
    """Latent critic: size D of the history latent (the GRU state)."""
    latent_embed_size: int = 32
    """Latent critic: width of its token embeddings and convolutions."""
    latent_feature_size: int = 64
    """Latent critic: width of one turn's feature, the GRU's input."""
    latent_conv_layers: int = 2
    """Latent critic: residual convolution blocks over each turn's words (0: none)."""
    latent_head_hidden_size: int = 64
    """Latent critic: hidden width of the value head's MLP (0: a linear head)."""
    latent_max_observation_words: int | None = None
    """Latent critic: words kept of each observation or tool result; None uses the env's own cap
    (``world_model.default_token_limits``, which cuts no observation the env can emit)."""
    latent_max_action_words: int | None = None
    """Latent critic: words kept of each action; None uses the env's own cap."""

    def __post_init__(self) -> None:
        if self.name not in CRITICS:
            raise ValueError(f"critic.name must be one of {CRITICS}, got {self.name!r}")
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "latent_size", "latent_embed_size",
                     "latent_feature_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"critic.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("latent_conv_layers", "latent_head_hidden_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"critic.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("latent_max_observation_words", "latent_max_action_words"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"critic.{name} must be >= 1 or null, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"critic.num_heads ({self.num_heads}) must divide critic.hidden_size ({self.hidden_size})")

    def token_kwargs(self) -> dict[str, int]:
        """The token critic's shape, as ``TokenCriticConfig`` keywords."""
        return {"hidden_size": self.hidden_size, "num_layers": self.num_layers, "num_heads": self.num_heads,
                "intermediate_size": self.intermediate_size}

    def latent_kwargs(self) -> dict[str, int]:
        """The latent critic's shape, as ``LatentCriticConfig.for_tokenizer`` keywords."""
        return {"latent_size": self.latent_size, "head_hidden_size": self.latent_head_hidden_size,
                "embed_size": self.latent_embed_size, "feature_size": self.latent_feature_size,
                "conv_layers": self.latent_conv_layers}


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
    cache_dir: str | None = None
    """A folder shared by runs: the first run of an (env, policy, warm-start options, seed) saves its
    cloned weights there and later runs load them instead of cloning (``experiments/warm_start_cache.py``)."""

    def __post_init__(self) -> None:
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
    """Iterations between evaluations on held-out seeds."""
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
    """Iterations between checkpoints in ``checkpoints/iteration_N/`` (0: none, only the final ``policy/``).
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
    compile: bool = False
    """``torch.compile`` the policy for the learner's update (its old log-prob pass and minibatch steps).
    Compiling costs about a minute of CPU up front, so it pays off only on long runs (README,
    "Compiling the update"); sampling stays eager. Saved weights and checkpoints are the same as without."""
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    """Behaviour-cloning warm start."""

    def __post_init__(self) -> None:
        if not isinstance(self.compile, bool):  # Hydra checks the type; this guards direct construction
            raise ValueError(f"trainer.compile must be true or false, got {self.compile!r}")
        for name in ("iterations", "groups_per_iteration", "group_size", "eval_every", "eval_episodes", "devices",
                     "num_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"trainer.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"trainer.max_turns must be >= 1 or null, got {self.max_turns}")
        check_int("trainer.max_nonfinite_updates", self.max_nonfinite_updates, 0)
        if self.on_env_error not in ("skip", "raise"):
            raise ValueError(f"trainer.on_env_error must be 'skip' or 'raise', got {self.on_env_error!r}")
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
    """Build every dataclass (running its ``__post_init__`` checks) from a composed config."""
    return Resolved(
        env=OmegaConf.to_object(cfg.env),
        policy=OmegaConf.to_object(cfg.policy),
        algo=OmegaConf.to_object(cfg.algo),
        critic=OmegaConf.to_object(cfg.critic),
        trainer=OmegaConf.to_object(cfg.trainer),
        world_model=OmegaConf.to_object(cfg.world_model),
        imagination=OmegaConf.to_object(cfg.imagination),
        seed=int(cfg.seed),
        resume=cfg.resume,
    )
