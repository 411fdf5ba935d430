"""``WorldModel``: a learned text environment over latent histories, with an ensemble's uncertainty.

Text API (batched, no gradients): ``initial_state(observations)`` encodes first observations;
``step(states, actions, generator=...)`` samples each row's next observation from the ensemble
decoders (reading only the latent and the action, and with ``decoder.copy_observation`` the
words of the observation acted in, which the state carries), folds the sampled turn back into the latent
with the encoder's ``step`` exactly as a real turn is folded, and reads reward and done from the
new latent. ``observe`` folds real turns. A long imagined episode therefore conditions on what it
has itself produced, the same way a real one conditions on what the env answered.
``disagreement(states, actions, observations)`` scores given outcomes by the members' disagreement.

Training API: ``loss(batch)`` on a ``WorldModelBatch`` (``build_training_batch``), teacher-forced.

Saved by ``save_pretrained`` as ``model.safetensors`` plus ``config.json`` (``PyTorchModelHubMixin``)
and the tokenizer under ``tokenizer/``; ``from_pretrained`` reads local folders with safetensors
weights only, and every weight must be present.
"""

# No ``from __future__ import annotations``: ``PyTorchModelHubMixin`` reads the ``config`` annotation
# at runtime to rebuild the dataclass from config.json, and a string annotation defeats that.

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
import torch.nn.functional as F
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from envs.trajectory import Trajectory
from world_model.batch import WorldModelBatch
from world_model.bootstrap import bootstrap_counts, weighted_mean
from world_model.config import WorldModelOptions
from world_model.decoder import DecoderConfig
from world_model.decoder_context import DecoderContext
from world_model.disagreement_score import row_score
from world_model.dynamics import EnsembleDynamics
from world_model.encoder import EncoderConfig, LatentStateEncoder
from world_model.ensemble_options import LatentOptions
from world_model.losses import done_bce, regression_mse, scored_token_nll
from world_model.state import Predictions, WorldState
from world_model.trajectory_rows import build_training_batch
from world_model.turn_tokens import TokenLimits, TurnTokenizer, pad_rows
from world_model.uncertainty import member_std, mutual_information

WEIGHTS_FILE = "model.safetensors"


def _owners(mask: torch.Tensor) -> torch.Tensor:
    """``(B, N)`` bool -> ``(R,)`` the batch row of each True entry, in row-major order."""
    return torch.arange(mask.shape[0], device=mask.device)[:, None].expand_as(mask)[mask]


@dataclass
class WorldModelConfig(LatentOptions):
    """The whole latent world model as built, what its config.json records: the ``world_model`` group's
    ensemble options (``LatentOptions``, declared once there), the encoder and decoder (their YAML
    sections extended with the tokenizer's sizes), the word caps and the loss weights.

    ``for_tokenizer`` fills the vocabulary and caps from a ``TurnTokenizer``. Sub-configs given as
    dicts (as read back from config.json) are turned into their dataclasses.
    """

    encoder: EncoderConfig
    """The history encoder."""
    decoder: DecoderConfig
    """Each member's observation decoder."""
    max_observation_words: int
    """``TokenLimits.observation`` of the tokenizer the model reads with."""
    max_action_words: int
    """``TokenLimits.action`` of that tokenizer."""
    reconstruction_weight: float = 1.0
    """Weight of rewriting the current observation from the latent (``<look>``)."""
    reward_weight: float = 1.0
    """Weight of the reward MSE."""
    done_weight: float = 1.0
    """Weight of the done BCE."""

    def __post_init__(self) -> None:
        if isinstance(self.encoder, dict):
            self.encoder = EncoderConfig(**self.encoder)
        if isinstance(self.decoder, dict):
            self.decoder = DecoderConfig(**self.decoder)
        for name in ("max_observation_words", "max_action_words"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"WorldModelConfig.{name} must be an integer >= 1, got {value!r}")
        self.check_latent("WorldModelConfig")
        for name in ("reconstruction_weight", "reward_weight", "done_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"WorldModelConfig.{name} must be a number >= 0, got {value!r}")
        self._check_sizes()

    def _check_sizes(self) -> None:
        """The encoder and decoder agree with each other and fit the word caps."""
        enc, dec, limits = self.encoder, self.decoder, self.limits
        for name, value, wanted in (
            ("decoder.vocab_size", dec.vocab_size, enc.vocab_size),
            ("decoder.latent_size", dec.latent_size, enc.latent_size),
        ):
            if value != wanted:
                raise ValueError(f"WorldModelConfig.{name} ({value}) must equal the encoder's ({wanted})")
        for name, value, least in (
            ("encoder.max_tokens", enc.max_tokens, limits.encoder_tokens),
            ("decoder.max_query_tokens", dec.max_query_tokens, limits.query_tokens),
            ("decoder.max_text_tokens", dec.max_text_tokens, limits.text_tokens),
        ):
            if value < least:
                raise ValueError(f"WorldModelConfig.{name} ({value}) must be >= {least} for the word caps")

    @property
    def limits(self) -> TokenLimits:
        return TokenLimits(observation=self.max_observation_words, action=self.max_action_words)

    @classmethod
    def for_tokenizer(
        cls,
        tokenizer: TurnTokenizer,
        *,
        latent_size: int = 128,
        encoder: dict[str, Any] | None = None,
        decoder: dict[str, Any] | None = None,
        **options: Any,
    ) -> "WorldModelConfig":
        """Sizes from ``tokenizer`` (vocabulary, caps) and ``latent_size``; ``encoder`` / ``decoder``
        override their other fields, ``options`` this config's own (``num_members``, weights, ...)."""
        limits = tokenizer.limits
        return cls(
            encoder=EncoderConfig(
                vocab_size=len(tokenizer),
                max_tokens=limits.encoder_tokens,
                latent_size=latent_size,
                **(encoder or {}),
            ),
            decoder=DecoderConfig(
                vocab_size=len(tokenizer),
                latent_size=latent_size,
                max_query_tokens=limits.query_tokens,
                max_text_tokens=limits.text_tokens,
                **(decoder or {}),
            ),
            max_observation_words=limits.observation,
            max_action_words=limits.action,
            **options,
        )

    @classmethod
    def from_options(cls, tokenizer: TurnTokenizer, options: WorldModelOptions) -> "WorldModelConfig":
        """The ``world_model`` group's sizes, with the vocabulary and caps of ``tokenizer`` (which
        already applies the group's word caps)."""
        latent_options = {f.name: getattr(options, f.name) for f in fields(LatentOptions)}  # declared once
        return cls.for_tokenizer(
            tokenizer,
            latent_size=options.latent_size,
            encoder=asdict(options.encoder),
            decoder=asdict(options.decoder),
            **latent_options,
        )


class WorldModel(nn.Module, PyTorchModelHubMixin):
    """History encoder + an ensemble of dynamics members (see the module docstring).

    Weights are drawn from ``seed`` alone and the global torch RNG is left as it was; members get
    different weights from the one stream. ``tokenizer`` is required except through
    ``from_pretrained``, which loads the one saved next to the weights.
    """

    def __init__(
        self, config: WorldModelConfig, tokenizer: TurnTokenizer | None = None, *, seed: int = 0
    ) -> None:
        super().__init__()
        if tokenizer is None:
            raise ValueError("WorldModel needs its TurnTokenizer (from_pretrained loads the saved one)")
        tokenizer.check_matches(config.encoder.vocab_size, config.limits, "WorldModelConfig")
        self.config = config
        self.tokenizer = tokenizer
        values = tokenizer.integer_values() if config.ordinal_numbers else None  # per id: its integer or None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.encoder = LatentStateEncoder(config.encoder, values)
            self.dynamics = EnsembleDynamics(config.decoder, config.num_members, config.head_hidden, values)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _rows(self, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask = pad_rows(rows, self.tokenizer.pad_id)
        return ids.to(self.device), mask.to(self.device)  # (B, T), (B, T)

    @property
    def copies_observation(self) -> bool:
        """Whether the decoders also read the observation acted in (``DecoderConfig.copy_observation``)."""
        return self.config.decoder.copy_observation

    def _observation_ids(self, words: Sequence[Sequence[int]]) -> torch.Tensor | None:
        """``(B, S)`` text rows of observations' word ids, padded to ``max_text_tokens``, for
        ``WorldState.observation_ids``; None without the copy path (nothing to carry)."""
        if not self.copies_observation:
            return None
        rows = [self.tokenizer.text_row(w) for w in words]
        return pad_rows(rows, self.tokenizer.pad_id, self.config.decoder.max_text_tokens)[0].to(self.device)

    def previous_rows(self, states: WorldState) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The copy memory of ``states``: ``(B, S)`` ids and mask, or ``(None, None)`` without the copy path."""
        if not self.copies_observation:
            return None, None
        if states.observation_ids is None:
            raise ValueError(
                "this world model copies the latest observation (world_model.decoder.copy_observation) and "
                "needs WorldState.observation_ids: build states with initial_state, observe, step or "
                "states_before_turns"
            )
        ids = states.observation_ids.to(self.device)  # (B, S)
        return ids, (ids != self.tokenizer.pad_id).long()

    # --- text API -----------------------------------------------------------------------------------
    @torch.no_grad()
    def initial_state(self, observations: Sequence[str]) -> WorldState:
        """The states after each row's first observation."""
        tk = self.tokenizer
        words = tk.observation_words(observations)
        ids, mask = self._rows([tk.observation_row(w) for w in words])
        latent = self.encoder.initial_state(ids, mask)  # (B, D)
        return WorldState(latent, tuple(observations), self._observation_ids(words))

    @torch.no_grad()
    def observe(self, states: WorldState, actions: Sequence[str], observations: Sequence[str]) -> WorldState:
        """Fold real turns (each row's action and the observation it got back) into the states."""
        self._check_rows(states, actions, "actions")
        self._check_rows(states, observations, "observations")
        tk = self.tokenizer
        results = tk.observation_words(observations)
        rows = [tk.turn_row(r, a) for r, a in zip(results, tk.action_words(actions), strict=True)]
        latent = self.encoder.step(states.latent, *self._rows(rows))  # (B, D)
        return WorldState(latent, tuple(observations), self._observation_ids(results))

    @torch.no_grad()
    def step(
        self, states: WorldState, actions: Sequence[str], *, generator: torch.Generator, greedy: bool = False
    ) -> tuple[WorldState, Predictions]:
        """Imagine one turn per row: sample the outcome text, fold it in, predict reward and done.

        ``generator`` (on the model's device) draws every sample (the text's words), so equal
        generator states give equal results. ``greedy`` takes the most likely word instead and
        leaves ``generator`` untouched.

        Done is ``done_probability > 0.5``, never drawn: the heads read the latent after the sampled
        text, so the outcome's chance has already been drawn once, in the text; a second, independent
        draw would let a text that ends the episode go on (and the reverse).
        """
        self._check_rows(states, actions, "actions")
        tk = self.tokenizer
        action_words = tk.action_words(actions)
        query_ids, query_mask = self._rows([tk.query_row(w) for w in action_words])  # (B, A)
        context = DecoderContext(states.latent, query_ids, query_mask, *self.previous_rows(states))
        text = self.dynamics.generate(
            context,
            bos_id=tk.bos_id,
            eos_id=tk.eos_id,
            pad_id=tk.pad_id,
            banned_ids=self._banned_ids(),
            max_words=tk.limits.observation,
            generator=generator,
            greedy=greedy,
            score=self.config.disagreement,
        )
        results = [tk.generated_words(row) for row in text.ids.tolist()]
        turn_ids, turn_mask = self._rows(
            [tk.turn_row(r, a) for r, a in zip(results, action_words, strict=True)]
        )  # (B, T)
        latent = self.encoder.step(states.latent, turn_ids, turn_mask)  # (B, D)
        rewards, done_logits = self.dynamics.outcome(latent)  # (K, B), (K, B)
        done_probs = torch.sigmoid(done_logits)  # (K, B)
        done_probability = done_probs.mean(dim=0)  # (B,)
        done = done_probability > 0.5  # (B,): decided by the sampled text, not drawn again
        observations = [tk.decode(r) for r in results]
        predictions = Predictions(
            observations=observations,
            reward=rewards.mean(dim=0),
            done_probability=done_probability,
            done=done,
            uncertainty=text.disagreement,
            reward_std=member_std(rewards),
            done_std=member_std(done_probs),
            ended=text.ended,
        )
        return WorldState(latent, tuple(observations), self._observation_ids(results)), predictions

    @torch.no_grad()
    def disagreement(
        self,
        states: WorldState,
        actions: Sequence[str],
        observations: Sequence[str],
        *,
        score: str | None = None,
    ) -> torch.Tensor:
        """``(B,)`` the members' disagreement about given outcomes, teacher-forced: the mutual
        information of each token of each row's observation (``</s>`` included) after its action,
        pooled by ``score`` (default: the config's ``disagreement``: ``"sum"``, ``"max"`` or ``"mean"``).

        The measure ``step`` reports on its own samples, here for outcomes chosen by the caller
        (e.g. real transitions, to see where the model is still unsure).
        """
        self._check_rows(states, actions, "actions")
        self._check_rows(states, observations, "observations")
        tk = self.tokenizer
        query_ids, query_mask = self._rows([tk.query_row(w) for w in tk.action_words(actions)])  # (B, A)
        text_ids, text_mask = self._rows(
            [tk.text_row(w) for w in tk.observation_words(observations)]
        )  # (B, S)
        context = DecoderContext(states.latent, query_ids, query_mask, *self.previous_rows(states))
        logits = self.dynamics.logits(context, text_ids[:, :-1])  # (K, B, S-1, V)
        per_token = mutual_information(torch.softmax(logits.float(), dim=-1))  # (B, S - 1)
        return row_score(per_token, text_mask[:, 1:], score or self.config.disagreement)  # (B,)

    @torch.no_grad()
    def states_before_turns(self, trajectories: Sequence[Trajectory], *, batch_size: int = 64) -> WorldState:
        """The state before every played turn of ``trajectories`` (trajectory order, then turn order),
        teacher-forced from the true history in one encoder pass per ``batch_size`` trajectories."""
        return self.turn_states(trajectories, batch_size=batch_size)[0]

    @torch.no_grad()
    def turn_states(
        self, trajectories: Sequence[Trajectory], *, batch_size: int = 64
    ) -> tuple[WorldState, torch.Tensor]:
        """``states_before_turns`` and ``(R, D)`` the latent after each of those turns, with the real
        outcome folded in (what the reward and done heads read)."""
        latents, after, previous, observations = [], [], [], []
        kept = [t for t in trajectories if t.turns]
        for start in range(0, len(kept), batch_size):
            chunk = kept[start : start + batch_size]
            batch = build_training_batch(chunk, self.tokenizer).to(self.device)
            states = self.encoder.states(
                batch.observation_ids, batch.observation_mask, batch.turn_ids, batch.turn_mask, batch.turn_count
            )  # (B, N + 1, D)
            latents.append(states[:, :-1][batch.outcome_mask])  # (R, D)
            after.append(states[:, 1:][batch.outcome_mask])  # (R, D)
            if self.copies_observation:  # the copy memory at the state's fixed width
                rows = batch.previous_ids[batch.outcome_mask]  # (R, S)
                width = self.config.decoder.max_text_tokens
                previous.append(F.pad(rows, (0, width - rows.shape[1]), value=self.tokenizer.pad_id))  # (R, S_max)
            observations += [turn.observation for t in chunk for turn in t.turns]
        if not latents:
            empty = torch.zeros(0, self.config.encoder.latent_size, device=self.device)
            ids = torch.zeros(0, self.config.decoder.max_text_tokens, dtype=torch.long, device=self.device)
            return WorldState(empty, (), ids if self.copies_observation else None), empty
        ids = torch.cat(previous) if self.copies_observation else None
        return WorldState(torch.cat(latents), tuple(observations), ids), torch.cat(after)

    def _banned_ids(self) -> list[int]:
        tk = self.tokenizer
        return [tk.pad_id, tk.bos_id, tk.tokenizer.unk_token_id, tk.obs_id, tk.act_id, tk.res_id, tk.look_id]

    @staticmethod
    def _check_rows(states: WorldState, values: Sequence[str], name: str) -> None:
        if len(values) != len(states):
            raise ValueError(f"{len(values)} {name} for {len(states)} states")

    # --- training -------------------------------------------------------------------------------------
    def loss(self, batch: WorldModelBatch) -> dict[str, torch.Tensor]:
        """Teacher-forced losses, each summed over the K members (``world_model.losses``).

        ``observation_nll``: next-observation tokens given the latent before the turn and
        ``<act> action``; ``reconstruction_nll``: the current observation given the latent and
        ``<look>``; ``reward_mse`` and ``done_bce`` from the latent after the turn. ``loss`` is
        their sum under the config's weights. Token NLLs are means per target token (``</s>``
        included). With ``config.bootstrap``, in training mode each member's terms are taken over its
        own resample of the batch's trajectories (``world_model.bootstrap``).
        """
        batch = batch.to(self.device)
        latents = self.encoder.states(
            batch.observation_ids, batch.observation_mask, batch.turn_ids, batch.turn_mask, batch.turn_count
        )  # (B, N + 1, D)
        outcome = batch.outcome_mask  # (B, N)
        weights = self._bootstrap_weights(batch)  # (K, B) or None
        next_nll, now_nll = self._text_nll(batch, latents, weights)  # (K,), (K,)
        after = latents[:, 1:][outcome]  # (R, D)
        rewards, done_logits = self.dynamics.outcome(after)  # (K, R), (K, R)
        if weights is None:
            reward_mse = regression_mse(rewards, batch.rewards[outcome])  # (K,)
            bce = done_bce(done_logits, batch.dones[outcome])  # (K,)
        else:
            row_weights = weights[:, _owners(outcome)]  # (K, R)
            reward_mse = weighted_mean((rewards.float() - batch.rewards[outcome].float()) ** 2, row_weights)
            targets = batch.dones[outcome].float().expand_as(done_logits)  # (K, R)
            bce = weighted_mean(F.binary_cross_entropy_with_logits(done_logits.float(), targets, reduction="none"),
                                row_weights)
        parts = {
            "observation_nll": next_nll.sum(),
            "reconstruction_nll": now_nll.sum(),
            "reward_mse": reward_mse.sum(),
            "done_bce": bce.sum(),
        }
        c = self.config
        parts["loss"] = (
            parts["observation_nll"]
            + c.reconstruction_weight * parts["reconstruction_nll"]
            + c.reward_weight * parts["reward_mse"]
            + c.done_weight * parts["done_bce"]
        )
        return parts

    def _text_nll(
        self, batch: WorldModelBatch, latents: torch.Tensor, weights: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K,)`` next-observation and ``(K,)`` reconstruction NLLs per target token, all members
        batched and logits taken only at scored positions (``EnsembleDynamics.logits_at``)."""
        outcome, current = batch.outcome_mask, batch.latent_mask  # (B, N), (B, N + 1)
        before = latents[:, :-1][outcome]  # (R, D)
        now = latents[current]  # (R', D)
        look_ids = torch.full(
            (now.shape[0], batch.query_ids.shape[-1]), self.tokenizer.pad_id, device=self.device
        )
        look_ids[:, 0] = self.tokenizer.look_id  # (R', A)
        look_mask = (look_ids != self.tokenizer.pad_id).long()  # (R', A)
        texts = torch.cat([batch.text_ids[:, 1:][outcome], batch.text_ids[current]])  # (R + R', S)
        scored = torch.cat([batch.text_mask[:, 1:][outcome], batch.text_mask[current]])[:, 1:].bool()  # (R + R', S - 1)
        context = DecoderContext(
            torch.cat([before, now]),  # (R + R', D)
            torch.cat([batch.query_ids[outcome], look_ids]),  # (R + R', A)
            torch.cat([batch.query_mask[outcome], look_mask]),  # (R + R', A)
            *self._copy_memory(batch, now.shape[0]),
        )
        logits = self.dynamics.logits_at(context, texts[:, :-1], scored)  # (K, P, V) at the P scored positions, row by row
        is_now = (torch.arange(texts.shape[0], device=self.device) >= before.shape[0])[:, None]  # (R + R', 1)
        token_weights = None
        if weights is not None:  # each token weighted by its trajectory's count in the member's resample
            owners = torch.cat([_owners(outcome), _owners(current)])[:, None]  # (R + R', 1)
            token_weights = weights[:, owners.expand_as(scored)[scored]]  # (K, P)
        part = is_now.expand_as(scored)[scored].long()  # (P,) 0: next observation, 1: reconstruction
        nll = scored_token_nll(logits, texts[:, 1:][scored], part, 2, token_weights)  # (K, 2)
        return nll[:, 0], nll[:, 1]

    def _copy_memory(
        self, batch: WorldModelBatch, looks: int
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """With the copy path, ``(R + R', S)`` copy-memory ids and mask for ``_text_nll``'s rows: each
        scored turn's previous observation, then nothing (all padding) for the ``R'`` ``<look>`` rows.

        A ``<look>`` row rewrites the observation the latent was folded to; given that observation
        to copy, the reconstruction would be trivial and no longer force the latent to hold the
        grid, and given the one before it, it would repeat the next-observation task without the
        action. So it reads the latent alone, as without the copy path. (None, None) without it."""
        if not self.copies_observation:
            return None, None
        outcome = batch.outcome_mask  # (B, N)
        rows, mask = batch.previous_ids[outcome], batch.previous_mask[outcome]  # (R, S)
        blank = torch.full((looks, rows.shape[1]), self.tokenizer.pad_id, dtype=rows.dtype, device=rows.device)
        return torch.cat([rows, blank]), torch.cat([mask, torch.zeros_like(blank)])  # (R + R', S)

    def _bootstrap_weights(self, batch: WorldModelBatch) -> torch.Tensor | None:
        """``(K, B)`` per-member resample counts of the batch's trajectories while training with
        ``config.bootstrap`` (drawn from the global RNG, which the fit seeds); None otherwise."""
        if not (self.training and self.config.bootstrap):
            return None
        return bootstrap_counts(self.config.num_members, batch.turn_count.shape[0]).to(self.device)

    # --- saving ---------------------------------------------------------------------------------------
    def _save_pretrained(self, save_directory: Path) -> None:
        safetensors.torch.save_model(self, str(Path(save_directory) / WEIGHTS_FILE))
        self.tokenizer.save(save_directory)

    @classmethod
    def _from_pretrained(
        cls,
        *,
        model_id: str,
        revision: str | None,
        cache_dir: str | Path | None,
        force_download: bool,
        local_files_only: bool,
        token: str | bool | None,
        map_location: str = "cpu",
        **model_kwargs: Any,
    ) -> "WorldModel":
        weights = Path(model_id) / WEIGHTS_FILE
        if not os.path.isfile(weights):
            raise FileNotFoundError(
                f"{weights} not found: WorldModel loads local folders with safetensors weights"
            )
        config: WorldModelConfig = model_kwargs.pop("config")
        tokenizer = TurnTokenizer.load(model_id, config.limits)
        model = cls(config, tokenizer, **{k: v for k, v in model_kwargs.items() if k == "seed"})
        safetensors.torch.load_model(model, str(weights), strict=True, device=map_location)
        return model.eval()
