"""The builders of a training run: everything ``experiments/train.py`` makes once before its loop.

``build_run`` makes them in order: the policy, the critic, the world model and the step-group
estimator, the warm start (behaviour cloning on expert demonstrations) and the learner, into
``RunParts``, what the loop's phases read; ``fit_on_experts`` is the world model's first fit on
those demonstrations. Each component draws its weights and samples from its own stream derived
from the run's one seed (``envs.seeding.derive_seed``), so building in another order changes
nothing. This module never imports ``experiments.train``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from lightning.fabric import Fabric

from critic import LatentCritic, LatentCriticConfig, TokenCritic, TokenCriticConfig
from envs import RandomAgent, Trajectory, TrajectoryStore, collect, count_env_steps, make
from envs.registry import capabilities
from envs.seeding import derive_seed, seed_global_rngs
from envs.splits import split_seeds
from experiments.checkpoint import Checkpoint
from experiments.config import Resolved
from experiments.distributed import NullLogger, broadcast_json, broadcast_module_, rank_seed
from experiments.evaluation import evaluate, training_eval_seeds
from experiments.init_models import Imported, builds_world_model, model_tokenizers, start_from_saved
from experiments.loop_options import check_loop_options
from experiments.loop_progress import LoopProgress
from experiments.metrics_logger import MetricsLogger
from experiments.phase_record import PhaseRecord
from experiments.resume import resume_from
from experiments.warm_start_cache import load_check_steps, load_warm_start, save_warm_start, warm_start_inputs
from experiments.world_model_builder import build_world_model
from imagination.refit import fit_on_demonstrations
from imagination.step_groups.counterfactual_gigpo import CounterfactualGiGPO
from imagination.step_groups.real_branch import RealEnvBrancher
from policy.chat_preamble import run_preamble
from policy.config import PPOConfig
from policy.env_tokenizer import env_tokenizer
from policy.learner import PPOLearner
from policy.lm_policy import LMPolicy
from policy.lora import AdaptersOff, add_lora
from policy.model import build_tiny_lm, load_pretrained
from policy.transcripts import transcript_trajectories
from policy.warm_start import behaviour_clone, expert_trajectories
from world_model import TurnTokenizer, token_limits
from world_model.metrics import one_step_accuracy
from world_model.protocol import WorldModelLike

log = logging.getLogger(__name__)  # Hydra writes it to the run's train.log, progress bar or not


@dataclass
class RunParts:
    """What one process builds once and every phase of the loop reads. What changes from one
    iteration to the next is in ``LoopProgress``."""

    fabric: Fabric
    run: Resolved
    run_dir: Path
    env_kwargs: dict[str, Any]
    policy: LMPolicy
    critic: torch.nn.Module | None
    learner: PPOLearner
    ref_model: torch.nn.Module | None
    world_model: WorldModelLike | None
    counterfactual: CounterfactualGiGPO | None
    store: TrajectoryStore
    logger: MetricsLogger | NullLogger
    eval_seeds: list[int]
    imported: dict[str, Imported] = field(default_factory=dict)
    """The saved models the run started from (``world_model.init``, ``critic.init``), by name."""

    @property
    def rank0(self) -> bool:
        return self.fabric.global_rank == 0


def build_run(fabric: Fabric, run: Resolved, run_dir: Path) -> tuple[RunParts, WarmStart, Checkpoint | None]:
    """Everything one process builds once (``experiments/build.py``), 1. the warm start, and the
    checkpoint to resume from (``resume=RUN_DIR``; None for a fresh run)."""
    trainer, env_kwargs = run.trainer, dict(run.env.kwargs)
    rank0 = fabric.global_rank == 0
    env = make(run.env.name, **env_kwargs)
    check_loop_options(run)
    seed_global_rngs(derive_seed(run.seed, "global"))  # the loop's own streams never read these
    # resume=RUN_DIR: continue from the newest checkpoint, with what the killed run wrote after it undone.
    checkpoint = resume_from(run, run_dir, run_dir / "trajectories") if run.resume else None
    policy = build_policy(run, env.vocabulary(), fabric.global_rank)
    critic = build_critic(run, policy, env.vocabulary())
    logger = (MetricsLogger(run_dir, purge_step=checkpoint.loop.real_env_steps + 1 if checkpoint else None) if rank0
              else NullLogger())
    store = TrajectoryStore(run_dir / "trajectories")  # every real rollout, for the world model
    world_model, counterfactual = build_model_based(run, env_kwargs, env.vocabulary(), fabric.device)
    imported = start_from_saved_models(run, policy, critic, world_model)
    eval_seeds = training_eval_seeds(run.env.name, env_kwargs, run.seed, trainer.eval_episodes)  # the same every time
    warm = WarmStart(experts=[], check_steps=0)  # no warm start: no env steps (a resume restores its own)
    if (skipped := warm_start_skipped(run, resuming=checkpoint is not None)) is None:
        warm = warm_start(run, env_kwargs, policy, progress=trainer.progress and rank0)  # 1.
    else:
        log.info(f"warm start skipped: {skipped}")
    learner, ref_model = build_learner(fabric, run, policy, critic)
    parts = RunParts(fabric, run, run_dir, env_kwargs, policy, critic, learner, ref_model, world_model,
                     counterfactual, store, logger, eval_seeds, imported)
    return parts, warm, checkpoint


def build_policy(run: Resolved, vocabulary: list[str], rank: int = 0) -> LMPolicy:
    """A tiny LM over the env's tokenizer (``policy.tokenizer``), or a pretrained model (a local folder, a GGUF
    file or a packaged model: ``policy.model_source``); each
    process (``rank``) samples from its own stream."""
    adapters = None  # policy.lora: the PeftModel whose adapters the policy's model carries
    # a pretrained policy's chat prompt opens with a system message and few-shot turns
    preamble = run_preamble(run.env.name, dict(run.env.kwargs), run.policy, run_seed=run.seed,
                            max_turns=run.trainer.max_turns)
    if run.policy.pretrained:
        model, tokenizer = load_pretrained(run.policy.pretrained, run.policy.model_cache_dir)
        if run.policy.lora.rank > 0:
            adapters = add_lora(model, run.policy.lora, seed=derive_seed(run.seed, "lora-init"))
            model = adapters.base_model.model  # the same model, adapters injected: what samples and trains
    else:
        tokenizer = env_tokenizer(run.policy.tokenizer, run.env.name, dict(run.env.kwargs), vocabulary)
        model = build_tiny_lm(run.policy, tokenizer, seed=derive_seed(run.seed, "policy-init"))
    return LMPolicy(model, tokenizer, run.policy, seed=rank_seed(derive_seed(run.seed, "sampling"), rank),
                    adapters=adapters, **preamble)


def build_critic(run: Resolved, policy: LMPolicy, vocabulary: list[str]) -> torch.nn.Module | None:
    """The critic of a critic-based algorithm, initialised from the run seed.

    ``critic=token`` reads the policy's prompt ids (its tokenizer's vocabulary); ``critic=latent``
    reads the histories through its own word tokenizer over the env's ``vocabulary``, with the env's
    word caps unless ``critic.latent.max_*_words`` set them. The latent critic values whole turns
    only, so it serves ``ppo_turn`` and ``sppo`` but not ``ppo_token``.
    """
    if not run.algo.uses_critic:
        return None
    seed = derive_seed(run.seed, "critic-init")
    if run.critic.name == "token":
        config = TokenCriticConfig(vocab_size=len(policy.tokenizer), **dataclasses.asdict(run.critic.token))
        return TokenCritic(config, seed=seed)
    if run.algo.value_level == "token":
        raise ValueError(f"critic=latent has no per-token values, which algo={run.algo.name} needs: use critic=token, "
                         "or algo=ppo_turn / algo=sppo with the latent critic")
    limits = token_limits(
        run.env.name, dict(run.env.kwargs), observation=run.critic.latent.max_observation_words,
        action=run.critic.latent.max_action_words,
        option_names=("critic.latent.max_observation_words", "critic.latent.max_action_words"),
    )
    tokenizer = TurnTokenizer.build(vocabulary, limits)
    return LatentCritic(LatentCriticConfig.from_section(tokenizer, run.critic.latent), tokenizer, seed=seed)


def start_from_saved_models(run: Resolved, policy: LMPolicy, critic: torch.nn.Module | None,
                            world_model: WorldModelLike | None) -> dict[str, Imported]:
    """Load ``critic.init`` and ``world_model.init`` into the freshly built models (checked against the
    run's env and each model's tokenizer; ``experiments/init_models.py``)."""
    imported = {}
    for name, model, path in (("world_model", world_model, run.world_model.init), ("critic", critic, run.critic.init)):
        if path is not None and model is not None:  # validation refused an init without its model
            imported[name] = start_from_saved(model, path, name, run.env.name, dict(run.env.kwargs),
                                              model_tokenizers(model, policy.tokenizer))
            log.info(f"{name} starts from {imported[name].folder}: fitted on {imported[name].fitted_on.real_steps} "
                     f"real and {imported[name].fitted_on.expert_steps} expert steps")
    return imported


def build_model_based(
    run: Resolved, env_kwargs: dict[str, Any], vocabulary: list[str], device: torch.device
) -> tuple[WorldModelLike | None, CounterfactualGiGPO | None]:
    """The world model, built only when the run imagines (ratio 0 is the model-free run, untouched) or
    its algorithm needs one, on ``device`` (the trainer's: it fits and imagines on the accelerator);
    and the step groups of ``counterfactual_gigpo`` (imagined at every real step) or
    ``real_branch_gigpo`` (the same groups played in the real env)."""
    algo = run.algo
    world_model = None
    if builds_world_model(run):
        world_model = build_world_model(run.world_model, run.env.name, env_kwargs, vocabulary,
                                        seed=derive_seed(run.seed, "world-model-init"), device=device)
    counterfactual = None
    brancher = None  # the world model's; algo=real_branch_gigpo plays the same groups in the real env
    if algo.name == "real_branch_gigpo":
        brancher = RealEnvBrancher(run.env.name, env_kwargs, algo, max_turns=run.trainer.max_turns,
                                   observation_words=run.critic.latent.max_observation_words,
                                   action_words=run.critic.latent.max_action_words)
    if algo.name in ("counterfactual_gigpo", "real_branch_gigpo"):
        counterfactual = CounterfactualGiGPO(algo, run.imagination, world_model, run.env.name, env_kwargs,
                                             brancher=brancher, critic_options=run.critic.latent,
                                             max_turns=run.trainer.max_turns,
                                             seed=derive_seed(run.seed, "counterfactual"))
    return world_model, counterfactual


def learner_config(run: Resolved) -> PPOConfig:
    """The PPO settings, with Dr. GRPO's divisor fixed to the action token budget unless set."""
    ppo = run.algo.ppo
    if ppo.loss_agg == "seq-mean-token-sum-norm" and ppo.loss_scale_factor is None:
        ppo = dataclasses.replace(ppo, loss_scale_factor=float(run.policy.max_action_tokens))
    return ppo


def build_learner(
    fabric: Fabric, run: Resolved, policy: LMPolicy, critic: torch.nn.Module | None
) -> tuple[PPOLearner, torch.nn.Module | None]:
    """The PPO learner and the reference policy of its optional KL penalty: the policy RL starts from,
    so it is built after the warm start. A LoRA policy's reference is its own model with the adapters
    off (no copy, nothing of its own to checkpoint: None is returned for it)."""
    ref_model = None
    if run.algo.ppo.kl_coef > 0:
        ref_model = AdaptersOff(policy.adapters) if policy.adapters is not None else copy.deepcopy(policy.model).eval()
    # trainer.compile: the learner steps a compiled view of the same weights (Fabric compiles after its setup
    # and its state dict is the original's); sampling and save_policy read the eager policy.model.
    update_model = torch.compile(policy.model, dynamic=True) if run.trainer.compile else policy.model
    learner = PPOLearner(fabric, update_model, learner_config(run), seed=derive_seed(run.seed, "minibatches"),
                         critic=critic, ref_model=ref_model, max_nonfinite_updates=run.trainer.max_nonfinite_updates,
                         scored_logits=run.policy.scored_logits)
    return learner, None if isinstance(ref_model, AdaptersOff) else ref_model


def task_seeds(run: Resolved, env_kwargs: dict[str, Any], split: str, count: int, *tags: object) -> list[int]:
    """Env seeds whose tasks lie in ``split``: training never sees an evaluation task."""
    return split_seeds(run.env.name, env_kwargs, split, seed=derive_seed(run.seed, *tags), count=count)


@dataclass
class WarmStart:
    """What the warm start hands the loop: the demonstrations it cloned (their env steps are reported
    apart from the RL x-axis) and the env steps of its success checks (None: loaded from a cache
    folder saved before they were recorded, so unknown)."""

    experts: list[Trajectory]
    check_steps: int | None


def warm_start_skipped(run: Resolved, resuming: bool) -> str | None:
    """Why this run has no warm start (for the log), or None when it clones."""
    if resuming:
        return "resuming: the checkpoint holds the policy"
    if not run.trainer.warm_start.enabled:
        return "trainer.warm_start.enabled=false"
    return None


def warm_start(run: Resolved, env_kwargs: dict[str, Any], policy: LMPolicy, *, progress: bool) -> WarmStart:
    """1. Warm start: clone the expert (or transcripts, or random well-formed actions) on training tasks
    until the policy is weak but not hopeless. Every ``eval_every`` cloning steps a success check plays
    ``eval_episodes`` episodes on training tasks; their env steps go on the ledger."""
    ws, max_turns = run.trainer.warm_start, run.trainer.max_turns
    experts = demonstrations(run, env_kwargs)
    cache_inputs = warm_start_inputs(run.env.name, env_kwargs, run.policy, ws, max_turns, run.seed)
    if ws.transcripts is not None:  # the file's content, not only its name, decides the cloned weights
        cache_inputs["transcripts_sha256"] = hashlib.sha256(Path(ws.transcripts).read_bytes()).hexdigest()
    if ws.cache_dir is not None and (folder := load_warm_start(ws.cache_dir, cache_inputs, policy.model)) is not None:
        log.info(f"warm start: the cloned policy of {folder}")
        return WarmStart(experts, load_check_steps(folder))
    clone_eval_seeds = task_seeds(run, env_kwargs, "train", ws.eval_episodes, "clone-eval")
    check_steps: list[int] = []  # one entry per success check

    def score(p: LMPolicy) -> float:  # success, or for a format-only warm start the share of valid actions
        result = evaluate(p.with_seed(derive_seed(run.seed, "clone-eval-sampling")), run.env.name, env_kwargs,
                          seeds=clone_eval_seeds, max_turns=max_turns)
        check_steps.append(result.env_steps)
        return 1.0 - result.invalid_action_rate if ws.random_actions else result.success_rate

    behaviour_clone(
        policy, experts, lr=ws.lr, batch_size=ws.batch_size, max_steps=ws.max_steps, eval_every=ws.eval_every,
        stop_at_success=ws.target_valid if ws.random_actions else ws.target_success,
        seed=derive_seed(run.seed, "clone"), progress=progress, log=log.info, evaluate=score,
        scored_logits=run.policy.scored_logits,
    )
    if ws.cache_dir is not None:
        save_warm_start(ws.cache_dir, cache_inputs, policy.model, check_steps=sum(check_steps))
    return WarmStart(experts, sum(check_steps))


def demonstrations(run: Resolved, env_kwargs: dict[str, Any]) -> list[Trajectory]:
    """What the warm start clones: the recorded transcripts when given, random well-formed actions when
    asked, else the env's scripted expert on training tasks; an env with none is refused with the ways out."""
    ws = run.trainer.warm_start
    if ws.transcripts is not None:
        return transcript_trajectories(ws.transcripts, run.env.name)
    offers = capabilities(run.env.name, **env_kwargs)
    seeds = task_seeds(run, env_kwargs, "train", ws.expert_episodes, "expert")
    if ws.random_actions:
        if not offers.random_action:
            raise ValueError(f"trainer.warm_start.random_actions: env {run.env.name} {env_kwargs} has no random_action")
        return collect(RandomAgent(derive_seed(run.seed, "random-demonstrations")), run.env.name, group_size=1,
                       group_seeds=seeds, max_turns=run.trainer.max_turns, env_kwargs=env_kwargs, progress=False)
    if not offers.expert:
        raise ValueError(f"env {run.env.name} {env_kwargs} has no scripted expert to warm-start from: set "
                         "trainer.warm_start.transcripts=PATH.jsonl (recorded episodes), trainer.warm_start."
                         "random_actions=true (the action format only) or trainer.warm_start.enabled=false")
    return expert_trajectories(run.env.name, seeds=seeds, env_kwargs=env_kwargs, max_turns=run.trainer.max_turns)


def fit_on_experts(parts: RunParts, progress: LoopProgress, experts: list[Trajectory]) -> PhaseRecord:
    """The expert demonstrations are real episodes (their steps are reported apart): the world model
    starts from them, and the gate reads its first score on the held-out ones (a tenth, or
    ``imagination.first_fit_holdout``'s share, which the fit then also stops early on). They take the run's
    first ids; the returned record says so, and what was fitted, for the loop to apply."""
    imagination, world_model = parts.run.imagination, parts.world_model
    experts = [dataclasses.replace(t, group_id=i, trajectory_id=i) for i, t in enumerate(experts)]
    gate = dataclasses.replace(progress.gate)  # moved here; the loop takes its new state from the record
    if parts.rank0:  # rank 0 fits and scores; the other ranks take its weights and gate
        parts.store.append(experts)
        held_out, fit = fit_on_demonstrations(world_model, experts, imagination,
                                              seed=derive_seed(parts.run.seed, "world-model-fit", 0))
        gate_change = gate.update(one_step_accuracy(world_model, held_out).exact_match)
        parts.logger.log_text("imagination/gate", f"gate {gate_change} after the warm-start fit", real_env_steps=0)
        if imagination.first_fit_holdout is not None:  # train.log and TensorBoard: how early it stopped
            took = f"the warm-start fit took {fit['steps']} of its {imagination.first_fit_steps} steps (first_fit_holdout)"
            log.info(took)
            parts.logger.log_text("world_model/fit", took, real_env_steps=0)
    broadcast_module_(parts.fabric, world_model)
    return PhaseRecord(groups=len(experts), trajectories=len(experts), recent=experts,
                       gate_open=broadcast_json(parts.fabric, gate.is_open), world_model_fitted=True,
                       world_model_expert_steps=count_env_steps(experts))  # stored: every refit includes them
