"""Collection tokens per second: Reverie's own sampling loop against Hugging Face ``model.generate``.

Both sample the same prompt rows (one group: every row is the same first prompt of an env task, as a
GRPO group's episodes start), the same number of new tokens at most, at temperature 1 without top-k or
top-p, each from a generator seeded alike. Reverie's path is ``LMPolicy.generate``, what collection calls
(``act``): the prompt ids are tokenised once per distinct prompt, then ``world_model.kv_sampling``
prefills the group's common prompt once (``world_model.shared_prefill``: one row through the prompt
pass, its KV cache copied to the ``rows`` rows) and decodes over the HF model's KV cache, dropping
finished rows; ``generate`` prefills every row. A token counts up to and including a row's EOS; the
two draw different random numbers, so their rows stop at different points, which averages out over
rows (the expected count is the same: both sample the same distribution).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from envs.registry import make
from policy.lm_policy import LMPolicy


@dataclass(frozen=True)
class Timed:
    """Tokens produced and the time they took (wall and this process's CPU seconds)."""

    tokens: int
    wall_s: float
    cpu_s: float

    @property
    def per_cpu_second(self) -> float:
        return self.tokens / max(self.cpu_s, 1e-9)

    @property
    def per_wall_second(self) -> float:
        return self.tokens / max(self.wall_s, 1e-9)


def group_prompt(policy: LMPolicy, env_name: str, env_kwargs: dict, seed: int) -> str:
    """The policy's rendered prompt for the first observation of task ``seed``."""
    env = make(env_name, **env_kwargs)
    return policy.render([], env.reset(seed))


def timed(fn) -> tuple[object, float, float]:
    """``fn()``, its wall seconds and its process CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def reverie_sampling(policy: LMPolicy, prompt: str, rows: int, seed: int):
    """(Generation, Timed) of ``LMPolicy.generate`` on ``rows`` copies of ``prompt``."""
    policy.generator.manual_seed(seed)
    generation, wall, cpu = timed(lambda: policy.generate([prompt] * rows))
    return generation, Timed(int(generation.lengths.sum()), wall, cpu)


def generated_lengths(new_ids: torch.Tensor, eos: int) -> torch.Tensor:
    """(B,) tokens each row of ``new_ids`` (B, T) produced, its first EOS included (T without one)."""
    width = new_ids.shape[1]
    is_eos = new_ids == eos  # (B, T)
    first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), width)  # (B,)
    return (first + 1).clamp(max=width)


@torch.no_grad()
def hf_generate(policy: LMPolicy, prompt: str, rows: int, seed: int) -> Timed:
    """Timed ``model.generate`` (sampling at temperature 1, no top-k or top-p) on the same rows and budget."""
    from policy.encode import left_pad, prompt_ids

    tokenizer, model = policy.tokenizer, policy.model
    ids = prompt_ids(tokenizer, [prompt], max_prompt_tokens=policy.cfg.max_prompt_tokens)[0]
    input_ids, attention_mask = left_pad([ids] * rows, policy.pad_token_id)  # (B, P)
    torch.manual_seed(seed)  # generate draws from the global RNG
    out, wall, cpu = timed(lambda: model.generate(
        input_ids=input_ids, attention_mask=attention_mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
        max_new_tokens=policy.cfg.max_action_tokens, min_new_tokens=0, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=policy.pad_token_id,
    ))
    lengths = generated_lengths(out[:, input_ids.shape[1]:], tokenizer.eos_token_id)
    return Timed(int(lengths.sum()), wall, cpu)


def compare_sampling(policy: LMPolicy, prompt: str, rows: int, seed: int, repeats: int) -> dict:
    """Both paths ``repeats`` times each (alternating, after one small warm-up call each); the tokens and
    seconds summed over repeats, and the first Reverie generation (the update's rows)."""
    policy.eval()
    reverie_sampling(policy, prompt, 1, seed)
    hf_generate(policy, prompt, 1, seed)
    runs: dict[str, list[Timed]] = {"reverie": [], "hf": []}
    first = None
    for repeat in range(repeats):
        generation, measured = reverie_sampling(policy, prompt, rows, seed + repeat)
        first = generation if first is None else first
        runs["reverie"].append(measured)
        runs["hf"].append(hf_generate(policy, prompt, rows, seed + repeat))
    totals = {name: Timed(sum(t.tokens for t in ts), sum(t.wall_s for t in ts), sum(t.cpu_s for t in ts))
              for name, ts in runs.items()}
    return {**totals, "generation": first}
