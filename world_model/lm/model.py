"""``LMWorldModel``: the next observation written by an ensemble of causal LMs over the text history.

It answers the world-model seam (``world_model.protocol``) as the latent ``WorldModel`` does. Its
state is the text history (``LMState``); a step renders each row's prompt (first observation, the
latest ``history_turns`` turns, the action: ``world_model.lm.codec``), samples the observation from
the members' mixture with a KV cache (``world_model.kv_sampling.sample_with_cache``, the policy's
loop), then runs every member once over prompt + observation to read reward and done from its
head on the closing token's hidden state and the members' disagreement over the written tokens
(mutual information per token, ``</s>`` included, pooled as ``world_model.disagreement`` says: the
latent model's measure). The prompt,
hence the cost of a step, grows with the window; the latent model's does not.

Saved by ``save_pretrained`` as ``model.safetensors`` + ``config.json`` (+ the env word tokenizer
under ``tokenizer/`` and, for a pretrained base, its tokenizer under ``lm_tokenizer/``); a folder
holding only a pickle checkpoint is refused without being read.
"""

# No ``from __future__ import annotations``: ``PyTorchModelHubMixin`` reads the ``config`` annotation.

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
import torch.nn.functional as F
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from transformers import AutoTokenizer

from envs.trajectory import Trajectory
from world_model.bootstrap import bootstrap_counts, weighted_mean
from world_model.kv_sampling import sample_with_cache
from world_model.lm.codec import ChatCodec, WordCodec
from world_model.lm.config import LMWorldModelConfig
from world_model.lm.history import LMState
from world_model.lm.members import Members, OutcomeHead, lm_from_config, load_local, tiny_lm
from world_model.lm.mixture import MixtureLM
from world_model.lm.rows import Scored, left_pad, score_rows
from world_model.state import Predictions
from world_model.turn_tokens import TokenLimits, TurnTokenizer
from world_model.uncertainty import member_std

WEIGHTS_FILE = "model.safetensors"
LM_TOKENIZER_FOLDER = "lm_tokenizer"
PICKLE_FILES = ("pytorch_model.bin", "model.pt", "model.pth", "pytorch_model.bin.index.json")


def refuse_pickles(folder: Path) -> None:
    """Fail, naming the file, when ``folder`` offers weights only as a pickle (never opened here)."""
    pickles = [name for name in PICKLE_FILES if (folder / name).exists()]
    if not (folder / WEIGHTS_FILE).is_file():
        if pickles:
            raise ValueError(f"{folder} holds {pickles[0]}, a pickle checkpoint, and no {WEIGHTS_FILE}: Reverie "
                             "never unpickles a file it is handed; save the model as safetensors")
        raise FileNotFoundError(f"{folder / WEIGHTS_FILE} not found: LMWorldModel loads local folders with "
                                "safetensors weights")


class LMWorldModel(nn.Module, PyTorchModelHubMixin):
    """An ensemble of causal LMs as a world model (see the module docstring).

    ``tokenizer`` is the env's ``TurnTokenizer`` (word caps; the vocabulary of tiny members).
    Weights are drawn from ``seed`` alone; the global RNG is left as it was.
    """

    def __init__(self, config: LMWorldModelConfig, tokenizer: TurnTokenizer | None = None, *, seed: int = 0,
                 lm_tokenizer=None, _load_pretrained: bool = True) -> None:
        super().__init__()
        if tokenizer is None:
            raise ValueError("LMWorldModel needs the env's TurnTokenizer (from_pretrained loads the saved one)")
        if len(tokenizer) != config.vocab_size or tokenizer.limits != TokenLimits(
            config.max_observation_words, config.max_action_words
        ):
            raise ValueError(f"the tokenizer ({len(tokenizer)} ids, caps {tokenizer.limits}) does not match "
                             f"LMWorldModelConfig (vocab_size {config.vocab_size}, caps "
                             f"{config.max_observation_words}/{config.max_action_words})")
        self.config, self.tokenizer, self.window = config, tokenizer, config.options.history_turns
        options = config.options
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if options.pretrained is None:
                self.codec = WordCodec(tokenizer)
                positions = self.codec.max_prompt_tokens(self.window) + self.codec.max_new_tokens
                built = [tiny_lm(options, vocab_size=len(tokenizer), max_positions=positions,
                                 pad=tokenizer.pad_id, bos=tokenizer.bos_id, eos=tokenizer.eos_id)
                         for _ in range(config.num_members)]
                self.members = Members(built[0], config.num_members, copies=built[1:])
            else:
                if _load_pretrained:
                    base, lm_tokenizer = load_local(options.pretrained, options.dtype)
                    config.base_config = base.config.to_dict()
                else:  # from_pretrained: the saved weights replace these
                    base = lm_from_config(config.base_config, options.dtype)
                self.lm_tokenizer = lm_tokenizer
                self.codec = ChatCodec(lm_tokenizer, tokenizer, max_new_tokens=4 * tokenizer.limits.observation + 1)
                self.members = Members(base, config.num_members, lora_rank=options.lora_rank,
                                       lora_alpha=options.lora_alpha)
            self.heads = nn.ModuleList(
                [OutcomeHead(self.members.hidden_size, config.head_hidden) for _ in range(config.num_members)]
            )
        self.mixture = MixtureLM(self.members, self.codec.banned_ids)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # --- text API -----------------------------------------------------------------------------------
    def initial_state(self, observations: Sequence[str]) -> LMState:
        return LMState.start(observations)

    def observe(self, states: LMState, actions: Sequence[str], observations: Sequence[str]) -> LMState:
        """Fold real turns into the histories (nothing is computed: the state is the text)."""
        self._check_rows(states, actions, "actions")
        return states.advance(list(actions), list(observations), self.window)

    def _prompts(self, states: LMState, actions: Sequence[str]) -> list[list[int]]:
        return self.codec.prompts(states.first, states.turns, list(actions))

    @torch.no_grad()
    def step(self, states: LMState, actions: Sequence[str], *, generator: torch.Generator,
             greedy: bool = False) -> tuple[LMState, Predictions]:
        """Imagine one turn per row (see the module docstring); ``generator`` draws every sample (the
        words, then the done flags); ``greedy`` takes argmax words and ``done = p > 0.5``."""
        self._check_rows(states, actions, "actions")
        prompts = self._prompts(states, actions)
        ids, mask = left_pad(prompts, self.codec.pad_id)  # (B, P)
        width = self.codec.max_new_tokens
        uniforms = None if greedy else torch.rand((len(prompts), width), generator=generator,
                                                  device=generator.device)
        decoded = sample_with_cache(
            self.mixture, ids.to(self.device), mask.to(self.device), max_tokens=width, eos=self.codec.eos_id,
            pad=self.codec.pad_id, weights=None if greedy else (lambda logits: logits.exp()), uniforms=uniforms,
        )
        written = [row[:n].tolist() for row, n in zip(decoded.token_ids, decoded.lengths, strict=True)]
        scored = self._score(prompts, written)
        probs = torch.sigmoid(scored.done_logits)  # (K, B)
        done_probability = probs.mean(dim=0)  # (B,)
        if greedy:
            done = done_probability > 0.5
        else:
            done = torch.bernoulli(done_probability.to(generator.device), generator=generator).bool()
        observations = [self.codec.decode(row) for row in written]
        ended = torch.tensor([bool(row) and row[-1] == self.codec.eos_id for row in written])
        predictions = Predictions(
            observations=observations, reward=scored.rewards.mean(dim=0), done_probability=done_probability,
            done=done.to(done_probability.device), uncertainty=scored.disagreement,
            reward_std=member_std(scored.rewards), done_std=member_std(probs), ended=ended,
        )
        return states.advance(list(actions), observations, self.window), predictions

    @torch.no_grad()
    def disagreement(self, states: LMState, actions: Sequence[str], observations: Sequence[str]) -> torch.Tensor:
        """``(B,)`` the members' mutual information over the tokens of each given observation (``</s>``
        included), pooled by ``config.disagreement``, after its action, teacher-forced: ``step``'s measure
        on outcomes the caller chose."""
        self._check_rows(states, actions, "actions")
        self._check_rows(states, observations, "observations")
        return self._score(self._prompts(states, actions), self.codec.targets(observations)).disagreement

    @torch.no_grad()
    def teacher_forced(self, states: LMState, actions: Sequence[str], observations: Sequence[str]
                       ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
        """For given outcomes: per row the log-prob of each target token (words, then ``</s>``) under
        the distribution ``step`` samples from, and ``(K, B)`` rewards and done probabilities read
        after the given observation (as a real turn would be read)."""
        targets = self.codec.targets(observations)
        scored = score_rows(self.members, self.heads, self._prompts(states, actions), targets,
                            pad=self.codec.pad_id, device=self.device, banned=self.mixture.banned,
                            score=self.config.disagreement)
        logps = [row[row.shape[0] - len(t):].cpu() for row, t in zip(scored.mixture_logps, targets, strict=True)]
        return logps, scored.rewards, torch.sigmoid(scored.done_logits)

    def states_before_turns(self, trajectories: Sequence[Trajectory]) -> LMState:
        """The state before every played turn (trajectory order, then turn order), from the true history."""
        parts = []
        for t in trajectories:
            if not t.turns:
                continue
            state = self.initial_state([t.turns[0].observation])
            for turn in t.turns:
                parts.append(state)
                state = state.advance([turn.action], [turn.next_observation], self.window)
        return LMState.concat(parts) if parts else LMState((), (), ())

    def _score(self, prompts: list[list[int]], targets: list[list[int]],
               row_weights: torch.Tensor | None = None) -> Scored:
        return score_rows(self.members, self.heads, prompts, targets, pad=self.codec.pad_id, device=self.device,
                          score=self.config.disagreement, row_weights=row_weights)

    @staticmethod
    def _check_rows(states: LMState, values: Sequence[str], name: str) -> None:
        if len(values) != len(states):
            raise ValueError(f"{len(values)} {name} for {len(states)} states")

    # --- training -------------------------------------------------------------------------------------
    def bootstrap_weights(self, owners: torch.Tensor, trajectories: int) -> torch.Tensor | None:
        """``(K, R)`` how often each row's trajectory (``owners`` ``(R,)``, of ``trajectories``) was drawn
        in each member's resample, while training with ``config.bootstrap`` (drawn from the global RNG,
        which the fit seeds, as the latent model does); None otherwise."""
        if not (self.training and self.config.bootstrap):
            return None
        counts = bootstrap_counts(self.config.num_members, trajectories)  # (K, B)
        return counts[:, owners].to(self.device)  # (K, R)

    def loss_on_rows(self, prompts: list[list[int]], targets: list[list[int]], rewards: torch.Tensor,
                     dones: torch.Tensor, *, row_weights: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Teacher-forced losses, each summed over the members: ``observation_nll`` (mean per target
        token, ``</s>`` included), ``reward_mse``, ``done_bce`` and their weighted sum ``loss``.
        ``row_weights`` ``(K, R)`` (``bootstrap_weights``) makes each member's terms weighted means over
        the rows, as if row ``r`` appeared ``row_weights[k, r]`` times in member ``k``'s batch."""
        scored = self._score(prompts, targets, row_weights)
        rewards, dones = rewards.to(self.device).float(), dones.to(self.device).float()  # (R,), (R,)
        if row_weights is None:
            parts = {
                "observation_nll": scored.token_nll.sum(),
                "reward_mse": ((scored.rewards - rewards[None]) ** 2).mean(dim=1).sum(),
                "done_bce": torch.stack([F.binary_cross_entropy_with_logits(d, dones)
                                         for d in scored.done_logits]).sum(),
            }
        else:
            targets_done = dones[None].expand_as(scored.done_logits)  # (K, R)
            bce = F.binary_cross_entropy_with_logits(scored.done_logits, targets_done, reduction="none")  # (K, R)
            parts = {
                "observation_nll": scored.token_nll.sum(),
                "reward_mse": weighted_mean((scored.rewards - rewards[None]) ** 2, row_weights).sum(),
                "done_bce": weighted_mean(bce, row_weights).sum(),
            }
        c = self.config
        parts["loss"] = parts["observation_nll"] + c.reward_weight * parts["reward_mse"] + c.done_weight * parts["done_bce"]
        return parts

    # --- saving ---------------------------------------------------------------------------------------
    def _save_pretrained(self, save_directory: Path) -> None:
        safetensors.torch.save_model(self, str(Path(save_directory) / WEIGHTS_FILE))
        self.tokenizer.save(save_directory)
        if self.config.options.pretrained is not None:
            self.lm_tokenizer.save_pretrained(str(Path(save_directory) / LM_TOKENIZER_FOLDER))

    @classmethod
    def _from_pretrained(cls, *, model_id: str, revision, cache_dir, force_download, local_files_only, token,
                         map_location: str = "cpu", **model_kwargs: Any) -> "LMWorldModel":
        folder = Path(model_id)
        refuse_pickles(folder)
        config: LMWorldModelConfig = model_kwargs.pop("config")
        tokenizer = TurnTokenizer.load(folder, TokenLimits(config.max_observation_words, config.max_action_words))
        lm_tokenizer = None
        if config.options.pretrained is not None:
            lm_tokenizer = AutoTokenizer.from_pretrained(str(folder / LM_TOKENIZER_FOLDER), local_files_only=True)
            lm_tokenizer.padding_side = "left"
        model = cls(config, tokenizer, lm_tokenizer=lm_tokenizer, _load_pretrained=False)
        safetensors.torch.load_model(model, str(folder / WEIGHTS_FILE), strict=True, device=map_location)
        return model.eval()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs):
        """A saved model from a local folder; a folder holding only a pickle checkpoint is refused."""
        folder = Path(os.fspath(pretrained_model_name_or_path))
        if folder.is_dir():
            refuse_pickles(folder)
        return super().from_pretrained(pretrained_model_name_or_path, **kwargs)
