"""The LoRA update's cost: Reverie's ``PPOLearner`` on a fixed batch of sampled rows.

The rows are one group's sampled actions (``benchmarks.llm_sampling_cost``): one prompt, each row's
sampled ids, GRPO advantages from fixed random rewards (normalised within the group), and old
log-probs that are the recorded sampling ones shifted by a fixed random amount, so that the clip is
exercised and the loss is not just the mean advantage. One update is one pass over the rows as one
minibatch (one optimizer step), ``token-mean`` aggregation, no KL, no entropy bonus: the settings
under which TRL's GRPOTrainer (``loss_type="bnpo"``, ``beta=0``) computes the same loss
(``benchmarks.llm_trl_update``). Tokens per second counts every non-padding token of the rows (prompt
and action) once per update.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from lightning.fabric import Fabric

from benchmarks.llm_sampling_cost import Timed, timed
from policy.batch import TokenBatch
from policy.config import PPOConfig
from policy.encode import left_pad
from policy.learner import PPOLearner
from policy.lm_policy import Generation

OLD_LOGP_SHIFT = 0.3  # the old log-probs move by up to this much, so some ratios leave [0.8, 1.2]


@dataclass(frozen=True)
class UpdateRows:
    """One group's rows, in Reverie's layout (left-padded prompt + action) and as plain parts for TRL."""

    batch: TokenBatch  # (B, L)
    advantages: torch.Tensor  # (B, L), each row's advantage on its action tokens, 0 elsewhere
    old_logp: torch.Tensor  # (B, L), 0 off the action tokens
    prompt: list[int]  # the shared prompt ids
    actions: list[list[int]]  # each row's sampled ids (EOS included when sampled)
    row_advantages: torch.Tensor  # (B,)
    action_old_logp: list[list[float]]  # each row's old log-probs, one per action id

    @property
    def tokens(self) -> int:
        """Non-padding tokens of the rows."""
        return int(self.batch.attention_mask.sum())


def group_advantages(rows: int, seed: int) -> torch.Tensor:
    """(B,) GRPO advantages of fixed random rewards: (r - mean) / (std + 1e-6) over the group."""
    rewards = torch.rand(rows, generator=torch.Generator().manual_seed(seed))
    return (rewards - rewards.mean()) / (rewards.std() + 1e-6)


def update_rows(generation: Generation, pad: int, eos: int, seed: int) -> UpdateRows:
    """The update's rows from one group's generation (every row conditioned on the same prompt)."""
    if len({tuple(p) for p in generation.prompt_ids}) != 1:
        raise ValueError("update_rows: the rows must share one prompt (one group)")
    sampled = generation.sampled_actions(eos)
    generator = torch.Generator().manual_seed(seed + 1)
    actions = [list(s.action_ids) for s in sampled]
    old = [[lp + OLD_LOGP_SHIFT * (2 * float(torch.rand((), generator=generator)) - 1) for lp in s.logprobs]
           for s in sampled]
    prompt = list(sampled[0].prompt_ids)
    input_ids, attention_mask = left_pad([prompt + a for a in actions], pad)  # (B, L)
    width = input_ids.shape[1]
    response = torch.zeros(input_ids.shape)  # (B, L)
    old_logp = torch.zeros(input_ids.shape)  # (B, L)
    for b, action in enumerate(actions):  # each row ends at the last column
        response[b, width - len(action):] = 1.0
        old_logp[b, width - len(action):] = torch.tensor(old[b])
    row_advantages = group_advantages(len(actions), seed)
    return UpdateRows(TokenBatch(input_ids, attention_mask, response), row_advantages[:, None] * response,
                      old_logp, prompt, actions, row_advantages, old)


def reverie_learner(model: torch.nn.Module, rows: int, lr: float, scored_logits: bool) -> PPOLearner:
    """A learner that takes one optimizer step per update over ``rows`` rows (GRPO's loss, token-mean)."""
    cfg = PPOConfig(epochs=1, minibatch_size=rows, lr=lr, loss_agg="token-mean", entropy_coef=0.0, kl_coef=0.0,
                    max_grad_norm=1.0)
    fabric = Fabric(accelerator="cpu", devices=1, precision="32-true")
    return PPOLearner(fabric, model, cfg, seed=0, scored_logits=scored_logits)


def reverie_updates(model: torch.nn.Module, data: UpdateRows, *, lr: float, repeats: int,
                    scored_logits: bool) -> tuple[float, Timed]:
    """The first update's policy loss (at the given weights) and the time of ``repeats`` more updates (the
    first is a warm-up), on a copy of ``model`` (the caller's weights stay as they were)."""
    learner = reverie_learner(copy.deepcopy(model), len(data.batch), lr, scored_logits)

    def update() -> float:
        return learner.update(data.batch, data.advantages, old_logp=data.old_logp)["losses/policy_loss"]

    first = update()
    _, wall, cpu = timed(lambda: [update() for _ in range(repeats)])
    return first, Timed(data.tokens * repeats, wall, cpu)
