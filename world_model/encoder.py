"""``LatentStateEncoder``: an agent's history (first observation, then turns) folded into a fixed-size latent.

Two parts:

- ``TurnEmbedder`` reads one token row (an observation row or a turn row, see ``turn_tokens``)
  into a feature vector. Tokens get a learned embedding (with ``ordinal_numbers``, plus an ordinal
  component for number words, ``world_model.ordinal``) plus a learned absolute position
  embedding, then residual 1-D convolutions give each position its neighbours (``guess 8 :``
  before ``higher``; a grid cell's left and right cells). The row is then read out twice: a
  *positional readout* projects every position to a few channels and flattens them in order, so
  which word stands at which position survives exactly (a grid's layout, the player's cell); a
  masked mean adds a summary that does not move when a prefix (an error line) shifts the words.
  A bag of words would lose both order and layout, and the latent must carry the whole current
  observation for the decoder to copy and edit it.
- A GRU cell updates the latent once per row: the first observation from a zero state, then one
  update per turn, so folding a turn costs the same however long the history is. The latent is a
  deterministic function of the history; randomness enters as the sampled outcome text that the
  world model folds back in, like a real turn (DreamerV3's deterministic path, with the observed
  or sampled text in place of its stochastic latent).

Everything is padding-invariant: padding is zeroed before every convolution and the readout is
padded to ``max_tokens``, so a row gives the same feature whatever width its batch was padded to,
and ``step`` turn by turn agrees with ``encode`` on the whole history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from einops import rearrange, reduce
from torch import nn

from world_model.config import EncoderSection
from world_model.ordinal import OrdinalEmbedding, token_table


@dataclass(kw_only=True)
class EncoderConfig(EncoderSection):
    """The history encoder as built: its options (``EncoderSection``, the YAML's ``encoder`` section,
    declared once there) plus the sizes that come from the tokenizer and the model."""

    vocab_size: int
    """Number of token ids (the turn tokenizer's ``len``)."""
    max_tokens: int
    """Longest row read (``TokenLimits.encoder_tokens``); the positional readout has this many slots."""
    kernel_size: int = 3
    """Convolution width in tokens; odd, so a position sees as many words left as right."""
    readout_channels: int = 4
    """Channels per position in the positional readout."""
    latent_size: int = 128
    """Size D of the latent state."""

    def __post_init__(self) -> None:  # every field, the section's too, named as this class's
        for f in fields(self):
            value = getattr(self, f.name)
            minimum = 0 if f.name == "conv_layers" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"EncoderConfig.{f.name} must be an integer >= {minimum}, got {value!r}")
        if self.kernel_size % 2 == 0:
            raise ValueError(f"EncoderConfig.kernel_size must be odd, got {self.kernel_size}")


class TurnEmbedder(nn.Module):
    """``(B, T)`` ids and mask -> ``(B, F)`` row features (see the module docstring).

    ``integer_values`` (per token id, the integer the word spells or None) turns on the ordinal
    number component of the embeddings (``world_model.ordinal``); None: plain word embeddings.
    """

    def __init__(self, config: EncoderConfig, integer_values: Sequence[int | None] | None = None) -> None:
        super().__init__()
        self.max_tokens = config.max_tokens
        self.tokens = nn.Embedding(config.vocab_size, config.embed_size)
        self.positions = nn.Embedding(config.max_tokens, config.embed_size)
        self.norms = nn.ModuleList(nn.LayerNorm(config.embed_size) for _ in range(config.conv_layers))
        self.convs = nn.ModuleList(
            nn.Conv1d(
                config.embed_size, config.embed_size, config.kernel_size, padding=config.kernel_size // 2
            )
            for _ in range(config.conv_layers)
        )
        self.readout = nn.Linear(config.embed_size, config.readout_channels)
        self.from_readout = nn.Linear(config.max_tokens * config.readout_channels, config.feature_size)
        self.from_mean = nn.Linear(config.embed_size, config.feature_size)
        self.out_norm = nn.LayerNorm(config.feature_size)
        self.ordinal = None if integer_values is None else OrdinalEmbedding(integer_values, config.embed_size)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        width = ids.shape[1]
        if width > self.max_tokens:
            raise ValueError(f"rows of {width} tokens exceed the encoder's max_tokens ({self.max_tokens})")
        keep = rearrange(mask.to(self.tokens.weight.dtype), "b t -> b t 1")  # (B, T, 1)
        positions = torch.arange(width, device=ids.device)  # (T,)
        words = F.embedding(ids, token_table(self.tokens, self.ordinal))  # (B, T, E)
        x = (words + self.positions(positions)) * keep  # (B, T, E)
        for norm, conv in zip(self.norms, self.convs, strict=True):
            h = conv(rearrange(norm(x) * keep, "b t e -> b e t"))  # (B, E, T); padding enters as zeros
            x = (x + F.gelu(rearrange(h, "b e t -> b t e"))) * keep  # (B, T, E)
        cells = F.pad(self.readout(x) * keep, (0, 0, 0, self.max_tokens - width))  # (B, max_tokens, C)
        ordered = self.from_readout(rearrange(cells, "b t c -> b (t c)"))  # (B, F)
        count = reduce(keep, "b t 1 -> b 1", "sum").clamp(min=1.0)  # (B, 1)
        mean = reduce(x, "b t e -> b e", "sum") / count  # (B, E)
        return self.out_norm(ordered + self.from_mean(mean))  # (B, F)


class LatentStateEncoder(nn.Module):
    """History -> latent ``(B, D)``; batched, with ragged histories (see the module docstring).
    ``integer_values``: see ``TurnEmbedder``."""

    def __init__(self, config: EncoderConfig, integer_values: Sequence[int | None] | None = None) -> None:
        super().__init__()
        self.config = config
        self.embed = TurnEmbedder(config, integer_values)
        self.core = nn.GRUCell(config.feature_size, config.latent_size)

    @property
    def latent_size(self) -> int:
        return self.config.latent_size

    def initial_state(self, obs_ids: torch.Tensor, obs_mask: torch.Tensor) -> torch.Tensor:
        """The latent after the first observation: ``(B, T)`` observation rows -> ``(B, D)``."""
        features = self.embed(obs_ids, obs_mask)  # (B, F)
        zero = features.new_zeros(features.shape[0], self.latent_size)  # (B, D)
        return self.core(features, zero)  # (B, D)

    def step(self, state: torch.Tensor, turn_ids: torch.Tensor, turn_mask: torch.Tensor) -> torch.Tensor:
        """Fold one more turn: ``(B, D)`` latent and ``(B, T)`` turn rows -> ``(B, D)``."""
        return self.core(self.embed(turn_ids, turn_mask), state)  # (B, D)

    def states(
        self,
        obs_ids: torch.Tensor,
        obs_mask: torch.Tensor,
        turn_ids: torch.Tensor,
        turn_mask: torch.Tensor,
        turn_count: torch.Tensor,
    ) -> torch.Tensor:
        """Every latent along the histories: ``(B, N + 1, D)``, entry ``k`` after ``k`` turns.

        ``turn_ids`` / ``turn_mask`` are ``(B, N, T)``; row ``b`` holds ``turn_count[b]`` turns, and
        its entries past them repeat the latent after its last turn (those turn rows are not read).
        """
        batch, n_turns = turn_ids.shape[:2]
        turn_count = turn_count.to(turn_ids.device)
        if turn_count.shape != (batch,) or bool((turn_count < 0).any()) or bool((turn_count > n_turns).any()):
            raise ValueError(
                f"turn_count must be (B,) = ({batch},) counts in 0..{n_turns}, got {turn_count.tolist()}"
            )
        real = torch.arange(n_turns, device=turn_ids.device) < rearrange(turn_count, "b -> b 1")  # (B, N)
        state = self.initial_state(obs_ids, obs_mask)  # (B, D)
        features = state.new_zeros(batch, n_turns, self.config.feature_size)  # (B, N, F)
        if bool(real.any()):
            features[real] = self.embed(turn_ids[real], turn_mask[real])  # (R, F) for the R real turns
        out = [state]
        for n in range(n_turns):
            moved = self.core(features[:, n], state)  # (B, D)
            state = torch.where(real[:, n : n + 1], moved, state)  # (B, D); finished rows keep their state
            out.append(state)
        return rearrange(torch.stack(out), "n b d -> b n d")  # (B, N + 1, D)

    def encode(
        self,
        obs_ids: torch.Tensor,
        obs_mask: torch.Tensor,
        turn_ids: torch.Tensor,
        turn_mask: torch.Tensor,
        turn_count: torch.Tensor,
    ) -> torch.Tensor:
        """The latent after each row's whole history: ``(B, D)`` (see ``states``)."""
        return self.states(obs_ids, obs_mask, turn_ids, turn_mask, turn_count)[:, -1]  # (B, D)
