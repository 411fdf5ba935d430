"""TRL's GRPOTrainer loss on the same rows and LoRA as Reverie's update (``benchmarks.llm_update_cost``).

TRL is optional (``pip install -e '.[bench]'``); ``trl_missing`` says why this part cannot run. The
trainer is built on a copy of the LoRA policy (its patched forward and its own optimizer touch nothing of
Reverie's), then each update is what one GRPOTrainer step does with the loss: ``compute_loss`` on the
rows, backward, gradient clip at 1.0, one Adam step. Its loss is ``loss_type="bnpo"`` (the sum of the
per-token clipped losses over every action token of the batch, over their count: Reverie's
``token-mean``) with ``beta=0`` and both clips 0.2. The inputs are TRL's layout: the shared prompt ids
(no padding: one group), the completions right-padded, the advantages (B,) and the same old log-probs.
"""

from __future__ import annotations

import copy
import importlib.util
import tempfile

import torch

from benchmarks.llm_sampling_cost import Timed, timed
from benchmarks.llm_update_cost import UpdateRows


def trl_missing() -> str | None:
    """None when ``trl`` imports; otherwise the reason (to print)."""
    if importlib.util.find_spec("trl") is None:
        return "not installed (pip install -e '.[bench]' adds it)"
    return None


def trl_inputs(data: UpdateRows, pad: int) -> dict[str, torch.Tensor]:
    """GRPOTrainer's per-step inputs for the rows: prompt (B, P), completions right-padded (B, T)."""
    rows, width = len(data.actions), max(len(a) for a in data.actions)
    completion = torch.full((rows, width), pad, dtype=torch.long)  # (B, T)
    completion_mask = torch.zeros((rows, width), dtype=torch.long)  # (B, T)
    old = torch.zeros((rows, width))  # (B, T)
    for b, (action, logp) in enumerate(zip(data.actions, data.action_old_logp, strict=True)):
        completion[b, : len(action)] = torch.tensor(action)
        completion_mask[b, : len(action)] = 1
        old[b, : len(action)] = torch.tensor(logp)
    prompt = torch.tensor([data.prompt] * rows)  # (B, P)
    return {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
            "completion_mask": completion_mask, "advantages": data.row_advantages.clone(),
            "old_per_token_logps": old, "num_items_in_batch": completion_mask.sum()}


def grpo_trainer(peft_model, tokenizer, rows: int, max_new_tokens: int, lr: float, out_dir: str):
    """A GRPOTrainer on CPU around ``peft_model`` (no generation is ever run: only its loss is used)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=out_dir, use_cpu=True, per_device_train_batch_size=rows, num_generations=rows,
                      max_completion_length=max_new_tokens, beta=0.0, loss_type="bnpo", epsilon=0.2,
                      learning_rate=lr, report_to=[], temperature=1.0, gradient_accumulation_steps=1,
                      disable_tqdm=True, save_strategy="no", logging_strategy="no", bf16=False)
    return GRPOTrainer(model=peft_model, reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
                       args=args, train_dataset=Dataset.from_dict({"prompt": ["hi"] * rows}),
                       processing_class=tokenizer)


def trl_updates(peft_model, tokenizer, data: UpdateRows, *, pad: int, max_new_tokens: int, lr: float,
                repeats: int) -> tuple[float, Timed]:
    """TRL's first loss (at the given weights) and the time of ``repeats`` more loss-backward-step updates
    (the first is a warm-up), on a copy of ``peft_model``."""
    with tempfile.TemporaryDirectory() as out_dir:
        trainer = grpo_trainer(copy.deepcopy(peft_model), tokenizer, len(data.actions), max_new_tokens, lr, out_dir)
        model = trainer.model
        model.train()
        trainer.current_gradient_accumulation_steps = 1
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.Adam(params, lr=lr)
        inputs = trl_inputs(data, pad)

        def step() -> float:
            optimizer.zero_grad(set_to_none=True)
            loss = trainer.compute_loss(model, inputs)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            return loss.item()

        first = step()  # also the warm-up
        _, wall, cpu = timed(lambda: [step() for _ in range(repeats)])
    return first, Timed(data.tokens * repeats, wall, cpu)
