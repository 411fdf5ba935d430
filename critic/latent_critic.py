"""``LatentCritic``: the world model's history encoder with a value head, behind the ``TurnCritic`` seam.

The critic reads what happened, not the policy's prompt: each state is a history (the first
observation, then per turn the action and what came back, see ``critic.history_text``), tokenised
by the world model's ``TurnTokenizer`` and folded turn by turn into a latent by a
``LatentStateEncoder`` (GRU over per-turn features); an MLP head maps the latent to ``V(s)``.
Because the latent is updated once per turn, valuing a live agent's state costs O(1) per turn
(``initial_state`` / ``step``), and a batch of states from one trajectory costs one pass over it.

Value head: a scalar regression (one linear output, no squashing). The learner fits turn values with
a clipped MSE on scalar predictions (``policy.losses.clipped_value_loss``) and sequence values with
BCE on a logit, and returns here are small and bounded (success rewards in [0, 1], minus small
invalid-action penalties), so DreamerV3's two-hot distributional head, whose point is robustness to
returns spanning orders of magnitude, would buy nothing and would need a loss of its own.

Three ways in, one set of weights:

- ``forward(CriticStates)`` -> ``(N,)``: reads ``states.histories`` (``(trajectory, k)`` pairs) and
  ignores the prompt ids; gradients flow, as the learner needs;
- ``value(histories)``: chat-message histories (``envs.chat`` roles) -> ``(H,)`` values, no gradient;
- ``initial_state(observation)`` then ``step(state, action, result)`` -> ``(state, value)``, no gradient.

Saved by ``save_pretrained(folder)`` as ``model.safetensors``, ``config.json`` and the tokenizer files
(``tokenizer/``, as the world model saves its own). ``from_pretrained(folder)`` reads a local folder
only, needs neither Hydra nor the training stack, never unpickles anything (a folder holding only a
``pytorch_model.bin`` is refused), and answers a missing, truncated or mismatched file with one
``FileNotFoundError`` / ``ValueError`` naming it.
"""

# No ``from __future__ import annotations``: ``PyTorchModelHubMixin`` reads the ``config`` annotation
# at runtime, and a string annotation defeats that.

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from critic.base import CriticStates
from critic.config import LatentCriticSection
from critic.history_text import HistoryText, from_messages, from_trajectory
from critic.saved_layouts import upgrade_critic_layout
from envs.strict_json import strict_dumps
from world_model.encoder import EncoderConfig, LatentStateEncoder
from world_model.turn_tokens import TokenLimits, TurnTokenizer, pad_nested, pad_rows

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")


@dataclass(kw_only=True)
class LatentCriticConfig(LatentCriticSection):
    """The latent critic as built, what its config.json records: its options (``LatentCriticSection``,
    the ``critic.latent`` section, declared once there) with the word caps of its tokenizer, plus the
    tokenizer's vocabulary size. Its history encoder's config (``encoder``) follows from them."""

    vocab_size: int
    """Number of token ids (the tokenizer's ``len``)."""
    max_observation_words: int
    """``TokenLimits.observation`` of the tokenizer: longer observations and results keep their first words."""
    max_action_words: int
    """``TokenLimits.action`` of the tokenizer: longer actions keep their first words."""

    def __post_init__(self) -> None:  # every field, the section's too, named as this class's
        for name, minimum in (("latent_size", 1), ("embed_size", 1), ("feature_size", 1), ("conv_layers", 0),
                              ("head_hidden_size", 0), ("vocab_size", 1), ("max_observation_words", 1),
                              ("max_action_words", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"LatentCriticConfig.{name} must be an integer >= {minimum}, got {value!r}")

    @property
    def limits(self) -> TokenLimits:
        return TokenLimits(observation=self.max_observation_words, action=self.max_action_words)

    @property
    def encoder(self) -> EncoderConfig:
        """The history encoder (``world_model.encoder``), reading rows up to the longest turn row."""
        return EncoderConfig(embed_size=self.embed_size, feature_size=self.feature_size, conv_layers=self.conv_layers,
                             vocab_size=self.vocab_size, max_tokens=self.limits.encoder_tokens,
                             latent_size=self.latent_size)

    @classmethod
    def for_tokenizer(
        cls, tokenizer: TurnTokenizer, *, latent_size: int = 64, head_hidden_size: int = 64, embed_size: int = 64,
        feature_size: int = 128, conv_layers: int = 2,
    ) -> "LatentCriticConfig":
        """Sizes from ``tokenizer`` (vocabulary, caps) and the encoder's options given here."""
        limits = tokenizer.limits
        return cls(latent_size=latent_size, embed_size=embed_size, feature_size=feature_size, conv_layers=conv_layers,
                   head_hidden_size=head_hidden_size, vocab_size=len(tokenizer),
                   max_observation_words=limits.observation, max_action_words=limits.action)

    @classmethod
    def from_section(cls, tokenizer: TurnTokenizer, section: LatentCriticSection) -> "LatentCriticConfig":
        """The ``critic.latent`` options, with the vocabulary and caps of ``tokenizer`` (which already
        applies the section's word caps)."""
        return cls.for_tokenizer(
            tokenizer, latent_size=section.latent_size, head_hidden_size=section.head_hidden_size,
            embed_size=section.embed_size, feature_size=section.feature_size, conv_layers=section.conv_layers,
        )

    @classmethod
    def from_dict(cls, data: Any) -> "LatentCriticConfig":
        """From config.json's object; unknown or missing keys raise ``ValueError`` naming them."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        data = upgrade_critic_layout(data)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown LatentCriticConfig keys {unknown}")
        try:
            return cls(**data)
        except TypeError as err:  # a missing key
            raise ValueError(f"LatentCriticConfig: {err}") from err


class LatentCritic(nn.Module, PyTorchModelHubMixin):
    """History encoder + value head (see the module docstring).

    Weights are drawn from ``seed`` alone, whatever ran before, and the global torch RNG is left as
    it was. ``tokenizer`` must match the config (vocabulary size and word caps).
    """

    def __init__(self, config: LatentCriticConfig, tokenizer: TurnTokenizer, *, seed: int = 0) -> None:
        super().__init__()
        tokenizer.check_matches(config.encoder.vocab_size, config.limits, "LatentCriticConfig")
        self.config = config
        self.tokenizer = tokenizer
        latent = config.encoder.latent_size
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.encoder = LatentStateEncoder(config.encoder)
            if config.head_hidden_size:
                self.head = nn.Sequential(
                    nn.Linear(latent, config.head_hidden_size), nn.GELU(), nn.Linear(config.head_hidden_size, 1)
                )
            else:
                self.head = nn.Linear(latent, 1)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # --- the seam -----------------------------------------------------------------------------------
    def forward(self, states: CriticStates) -> torch.Tensor:
        """``(N,)`` values of the ``(trajectory, k)`` histories in ``states``; the prompt ids are not read."""
        if states.histories is None:
            raise ValueError(
                "LatentCritic reads CriticStates.histories, which is None: build the states with their "
                "(trajectory, k) histories (RolloutBatch.critic_states, LMPolicy.state_prompts)"
            )
        full: dict[int, HistoryText] = {}  # id(trajectory) -> its whole history, built once per call
        pairs = []
        for trajectory, k in states.histories:
            if id(trajectory) not in full:
                full[id(trajectory)] = from_trajectory(trajectory)
            pairs.append((full[id(trajectory)], k))
        return self.head(self._latents(pairs)).squeeze(-1).float()  # (N,)

    def encode(self, histories: Sequence[HistoryText]) -> torch.Tensor:
        """``(B, D)`` latents after each whole history (gradients flow when enabled)."""
        return self._latents([(history, history.num_turns) for history in histories])

    def _latents(self, pairs: Sequence[tuple[HistoryText, int]]) -> torch.Tensor:
        """``(B, D)`` latent after ``k`` turns of each ``(history, k)``.

        Histories are encoded once each (equal ones once in all), up to the largest ``k`` asked of
        them, and the latent after ``k`` turns is read from ``LatentStateEncoder.states``.
        """
        if not pairs:
            return torch.zeros(0, self.config.encoder.latent_size, device=self.device)
        unique: dict[HistoryText, int] = {}
        needed: list[int] = []
        rows: list[tuple[int, int]] = []
        for history, k in pairs:
            if not 0 <= k <= history.num_turns:
                raise ValueError(f"k={k} completed turns is outside [0, {history.num_turns}]")
            u = unique.setdefault(history, len(unique))
            if u == len(needed):
                needed.append(0)
            needed[u] = max(needed[u], k)
            rows.append((u, k))
        histories = list(unique)
        tk, device = self.tokenizer, self.device
        obs_words = tk.observation_words([h.observation for h in histories])
        obs_ids, obs_mask = pad_rows([tk.observation_row(w) for w in obs_words], tk.pad_id)  # (U, T0)
        actions = tk.action_words([a for h, n in zip(histories, needed, strict=True) for a in h.actions[:n]])
        results = tk.observation_words([r for h, n in zip(histories, needed, strict=True) for r in h.results[:n]])
        turn_rows = [tk.turn_row(r, a) for r, a in zip(results, actions, strict=True)]
        nested, start = [], 0
        for n in needed:
            nested.append(turn_rows[start : start + n])
            start += n
        turn_ids, turn_mask = pad_nested(nested, tk.pad_id)  # (U, N, T)
        latents = self.encoder.states(
            obs_ids.to(device), obs_mask.to(device), turn_ids.to(device), turn_mask.to(device),
            torch.tensor(needed, device=device),
        )  # (U, N + 1, D)
        index = torch.tensor(rows, device=device)  # (B, 2): (history, k)
        return latents[index[:, 0], index[:, 1]]  # (B, D)

    # --- text API -----------------------------------------------------------------------------------
    @torch.no_grad()
    def value(self, histories: Sequence[Sequence[dict[str, str]]]) -> torch.Tensor:
        """``(H,)`` float values on the CPU, one per chat-message history (``critic.history_text.from_messages``)."""
        parsed = []
        for i, messages in enumerate(histories):
            try:
                parsed.append(from_messages(messages))
            except ValueError as err:
                raise ValueError(f"histories[{i}]: {err}") from err
        return self.head(self.encode(parsed)).squeeze(-1).float().cpu()  # (H,)

    @torch.no_grad()
    def initial_state(self, observation: str) -> torch.Tensor:
        """``(D,)`` latent after the first observation."""
        ids, mask = self.tokenizer.encode_observations([observation])  # (1, T)
        return self.encoder.initial_state(ids.to(self.device), mask.to(self.device))[0]  # (D,)

    @torch.no_grad()
    def step(self, state: torch.Tensor, action: str, result: str) -> tuple[torch.Tensor, float]:
        """Fold one turn (the action and what came back) into a ``(D,)`` latent: ``(new latent, its value)``.

        O(1) in the length of the history: only this turn's words are read.
        """
        if state.shape != (self.config.encoder.latent_size,):
            raise ValueError(f"state must be a ({self.config.encoder.latent_size},) latent, got {tuple(state.shape)}")
        ids, mask = self.tokenizer.encode_turns([action], [result])  # (1, T)
        new = self.encoder.step(state.to(self.device)[None], ids.to(self.device), mask.to(self.device))[0]  # (D,)
        return new, self.state_value(new)

    @torch.no_grad()
    def state_value(self, state: torch.Tensor) -> float:
        """The value of a ``(D,)`` latent from ``initial_state`` or ``step``."""
        return float(self.head(state.to(self.device)[None]).squeeze())

    # --- saving -------------------------------------------------------------------------------------
    def _save_pretrained(self, save_directory: Path) -> None:
        folder = Path(save_directory)
        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in self.state_dict().items()}
        safetensors.torch.save_file(tensors, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
        (folder / CONFIG_FILE).write_text(strict_dumps(asdict(self.config), sort_keys=True, indent=2))
        self.tokenizer.save(folder)

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike, *, map_location: str = "cpu") -> "LatentCritic":  # type: ignore[override]
        """A critic saved by ``save_pretrained``, read from a local folder, in eval mode.

        Raises ``FileNotFoundError`` for a missing folder or file and ``ValueError`` for an unreadable,
        truncated or mismatched one, naming it. Only safetensors weights are read: nothing is unpickled.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a directory: LatentCritic loads local folders written by save_pretrained")
        config_path = folder / CONFIG_FILE
        if not config_path.is_file():
            raise FileNotFoundError(f"{config_path} not found: not a folder written by LatentCritic.save_pretrained")
        try:
            config = LatentCriticConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        except (ValueError, UnicodeDecodeError) as err:  # json.JSONDecodeError is a ValueError
            raise ValueError(f"{config_path} is not a LatentCriticConfig: {err}") from err

        weights = folder / WEIGHTS_FILE
        if not weights.is_file():
            pickles = sorted(p.name for p in folder.iterdir() if p.name.endswith(PICKLE_SUFFIXES))
            why = (f"; {pickles} are pickle checkpoints, which LatentCritic never loads (untrusted pickles run code)"
                   if pickles else "")
            raise FileNotFoundError(f"{weights} not found{why}: LatentCritic loads safetensors weights only")
        try:
            state = safetensors.torch.load_file(str(weights), device=map_location)
        except Exception as err:  # safetensors raises its own SafetensorError on a truncated or foreign file
            raise ValueError(f"{weights} is not a readable safetensors file (truncated or corrupt?): {err}") from err

        tokenizer_file = folder / TurnTokenizer.TOKENIZER_FOLDER / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise FileNotFoundError(f"{tokenizer_file} not found: the critic's tokenizer is saved next to its weights")
        try:
            tokenizer = TurnTokenizer.load(folder, config.limits)
        except Exception as err:
            raise ValueError(f"{tokenizer_file.parent} does not hold a readable turn tokenizer: {err}") from err
        try:
            model = cls(config, tokenizer)
        except ValueError as err:
            raise ValueError(f"{folder}: {err}") from err

        expected = model.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        reshaped = sorted(k for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
        if missing or unexpected or reshaped:
            raise ValueError(
                f"{weights} does not match {config_path}: missing {missing}, unexpected {unexpected}, "
                f"wrong shape {[(k, tuple(state[k].shape), tuple(expected[k].shape)) for k in reshaped]}"
            )
        model.load_state_dict(state, strict=True)
        return model.to(map_location).eval()
