"""The LM policy: renders each agent's history, samples the next action, scores token batches.

Sampling is a small loop over the model's KV cache (``world_model.kv_sampling``) rather than HF
``generate``, because ``generate`` draws from the global torch RNG: here every draw comes from a
``torch.Generator`` the policy owns, seeded at construction, so the same seed gives the same actions
(on CPU, bit for bit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from critic import CriticStates
from envs.agent import AgentView, SampledAction
from envs.trajectory import Trajectory
from policy.batch import TokenBatch
from policy.config import PolicyConfig
from policy.encode import TurnSample, encode_prompts, encode_samples, left_pad, prompt_ids, turn_samples
from policy.logprobs import token_logprobs
from policy.lora import save_lora_policy
from policy.render import SYSTEM_PROMPT, render_prompt
from world_model.kv_sampling import sample_with_cache


@dataclass
class Generation:
    """What one batched generation produced."""

    prompt_ids: list[list[int]]  # the ids each row was conditioned on (no padding)
    token_ids: torch.Tensor  # (B, T) long, the sampled tokens; pad after a row's EOS
    lengths: torch.Tensor  # (B,) long, tokens each row produced, its EOS included when it stopped
    logprobs: torch.Tensor  # (B, T) float, each token's log-prob at temperature 1; 0 past lengths
    texts: list[str]  # decoded actions (EOS dropped, other special tokens kept)

    def sampled_actions(self, eos_id: int) -> list[SampledAction]:
        """What each row sampled, as the records ``envs.collect`` keeps on each turn."""
        # Whole tensors to lists once: slicing a tensor per row costs more than the rows' content.
        rows, logps = self.token_ids.tolist(), self.logprobs.tolist()
        return [
            SampledAction(
                text=text,
                prompt_ids=tuple(prompt),
                action_ids=tuple(row[:n]),
                logprobs=tuple(logp[:n]),
                ended=n > 0 and row[n - 1] == eos_id,
            )
            for prompt, row, logp, n, text in zip(
                self.prompt_ids, rows, logps, self.lengths.tolist(), self.texts, strict=True
            )
        ]


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero all but the smallest set of most likely tokens whose mass reaches ``top_p``; renormalise. (B, V)."""
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, V) mass of the strictly more likely tokens
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)  # the most likely token always stays
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum(dim=-1, keepdim=True)


class LMPolicy:
    """A causal LM behind the Agent protocol: ``act`` for rollouts, ``log_probs``/``encode`` for learning."""

    def __init__(self, model, tokenizer, cfg: PolicyConfig, *, seed: int = 0, adapters=None,
                 system_prompt: str | None = SYSTEM_PROMPT, prior: Sequence[dict[str, str]] = ()) -> None:
        """``adapters``: the ``PeftModel`` whose LoRA adapters ``model`` carries (``policy.lora``), or None.
        ``system_prompt`` and ``prior`` (few-shot messages) open every chat-template prompt; a tokenizer
        without a chat template shows neither."""
        if tokenizer.eos_token_id is None:
            raise ValueError("LMPolicy: the tokenizer has no EOS token; actions could never end")
        self.model = model
        self.adapters = adapters
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.system_prompt = system_prompt
        self.prior = tuple(dict(message) for message in prior)
        self.generator = torch.Generator(device="cpu").manual_seed(seed)  # draws are made on CPU

    @property
    def pad_token_id(self) -> int:
        """The id that pads rows (EOS when the tokenizer has no pad token)."""
        pad = self.tokenizer.pad_token_id
        return self.tokenizer.eos_token_id if pad is None else pad

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def train(self, mode: bool = True) -> LMPolicy:
        self.model.train(mode)
        return self

    def eval(self) -> LMPolicy:
        self.model.eval()
        return self

    def parameters(self):
        return self.model.parameters()

    def prompts(self, views: Sequence[AgentView]) -> list[str]:
        """The rendered prompt of each view (its turns and current observation)."""
        return [self.render(v.turns, v.observation) for v in views]

    def render(self, turns: Sequence, observation: str) -> str:
        """The prompt after ``turns`` with ``observation`` current: the policy's system prompt and prior
        messages, its history window, its tokenizer's format."""
        return render_prompt(self.tokenizer, turns, observation, self.cfg.history_window, self.system_prompt,
                             self.prior)

    def act(self, views: Sequence[AgentView], *, greedy: bool = False) -> list[SampledAction]:
        """One sampled action per view, in one batch (greedy when asked or at temperature 0).

        Each carries its text and the exact prompt ids, action ids and log-probs, so the learner
        trains on the tokens that were sampled.
        """
        return self.generate(self.prompts(views), greedy=greedy).sampled_actions(self.tokenizer.eos_token_id)

    def with_seed(self, seed: int) -> LMPolicy:
        """The same model and tokenizer with a sampling generator of its own (for evaluation), so
        drawing evaluation episodes never moves the training policy's random stream."""
        return LMPolicy(self.model, self.tokenizer, self.cfg, seed=seed, adapters=self.adapters,
                        system_prompt=self.system_prompt, prior=self.prior)

    def save(self, folder) -> None:
        """A Hugging Face model directory (safetensors + config + tokenizer): loadable, never unpickled. A LoRA
        policy saves its adapters in ``folder/adapter`` and, with ``policy.lora.save_merged``, the merged model."""
        if self.adapters is not None:
            save_lora_policy(self.adapters, self.tokenizer, folder, save_merged=self.cfg.lora.save_merged)
            return
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

    def state_prompts(self, states: Sequence[tuple[Trajectory, int]]) -> CriticStates:
        """The prompt ids of each (trajectory, k) state: the history after ``k`` turns, as ``act`` would
        render it (``k == num_turns`` is the state after the last turn, where a truncated episode
        bootstraps). Left-padded, for a critic."""
        prompts = []
        for trajectory, k in states:
            if not 0 <= k <= trajectory.num_turns or trajectory.num_turns == 0:
                raise ValueError(f"state_prompts: turn {k} is outside trajectory {trajectory.trajectory_id}")
            turns = trajectory.turns
            observation = turns[k].observation if k < len(turns) else turns[-1].next_observation
            prompts.append(self.render(turns[:k], observation))
        input_ids, attention_mask = encode_prompts(
            self.tokenizer, prompts, max_prompt_tokens=self.cfg.max_prompt_tokens
        )
        return CriticStates(input_ids=input_ids, attention_mask=attention_mask, histories=list(states))

    def _sampling_weights(self, logits: torch.Tensor) -> torch.Tensor:
        """Sampling probabilities from (B, V) next-token logits: temperature, then top-p."""
        logits = logits.float()
        if self.cfg.temperature != 1.0:
            logits = logits / self.cfg.temperature
        return top_p_filter(F.softmax(logits, dim=-1), self.cfg.top_p)  # (B, V)

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], *, greedy: bool = False) -> Generation:
        """Sample up to ``max_action_tokens`` tokens after each prompt, stopping a row at its EOS.

        Greedy when asked or at temperature 0. Otherwise every draw uses a uniform number from the
        policy's generator, ``max_action_tokens`` per prompt drawn up front, so the tokens a row gets
        do not depend on when the other rows of the batch stopped.
        """
        eos, pad = self.tokenizer.eos_token_id, self.pad_token_id
        if not prompts:
            empty = torch.zeros((0, 0), dtype=torch.long)
            return Generation([], empty, torch.zeros(0, dtype=torch.long), empty.float(), [])
        # Each distinct prompt tokenised once: a group's episodes share their first prompt (and
        # sample_with_cache prefills it once, copying its KV cache to the rows that repeat it).
        distinct = list(dict.fromkeys(prompts))
        encoded = prompt_ids(self.tokenizer, distinct, max_prompt_tokens=self.cfg.max_prompt_tokens)
        ids = dict(zip(distinct, encoded, strict=True))
        rows = [ids[prompt] for prompt in prompts]
        input_ids, attention_mask = left_pad(rows, pad)  # (B, P)
        sample = not greedy and self.cfg.temperature != 0.0
        uniforms = (
            torch.rand((len(rows), self.cfg.max_action_tokens), generator=self.generator) if sample else None
        )
        decoded = sample_with_cache(
            self.model,
            input_ids.to(self.device),
            attention_mask.to(self.device),
            max_tokens=self.cfg.max_action_tokens,
            eos=eos,
            pad=pad,
            weights=self._sampling_weights if sample else None,
            uniforms=uniforms,
        )
        # Sampled special tokens (<unk>, <pad>, ...) stay in the text, so the env judges what the
        # policy really said; training reads the ids, never this text.
        texts = [
            self.tokenizer.decode([i for i in row[:n] if i != eos], skip_special_tokens=False)
            for row, n in zip(decoded.token_ids.tolist(), decoded.lengths.tolist(), strict=True)
        ]
        return Generation(rows, decoded.token_ids, decoded.lengths, decoded.logprobs, texts)

    def encode(self, trajectories: Sequence[Trajectory]) -> tuple[TokenBatch, list[TurnSample]]:
        """A token batch of demonstrations the policy did not sample (one row per turn): their action
        text is tokenised here, closed by EOS. Behaviour cloning uses it; RL trains on
        ``policy.rollout_batch.build_rollout_batch`` instead, from the sampled ids."""
        samples = turn_samples(trajectories, self.cfg.history_window, self.tokenizer,
                               system_prompt=self.system_prompt, prior=self.prior)
        batch = encode_samples(
            self.tokenizer,
            [s.prompt for s in samples],
            [s.action for s in samples],
            max_prompt_tokens=self.cfg.max_prompt_tokens,
            max_action_tokens=self.cfg.max_action_tokens,
        )
        return batch, samples

    def log_probs(self, batch: TokenBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token ``(logp, entropy)``, both (B, L), on the model's device; with gradients when enabled."""
        batch = batch.to(self.device)
        return token_logprobs(self.model, batch.input_ids, batch.attention_mask)
