"""Behaviour-cloning warm start: teach the policy the expert's actions before RL.

The loss is the masked NLL of the expert's action tokens (and closing EOS) given the rendered history;
prompts, observations and padding contribute nothing. Training stops early once ``evaluate(policy)``
reaches ``stop_at_success``, so RL can start from a weak but non-zero policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tqdm.auto import tqdm

from envs.agent import ExpertAgent
from envs.collect import collect
from envs.trajectory import Trajectory
from policy.batch import TokenBatch
from policy.logprobs import scored_token_logprobs
from policy.losses import aggregate


def trim_left_padding(batch: TokenBatch) -> TokenBatch:
    """Drop the leading columns that are padding in every row (a sub-batch is often much shorter)."""
    real_columns = batch.attention_mask.any(dim=0).nonzero()
    start = int(real_columns[0]) if len(real_columns) else batch.input_ids.shape[1]
    return TokenBatch(batch.input_ids[:, start:], batch.attention_mask[:, start:], batch.response_mask[:, start:])


def bc_loss(policy, batch: TokenBatch, *, scored_logits: bool = False) -> torch.Tensor:
    """The behaviour-cloning loss of ``policy`` on ``batch``: masked NLL of the response tokens. With
    ``scored_logits`` the LM head runs only where a response token is predicted (``policy.scored_logits``):
    a large vocabulary's (B, L, V) logits of every position are what fills memory otherwise."""
    if scored_logits:
        batch = batch.to(policy.device)
        logp, _ = scored_token_logprobs(policy.model, batch.input_ids, batch.attention_mask, batch.response_mask)
    else:
        logp, _ = policy.log_probs(batch)  # (B, L)
    return -aggregate(logp, batch.response_mask.to(logp.device), "token-mean")  # mean NLL of the action tokens


def behaviour_clone(
    policy,
    expert_trajectories: Sequence[Trajectory],
    *,
    lr: float = 1e-3,
    batch_size: int = 64,
    max_steps: int = 500,
    evaluate: Callable[[Any], float] | None = None,
    eval_every: int = 25,
    stop_at_success: float | None = None,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    scored_logits: bool = False,
) -> dict[str, Any]:
    """Fit ``policy`` (an LMPolicy) to the expert's turns with AdamW on minibatches drawn with ``seed``.

    ``evaluate(policy) -> success_rate`` runs every ``eval_every`` steps and after the last step (the
    policy in eval mode); training stops at the first evaluation reaching ``stop_at_success``.
    The policy's train/eval mode is restored at the end. ``log`` (e.g. a run's logger) gets a line at
    the start and at every evaluation, so progress shows without a progress bar.
    ``scored_logits``: see ``bc_loss``.
    Returns ``{"losses": per-step losses, "eval_steps", "success_rates", "steps", "stopped_early"}``.
    """
    if lr <= 0 or batch_size < 1 or max_steps < 0 or eval_every < 1:
        raise ValueError(f"behaviour_clone: need lr > 0, batch_size >= 1, max_steps >= 0, eval_every >= 1; got "
                         f"lr={lr}, batch_size={batch_size}, max_steps={max_steps}, eval_every={eval_every}")
    if stop_at_success is not None and evaluate is None:
        raise ValueError("behaviour_clone: stop_at_success needs an evaluate function")
    data, _ = policy.encode(expert_trajectories)
    if len(data) == 0:
        raise ValueError("behaviour_clone: the expert trajectories hold no turns")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)
    history: dict[str, Any] = {"losses": [], "eval_steps": [], "success_rates": [], "steps": 0, "stopped_early": False}
    was_training = policy.model.training
    if log is not None:
        log(f"behaviour cloning: {len(data)} demonstrated turns, at most {max_steps} steps")
    bar = tqdm(range(1, max_steps + 1), desc="behaviour cloning", disable=not progress)
    for step in bar:
        policy.train()
        rows = torch.randint(len(data), (min(batch_size, len(data)),), generator=generator)
        loss = bc_loss(policy, trim_left_padding(data.index(rows)), scored_logits=scored_logits)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        history["losses"].append(loss.item())
        history["steps"] = step
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if evaluate is not None and (step % eval_every == 0 or step == max_steps):
            policy.eval()
            success = float(evaluate(policy))
            history["eval_steps"].append(step)
            history["success_rates"].append(success)
            bar.set_postfix(loss=f"{loss.item():.3f}", success=f"{success:.2f}")
            if log is not None:
                log(f"behaviour cloning: step {step}/{max_steps}, loss {loss.item():.3f}, evaluated {success:.2f}")
            if stop_at_success is not None and success >= stop_at_success:
                history["stopped_early"] = step < max_steps
                break
    bar.close()
    policy.train(was_training)
    return history


def expert_trajectories(
    env_name, *, seeds: Sequence[int], env_kwargs: dict | None = None, max_turns: int | None = None
) -> list[Trajectory]:
    """One episode of the env's scripted expert per env seed in ``seeds``, via ``envs.collect``.

    ``env_name`` is a registered env name or an env factory, whatever ``collect`` accepts.
    """
    return collect(
        ExpertAgent(), env_name, group_size=1, group_seeds=list(seeds),
        max_turns=max_turns, env_kwargs=env_kwargs, progress=False,
    )
