"""Train an LM agent with PPO or a group-baseline method on real and imagined rollouts.

    python -m experiments.train env=hidden_number algo=gigpo seed=1
    python -m experiments.train env=hidden_number algo=grpo imagination=dyna imagination.ratio=0.75

Read top to bottom: build the env, tokenizer and policy; warm-start by behaviour cloning; then
each iteration split the update's groups into real and imagined ones, collect the real ones and
append them to the store, score and refit the world model on the newest real data, imagine the
rest from recent real states, estimate advantages over both, take a clipped policy update, and
log against the number of real environment steps. With ``imagination.ratio=0`` (the default
``imagination=model_free``) no world model is built and the run is the model-free one. Everything
lands in Hydra's run directory: the resolved config, ``metrics.jsonl``, TensorBoard events, the
final policy (and critic, world model), and a ``done`` or ``failed`` marker.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import sys
import time
from collections import deque
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from lightning.fabric import Fabric
from omegaconf import DictConfig
from tqdm.auto import tqdm

from critic import LatentCritic, LatentCriticConfig, TokenCritic, TokenCriticConfig
from envs import EnvFailure, Trajectory, TrajectoryStore, collect, count_env_steps, make
from envs.splits import split_seeds
from experiments.checkpoint import Checkpoint, LoopState, save_checkpoint
from experiments.config import Resolved, register_configs, validate
from experiments.distributed import (
    Collection,
    NullLogger,
    any_rank,
    broadcast_json,
    broadcast_module_,
    check_multi_process,
    check_replicas_agree,
    gather_collection,
    gather_imagined,
    rank_seed,
    rows_of_rank,
    shard,
    value_rows,
    world_size,
)
from experiments.evaluation import evaluate, render_transcript, summarise, training_eval_seeds
from experiments.markers import run_job
from experiments.metrics_logger import MetricsLogger
from experiments.resume import (
    CHECKPOINTS,
    capture_rng,
    config_record,
    count_lines,
    restore_rng,
    resume_config,
    resume_from,
    trajectories_by_id,
)
from experiments.seeding import derive_seed, seed_global_rngs
from experiments.world_model_builder import build_world_model
from imagination.branching import sample_branch_points
from imagination.counterfactual_gigpo import CounterfactualGiGPO
from imagination.gate import ImaginationGate
from imagination.imagine import ImaginedGroups, imagine_groups
from imagination.metrics import format_imagination_summary, imagination_metrics, imagination_summary
from imagination.mixing import scheduled_ratio, split_groups
from imagination.real_branch import RealEnvBrancher
from imagination.refit import refit_and_gate
from imagination.value_expansion import (
    check_value_expansion,
    expanded_returns,
    expansion_branches,
    plan_expansion,
    policy_batch,
)
from policy.algorithms import (
    AlgoConfig,
    TurnRows,
    critic_token_advantages,
    first_rows_mask,
    group_baseline_token_advantages,
    turn_rows,
)
from policy.dynamic_sampling import fill_with_informative_groups
from policy.learner import PPOConfig, PPOLearner
from policy.lm_policy import LMPolicy
from policy.model import build_tiny_lm, build_tiny_tokenizer, load_local_pretrained
from policy.rollout_batch import RolloutBatch, build_rollout_batch
from policy.value_targets import ValueTargets
from policy.warm_start import behaviour_clone, expert_trajectories
from world_model import TurnTokenizer, token_limits
from world_model.lightning_module import fit_world_model
from world_model.metrics import one_step_accuracy

register_configs()
CHUNK_ROWS = 256  # rows per no-grad forward pass when scoring a batch
FULL_PRECISION = ("32-true", "32", "64-true", "64")  # where sampling's log-probs are the learner's (algo.ppo.old_logp)


def build_policy(run: Resolved, vocabulary: list[str], rank: int = 0) -> LMPolicy:
    """A tiny LM over the env's word-level tokenizer, or a local pretrained model directory; each
    process (``rank``) samples from its own stream."""
    if run.policy.pretrained:
        model, tokenizer = load_local_pretrained(run.policy.pretrained)
    else:
        tokenizer = build_tiny_tokenizer(vocabulary)
        model = build_tiny_lm(run.policy, tokenizer, seed=derive_seed(run.seed, "policy-init"))
    return LMPolicy(model, tokenizer, run.policy, seed=rank_seed(derive_seed(run.seed, "sampling"), rank))


def build_critic(run: Resolved, policy: LMPolicy, vocabulary: list[str]) -> torch.nn.Module | None:
    """The critic of a critic-based algorithm, initialised from the run seed.

    ``critic=token`` reads the policy's prompt ids (its tokenizer's vocabulary); ``critic=latent``
    reads the histories through its own word tokenizer over the env's ``vocabulary``, with the env's
    word caps unless ``critic.latent_max_*_words`` set them. The latent critic values whole turns
    only, so it serves ``ppo_turn`` and ``sppo`` but not ``ppo_token``.
    """
    if not run.algo.uses_critic:
        return None
    seed = derive_seed(run.seed, "critic-init")
    if run.critic.name == "token":
        config = TokenCriticConfig(vocab_size=len(policy.tokenizer), **run.critic.token_kwargs())
        return TokenCritic(config, seed=seed)
    if run.algo.value_level == "token":
        raise ValueError(f"critic=latent has no per-token values, which algo={run.algo.name} needs: use critic=token, "
                         "or algo=ppo_turn / algo=sppo with the latent critic")
    limits = token_limits(
        run.env.name, dict(run.env.kwargs), observation=run.critic.latent_max_observation_words,
        action=run.critic.latent_max_action_words,
        option_names=("critic.latent_max_observation_words", "critic.latent_max_action_words"),
    )
    tokenizer = TurnTokenizer.build(vocabulary, limits)
    return LatentCritic(LatentCriticConfig.for_tokenizer(tokenizer, **run.critic.latent_kwargs()), tokenizer, seed=seed)


def learner_config(run: Resolved) -> PPOConfig:
    """The PPO settings, with Dr. GRPO's divisor fixed to the action token budget unless set."""
    ppo = run.algo.ppo
    if ppo.loss_agg == "seq-mean-token-sum-norm" and ppo.loss_scale_factor is None:
        ppo = dataclasses.replace(ppo, loss_scale_factor=float(run.policy.max_action_tokens))
    return ppo


def train(run: Resolved, run_dir: Path) -> dict[str, float]:
    """One training run into ``run_dir``: in this process, or in ``trainer.devices`` spawned ones."""
    trainer = run.trainer
    make(run.env.name, **dict(run.env.kwargs))  # a bad env option fails here, before any process starts
    check_multi_process(run)
    fabric = Fabric(accelerator=trainer.accelerator, devices=trainer.devices, num_nodes=trainer.num_nodes,
                    strategy=trainer.strategy, precision=trainer.precision)
    if world_size(trainer) > 1:  # ddp_spawn: the processes run train_on_rank; rank 0's summary comes back
        return fabric.launch(train_on_rank, run, run_dir)
    return train_on_rank(fabric, run, run_dir)


def train_on_rank(fabric: Fabric, run: Resolved, run_dir: Path) -> dict[str, float]:
    """The loop on one process. With several, each collects its share of the real groups and every
    rank gathers them all (``experiments.distributed``); only rank 0 writes into ``run_dir``."""
    trainer, algo = run.trainer, run.algo
    env_kwargs = dict(run.env.kwargs)
    rank, ranks = fabric.global_rank, fabric.world_size
    rank0 = rank == 0

    env = make(run.env.name, **env_kwargs)
    check_value_expansion(run.imagination.mode, run.imagination.enabled, algo.name, algo.value_level,
                          run.imagination.warmup_iterations)
    seed_global_rngs(derive_seed(run.seed, "global"))  # the loop's own streams never read these
    if algo.ppo.old_logp == "sampling" and trainer.precision not in FULL_PRECISION:
        raise ValueError(f"algo.ppo.old_logp=sampling needs full precision (trainer.precision one of {FULL_PRECISION}), "
                         f"got trainer.precision={trainer.precision}: sampling runs outside the learner's autocast, so "
                         "its log-probs are not the learner's; set algo.ppo.old_logp=recompute")
    # resume=RUN_DIR: continue from the newest checkpoint, with what the killed run wrote after it undone.
    checkpoint = resume_from(run, run_dir, run_dir / "trajectories") if run.resume else None
    policy = build_policy(run, env.vocabulary(), rank)
    critic = build_critic(run, policy, env.vocabulary())
    logger = (MetricsLogger(run_dir, purge_step=checkpoint.loop.real_env_steps + 1 if checkpoint else None) if rank0
              else NullLogger())
    store = TrajectoryStore(run_dir / "trajectories")  # every real rollout, for the world model
    imagination = run.imagination
    world_model = None  # built only when the run imagines: ratio 0 is the model-free run, untouched
    if imagination.enabled or algo.name == "counterfactual_gigpo":
        world_model = build_world_model(run.world_model, run.env.name, env_kwargs, env.vocabulary(),
                                        seed=derive_seed(run.seed, "world-model-init"))
    counterfactual = None  # imagined step groups at every real step (algo=counterfactual_gigpo)
    brancher = None  # the world model's; algo=real_branch_gigpo plays the same groups in the real env
    if algo.name == "real_branch_gigpo":
        brancher = RealEnvBrancher(run.env.name, env_kwargs, algo, max_turns=trainer.max_turns,
                                   observation_words=run.critic.latent_max_observation_words,
                                   action_words=run.critic.latent_max_action_words)
    if algo.name in ("counterfactual_gigpo", "real_branch_gigpo"):
        counterfactual = CounterfactualGiGPO(algo, imagination, world_model, run.env.name, env_kwargs, brancher=brancher,
                                             critic_options=run.critic.latent_kwargs(), max_turns=trainer.max_turns,
                                             seed=derive_seed(run.seed, "counterfactual"))

    def task_seeds(split: str, count: int, *tags: object) -> list[int]:
        """Env seeds whose tasks lie in ``split``: training never sees an evaluation task."""
        return split_seeds(run.env.name, env_kwargs, split, seed=derive_seed(run.seed, *tags), count=count)

    eval_seeds = training_eval_seeds(run.env.name, env_kwargs, run.seed, trainer.eval_episodes)  # the same every time

    def evaluate_policy() -> dict[str, float]:
        # Its own sampling stream: evaluating more or less often never changes training. Rank 0 plays every
        # episode and shares the figures, so the number does not depend on the number of processes.
        if not rank0:
            return broadcast_json(fabric, None)
        result = evaluate(policy.with_seed(derive_seed(run.seed, "eval-sampling")), run.env.name, env_kwargs,
                          seeds=eval_seeds, max_turns=trainer.max_turns)
        return broadcast_json(fabric, result.as_metrics("eval"))

    # 1. Warm start: clone the expert on training tasks until the policy is weak but not hopeless.
    #    Its env steps (expert demonstrations) are reported apart from the RL x-axis.
    warm_start_env_steps = 0
    experts: list[Trajectory] = []
    if trainer.warm_start.enabled and not run.policy.pretrained and checkpoint is None:
        ws = trainer.warm_start
        experts = expert_trajectories(run.env.name, seeds=task_seeds("train", ws.expert_episodes, "expert"),
                                      env_kwargs=env_kwargs, max_turns=trainer.max_turns)
        warm_start_env_steps = count_env_steps(experts)
        clone_eval_seeds = task_seeds("train", ws.eval_episodes, "clone-eval")
        behaviour_clone(
            policy, experts, lr=ws.lr, batch_size=ws.batch_size, max_steps=ws.max_steps, eval_every=ws.eval_every,
            stop_at_success=ws.target_success, seed=derive_seed(run.seed, "clone"), progress=trainer.progress and rank0,
            evaluate=lambda p: evaluate(p.with_seed(derive_seed(run.seed, "clone-eval-sampling")), run.env.name,
                                        env_kwargs, seeds=clone_eval_seeds, max_turns=trainer.max_turns).success_rate,
        )

    # The reference policy of the optional KL penalty is the policy RL starts from.
    ref_model = copy.deepcopy(policy.model).eval() if algo.ppo.kl_coef > 0 else None
    # trainer.compile: the learner steps a compiled view of the same weights (Fabric compiles after its setup
    # and its state dict is the original's); sampling and save_policy read the eager policy.model.
    update_model = torch.compile(policy.model, dynamic=True) if trainer.compile else policy.model
    learner = PPOLearner(fabric, update_model, learner_config(run), seed=derive_seed(run.seed, "minibatches"),
                         critic=critic, ref_model=ref_model, max_nonfinite_updates=trainer.max_nonfinite_updates)

    real_env_steps = 0
    next_ids = {"group": 0, "trajectory": 0}  # ids stay unique across every collection of the run
    gate = ImaginationGate(imagination.gate_threshold)
    recent: deque[Trajectory] = deque(maxlen=imagination.recent_trajectories)  # real states to branch from
    branch_rng = random.Random(derive_seed(run.seed, "branch-points"))
    real_credit, warmup_left, imagined_groups_total, groups_total = 0.0, imagination.warmup_iterations, 0, 0
    world_model_fitted = False
    if world_model is not None and experts and imagination.fit_on_warm_start:  # (never when resuming)
        # The expert demonstrations are real episodes (their steps are reported apart): the world
        # model starts from them, and the gate reads its first score on a held-out tenth.
        experts = [dataclasses.replace(t, group_id=i, trajectory_id=i) for i, t in enumerate(experts)]
        next_ids = {"group": len(experts), "trajectory": len(experts)}
        recent.extend(experts)
        held_out = experts[: max(1, len(experts) // 10)]
        if rank0:  # rank 0 fits and scores; the other ranks take its weights and gate
            store.append(experts)
            fit_world_model(experts[len(held_out):], [], world_model, max_steps=imagination.first_fit_steps,
                            batch_size=imagination.fit_batch_size, lr=imagination.fit_lr,
                            seed=derive_seed(run.seed, "world-model-fit", 0))
            gate_change = gate.update(one_step_accuracy(world_model, held_out).exact_match)
            logger.log_text("imagination/gate", f"gate {gate_change} after the warm-start fit", real_env_steps=0)
        world_model_fitted = True
        broadcast_module_(fabric, world_model)
        gate.is_open = broadcast_json(fabric, gate.is_open)
    # Everything a checkpoint holds besides the counters: weights, optimiser moments, RNG streams.
    modules = {"world_model": world_model, "ref_model": ref_model,
               "counterfactual_critic": counterfactual.critic if counterfactual is not None else None}
    generators, randoms = {"sampling": policy.generator}, {"branch_points": branch_rng}

    def save_run_checkpoint(iteration: int, stopped: bool) -> None:
        """Everything the loop needs to go on after ``iteration``; also a policy folder to evaluate."""
        loop = LoopState(
            iteration=iteration, real_env_steps=real_env_steps, warm_start_env_steps=warm_start_env_steps,
            next_ids=dict(next_ids), history=history, metrics_lines=count_lines(logger.jsonl_path),
            store_trajectories=len(store), elapsed_s=time.monotonic() - start, stopped=stopped,
            imagination={"gate": dataclasses.asdict(gate), "real_credit": real_credit, "warmup_left": warmup_left,
                         "imagined_groups_total": imagined_groups_total, "groups_total": groups_total,
                         "world_model_fitted": world_model_fitted, "recent_ids": [t.trajectory_id for t in recent],
                         "counterfactual_recent_ids": [] if counterfactual is None else
                         [t.trajectory_id for t in counterfactual.recent]},  # its critic's data
        )
        state = {"learner": learner.state_dict(), "rng": capture_rng(generators, randoms),
                 **{name: None if module is None else module.state_dict() for name, module in modules.items()}}
        save_checkpoint(run_dir / CHECKPOINTS, Checkpoint(config_record(run), loop, state),
                        write_extra=lambda folder: save_policy(policy, folder))

    start = time.monotonic()
    if checkpoint is None:
        metrics = evaluate_policy()
        logger.log(metrics, real_env_steps=0, iteration=0)
        history = [{"iteration": 0, "charts/real_env_steps": 0, **metrics}]
        first_iteration = 1
    else:  # resumed: every counter, weight and RNG stream as they were after the checkpoint's iteration
        loop, saved = checkpoint.loop, checkpoint.state
        real_env_steps, warm_start_env_steps, next_ids, history = (
            loop.real_env_steps, loop.warm_start_env_steps, dict(loop.next_ids), loop.history)
        for name, value in loop.imagination.pop("gate").items():
            setattr(gate, name, value)
        real_credit, warmup_left, imagined_groups_total, groups_total, world_model_fitted = (
            loop.imagination[name] for name in ("real_credit", "warmup_left", "imagined_groups_total",
                                                "groups_total", "world_model_fitted"))
        recent.extend(trajectories_by_id(store, loop.imagination["recent_ids"]))
        if counterfactual is not None:
            counterfactual.recent.extend(trajectories_by_id(store, loop.imagination["counterfactual_recent_ids"]))
        learner.load_state_dict(saved["learner"])
        for name, module in modules.items():
            if module is not None:
                module.load_state_dict(saved[name])
        restore_rng(saved["rng"], generators, randoms)
        start = time.monotonic() - loop.elapsed_s
        first_iteration = trainer.iterations + 1 if loop.stopped else loop.iteration + 1

    bar = tqdm(range(first_iteration, trainer.iterations + 1), desc=f"{run.env.name}/{algo.name}",
               initial=first_iteration - 1, total=trainer.iterations, disable=not trainer.progress or not rank0)
    for iteration in bar:
        iteration_start = time.monotonic()
        # 2. How many of the update's groups are real and how many imagined: all real until the
        #    gate opens; then a fully imagined warm-up if asked, then the (scheduled) ratio, with
        #    fractional real groups carried over so the long-run share is the configured one.
        n_real, n_imagined = trainer.groups_per_iteration, 0
        if world_model is not None and gate.is_open:
            if warmup_left > 0:
                n_real, n_imagined, warmup_left = 0, trainer.groups_per_iteration, warmup_left - 1
            else:
                ratio = scheduled_ratio(imagination.ratio, imagination.ratio_end, iteration, trainer.iterations)
                n_real, n_imagined, real_credit = split_groups(trainer.groups_per_iteration, ratio, real_credit)

        # 3. Collect real rollouts on training tasks; groups share their start state. Every env
        #    step counts, also those of groups that dynamic sampling drops. Each process plays its
        #    share of the groups (ids counted from 0), then all gather the iteration's episodes.
        local = Collection(collected=[], kept=[], faults=[], groups_used=0, trajectories_used=0, rounds=0)
        my_groups = shard(n_real, ranks, rank)

        def sample(round_index: int, iteration: int = iteration, local: Collection = local,
                   my_groups: range = my_groups, n_real: int = n_real):
            seeds = task_seeds("train", n_real, "train", iteration, round_index)
            failures: list[EnvFailure] = []  # episodes whose env raised (trainer.on_env_error=skip)
            trajectories = collect(
                policy, run.env.name, env_kwargs=env_kwargs, group_size=trainer.group_size, max_turns=trainer.max_turns, progress=False,
                group_seeds=[seeds[g] for g in my_groups],
                first_group_id=local.groups_used, first_trajectory_id=local.trajectories_used,
                on_env_error=failures.append if trainer.on_env_error == "skip" else None,
            )
            local.groups_used += len(my_groups)
            local.trajectories_used += len(trajectories) + len(failures)  # a failed episode's id stays used
            local.faults.extend(failures)
            for trajectory in trajectories:
                trajectory.iteration, trajectory.policy_version = iteration, learner.num_updates
            local.collected.extend(trajectories)
            return trajectories

        if not my_groups:
            local.kept, local.rounds = [], 0
        elif algo.dynamic_sampling:
            local.kept, local.rounds = fill_with_informative_groups(sample, len(my_groups),
                                                                    max_rounds=1 + algo.max_resample_rounds)
        else:
            local.kept, local.rounds = sample(0), 1
        gathered = gather_collection(fabric, local, first_group=next_ids["group"],
                                     first_trajectory=next_ids["trajectory"], relabelled=algo.dynamic_sampling)
        next_ids["group"] += gathered.groups_used
        next_ids["trajectory"] += gathered.trajectories_used
        collected, trajectories, rounds = gathered.collected, gathered.kept, gathered.rounds
        for fault in gathered.faults if rank0 else []:
            log_fault(logger, run_dir, "faults/env_error", f"iteration {iteration}: {fault}",
                      real_env_steps=real_env_steps)
        if collected and rank0:
            store.append(collected)
        rollout = summarise(collected)  # what the policy achieved, dropped groups included
        real_env_steps += rollout.env_steps
        collect_s = time.monotonic() - iteration_start

        # 4. Model-based: score the world model on the new real episodes (held out: it has not been
        #    fitted on them), open or close the gate, refit on the store's newest real episodes, and
        #    imagine the update's other groups from recent real states.
        model_metrics: dict[str, float] = {}
        imagined = ImaginedGroups([], [], [])
        if world_model is not None:
            model_start = time.monotonic()
            recent.extend(collected)
            if rank0:  # rank 0 scores and refits on its store; the other ranks take its weights and gate
                model_metrics = refit_and_gate(world_model, gate, store, collected, imagination, iteration,
                                               first_fit=not world_model_fitted,
                                               fit_seed=derive_seed(run.seed, "world-model-fit", iteration),
                                               log=lambda text, steps=real_env_steps: logger.log_text(
                                                   "imagination/gate", text, real_env_steps=steps))
            model_metrics, gate.is_open = broadcast_json(fabric, [model_metrics, gate.is_open])
            broadcast_module_(fabric, world_model)
            world_model_fitted = True
            if n_imagined and gate.is_open:
                if imagination.mode == "value_expansion":  # continue this update's real turns, same episode budget
                    branches, group_size = plan_expansion(expansion_branches(trajectories),
                                                          n_imagined * trainer.group_size, branch_rng)
                else:
                    branches, group_size = sample_branch_points(
                        list(recent), n_imagined, start_share=imagination.start_share, rng=branch_rng), trainer.group_size
                imagined = imagine_groups(  # this process's share of the branches; ids counted from 0
                    policy, world_model, run.env.name, env_kwargs,
                    [branches[b] for b in shard(len(branches), ranks, rank)], group_size=group_size,
                    config=imagination, seed=rank_seed(derive_seed(run.seed, "dream", iteration), rank),
                    max_turns=trainer.max_turns,
                )
                imagined = gather_imagined(fabric, imagined, branches, first_group=next_ids["group"],
                                           first_trajectory=next_ids["trajectory"])
                next_ids["group"] += len(imagined.groups)
                next_ids["trajectory"] += len(imagined.trajectories)
                for trajectory in imagined.trajectories:
                    trajectory.iteration, trajectory.policy_version = iteration, learner.num_updates
            imagined_groups_total += len(imagined.groups)
            groups_total += len(imagined.groups) + len({t.group_id for t in trajectories})
            model_metrics.update(imagination_metrics(imagined, len(trajectories),
                                                     imagined_groups_total, groups_total, gate))
            model_metrics["time/model_s"] = time.monotonic() - model_start

        update_start = time.monotonic()
        stats = {}
        # Imagined rows weigh imagined_weight; with value_expansion they stay out and only shape the critic's targets.
        trajectories, weights = policy_batch(trajectories, imagined.trajectories, mode=imagination.mode,
                                             imagined_weight=imagination.imagined_weight)
        if trajectories:  # empty only when dynamic sampling found no informative group
            # 5. Advantages: one row per sampled turn, trained on exactly the sampled ids.
            batch = build_rollout_batch(trajectories, pad_id=policy.pad_token_id, weights=weights)
            rows = turn_rows(batch.trajectories, batch.row_keys, invalid_action_penalty=algo.invalid_action_penalty)
            value = None
            if counterfactual is not None:
                batch, advantages, counterfactual_metrics = counterfactual.advantages(
                    policy, batch, iteration=iteration, gate_open=gate.is_open)
                model_metrics.update(counterfactual_metrics)
                if counterfactual.critic is not None:  # fitted alike on every rank; rank 0's weights rule
                    broadcast_module_(fabric, counterfactual.critic)
                real_env_steps += int(counterfactual_metrics.get("oracle/env_steps", 0))  # the oracle's branches
            elif critic is None:
                advantages = group_baseline_token_advantages(algo, rows, batch.tokens.response_mask)
            else:
                advantages, value = critic_advantages(algo, learner, policy, batch, rows)
                if imagination.mode == "value_expansion" and imagined.trajectories:  # MVE targets on real rows
                    value = dataclasses.replace(value, returns=expanded_returns(
                        value.returns, batch.row_keys, batch.trajectories, imagined, gamma=algo.gamma,
                        invalid_action_penalty=algo.invalid_action_penalty,
                        end_values=lambda states: learner.critic_values(policy.state_prompts(states), CHUNK_ROWS).cpu()))

            # 6. Clipped policy update. Old log-probs: those recorded while sampling (every row of the batch,
            #    real or imagined, was sampled by this policy since its last update), or recomputed by the
            #    learner's own Fabric module (algo.ppo.old_logp).
            old_logp = batch.sampling_logp if algo.ppo.old_logp == "sampling" else None
            tokens, weights = batch.tokens, batch.weights
            mine = rows_of_rank(fabric, len(batch))  # data-parallel: each process trains on its share of the rows
            if mine is not None:
                tokens, advantages, weights, value = tokens.index(mine), advantages[mine], weights[mine], value_rows(
                    value, mine)
                old_logp = None if old_logp is None else old_logp[mine]
            stats = learner.update(tokens, advantages, old_logp=old_logp, weights=weights, value=value)
            check_replicas_agree(fabric, policy.model, iteration)
            if stats.get("losses/nonfinite_steps"):
                log_fault(logger, run_dir, "faults/nonfinite", f"iteration {iteration}: "
                          f"{stats['losses/nonfinite_steps']:.0f} optimizer steps had a non-finite loss or gradient "
                          "and were skipped", real_env_steps=real_env_steps)
        update_s = time.monotonic() - update_start

        # 7. Log against real env steps.
        metrics = {
            "charts/success_rate": rollout.success_rate,
            "charts/episodic_return": rollout.episodic_return,
            "charts/episode_length": rollout.episode_length,
            "charts/invalid_action_rate": rollout.invalid_action_rate,
            "charts/truncated_rate": sum(t.truncated for t in collected) / max(len(collected), 1),
            "charts/collection_rounds": rounds,
            "charts/elapsed_s": time.monotonic() - start,
            "time/collect_s": collect_s,
            "time/update_s": update_s,
            **model_metrics,
            **stats,
        }
        if iteration % trainer.eval_every == 0 or iteration == trainer.iterations:
            metrics.update(evaluate_policy())
        if iteration % trainer.transcripts_every == 0 and trajectories:
            logger.log_text("samples/transcript", render_transcript(trajectories[0]), real_env_steps=real_env_steps)
        logger.log(metrics, real_env_steps=real_env_steps, iteration=iteration)
        history.append({"iteration": iteration, "charts/real_env_steps": real_env_steps, **metrics})
        bar.set_postfix(success=f"{rollout.success_rate:.2f}", steps=real_env_steps)
        out_of_time = trainer.time_budget_s is not None and time.monotonic() - start > trainer.time_budget_s
        out_of_steps = trainer.max_env_steps is not None and real_env_steps >= trainer.max_env_steps
        stop = any_rank(fabric, out_of_time or out_of_steps)  # rank clocks differ: stop together
        if stop and "eval/success_rate" not in metrics:
            final = evaluate_policy()
            logger.log(final, real_env_steps=real_env_steps, iteration=iteration)
            history[-1].update(final)
        if rank0 and trainer.checkpoint_every and iteration % trainer.checkpoint_every == 0:
            save_run_checkpoint(iteration, stopped=stop)
        if stop:
            break

    logger.close()
    if rank0:
        save_policy(policy, run_dir / "policy")
        if critic is not None:  # safetensors + config.json, loadable without the training stack
            critic.save_pretrained(run_dir / "critic")
        if world_model is not None:
            world_model.save_pretrained(run_dir / "world_model")
    summary = {
        "env": run.env.name, "algo": algo.name, "seed": run.seed, "iterations": history[-1]["iteration"],
        "real_env_steps": real_env_steps, "warm_start_env_steps": warm_start_env_steps, "initial_success": history[0]["eval/success_rate"],
        "final_success": history[-1].get("eval/success_rate"), "wall_s": time.monotonic() - start,
    }
    if world_model is not None:
        summary["imagination"] = imagination_summary(history)
        if rank0:
            print(format_imagination_summary(summary["imagination"]))
    if rank0:
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def log_fault(logger: MetricsLogger, run_dir: Path, tag: str, text: str, *, real_env_steps: int) -> None:
    """A fault the run survived: on stderr now, in TensorBoard, and a line of the run's ``faults.log``."""
    tqdm.write(text, file=sys.stderr)
    logger.log_text(tag, text, real_env_steps=real_env_steps)
    with open(run_dir / "faults.log", "a", encoding="utf-8") as handle:
        handle.write(f"{tag}\t{text}\n")


def critic_advantages(
    algo: AlgoConfig, learner: PPOLearner, policy: LMPolicy, batch: RolloutBatch, rows: TurnRows
) -> tuple[torch.Tensor, ValueTargets]:
    """Critic-based advantages and the critic's targets, bootstrapping truncated episodes.

    The critic values each row's state before the turn (``token`` level: before each action token),
    and, for an episode cut off by the turn cap, the state after its last turn.
    """
    states = batch.critic_states()
    truncated = [(i, trajectory) for i, trajectory in enumerate(batch.trajectories) if trajectory.truncated]
    bootstrap = torch.zeros(len(batch))  # (B,) read on each trajectory's last row
    if truncated and algo.value_level != "sequence":
        ends = policy.state_prompts([(trajectory, trajectory.num_turns) for _, trajectory in truncated])
        end_values = learner.critic_values(ends, CHUNK_ROWS).cpu()  # (T,)
        value_of = {i: float(v) for (i, _), v in zip(truncated, end_values, strict=True)}
        bootstrap = torch.tensor([value_of.get(i, 0.0) for i, _ in batch.row_keys])
    if algo.value_level == "token":
        old_values = learner.critic_token_values(batch.tokens, CHUNK_ROWS).cpu()  # (B, L)
    else:
        old_values = learner.critic_values(states, CHUNK_ROWS).cpu()  # (B,) values, or logits for sppo
    advantages, returns = critic_token_advantages(algo, rows, batch.tokens.response_mask, old_values,
                                                  bootstrap=bootstrap)
    if algo.value_level == "sequence":
        return advantages, ValueTargets("sequence", returns, states=states, mask=first_rows_mask(rows))
    return advantages, ValueTargets(algo.value_level, returns, old_values=old_values,
                                    states=None if algo.value_level == "token" else states)


def save_policy(policy: LMPolicy, folder: Path) -> None:
    """A Hugging Face model directory (safetensors + config + tokenizer): loadable, never unpickled."""
    policy.model.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)


@hydra.main(config_path="conf", config_name="train", version_base=None)
def main(cfg: DictConfig) -> None:
    if cfg.resume is not None:  # the saved config, or a refusal naming the keys the command line changes
        cfg = resume_config(cfg, list(HydraConfig.get().overrides.task), validate)
    run_job(cfg, validate, train)


if __name__ == "__main__":
    main()
