"""Token rows for the world model: observations, turns, action queries and decoder targets.

The vocabulary is the env's word list (``envs.tokenizer.build_word_tokenizer``) plus four marker
words. Every text is cut into words, capped, framed by markers and right-padded with the pad id
into an id tensor with a 0/1 mask. Right padding is safe here: no row is ever extended on its
right through padding (the decoder appends to unpadded prefixes and reads its own lengths), and
every module masks padding explicitly.

Rows, in word ids (caps from ``TokenLimits``, markers excluded from the caps):

- encoder observation row ``<obs> observation </s>``: the first observation of an episode;
- encoder turn row ``<res> result <act> action </s>``: one turn, the result first so that its
  words sit at the same positions whatever the action's length (a grid cell keeps its position);
- decoder query row ``<act> action`` asks for the next observation, ``<look>`` for the latest one;
- decoder text row ``<s> observation </s>``: teacher forcing reads ``row[:-1]``, predicts ``row[1:]``.

Text longer than its cap keeps its first words (an action's start, a page's top); the env caps in
``default_token_limits`` are set so that no observation the env can emit under its options is cut.
Marker words typed inside a text are not markers: they are split into ordinary (unknown) pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerFast

from envs.frozen_lake import DEFAULT_MAP
from envs.tokenizer import NEWLINE, build_word_tokenizer
from world_model.ordinal import integer_value

OBS, ACT, RES, LOOK = "<obs>", "<act>", "<res>", "<look>"
MARKERS = (OBS, ACT, RES, LOOK)


@dataclass(frozen=True)
class TokenLimits:
    """Word caps per text, markers excluded."""

    observation: int
    """Longest observation or tool result, in words."""
    action: int
    """Longest action, in words; a longer action keeps its first words."""

    def __post_init__(self) -> None:
        for name in ("observation", "action"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TokenLimits.{name} must be an integer >= 1, got {value!r}")

    @property
    def encoder_tokens(self) -> int:
        """Longest encoder row: ``<res> result <act> action </s>``."""
        return self.observation + self.action + 3

    @property
    def query_tokens(self) -> int:
        """Longest decoder query row: ``<act> action``."""
        return self.action + 1

    @property
    def text_tokens(self) -> int:
        """Longest decoder text row: ``<s> observation </s>``."""
        return self.observation + 2


def default_token_limits(env_name: str, env_kwargs: dict[str, Any] | None = None) -> TokenLimits:
    """Caps that hold every observation ``env_name`` can emit under ``env_kwargs``.

    Counted from the env's templates: error lines are prefixed to a page or grid, minishop's
    longest pages are a results page and an item page with every colour, both after the format help
    and with the out-of-turns line. Unknown envs raise: give ``TokenLimits`` explicitly.
    """
    kwargs = dict(env_kwargs or {})
    if env_name == "hidden_number":
        lines = kwargs.get("max_turns", 6) if kwargs.get("observation", "last") == "transcript" else 1
        return TokenLimits(observation=5 * lines + 16, action=8)  # 5 words a line, 14-word error line
    if env_name == "frozen_lake":
        rows, cols = _frozen_lake_shape(kwargs)
        return TokenLimits(observation=14 + rows * (cols + 1), action=8)  # header line, cells and newlines
    if env_name == "sokoban":
        rows, cols = kwargs.get("dim_room", (6, 6))
        return TokenLimits(observation=17 + rows * (cols + 1), action=8)  # invalid-action line, grid
    if env_name == "minishop":
        per_page = kwargs.get("results_per_page", 5)
        return TokenLimits(observation=max(88 + 15 * per_page, 188), action=16)
    raise ValueError(f"no default token limits for env {env_name!r}; pass TokenLimits explicitly")


def token_limits(
    env_name: str,
    env_kwargs: dict[str, Any] | None,
    *,
    observation: int | None = None,
    action: int | None = None,
    option_names: tuple[str, str] = ("observation", "action"),
) -> TokenLimits:
    """Caps given explicitly, the env's ``default_token_limits`` for whichever is None.

    ``option_names`` are the config keys behind ``observation`` and ``action``: an env without
    defaults is refused with a message naming them.
    """
    if observation is None or action is None:
        try:
            default = default_token_limits(env_name, env_kwargs)
        except ValueError as err:
            raise ValueError(f"{err}: set {option_names[0]} and {option_names[1]}") from err
        observation = default.observation if observation is None else observation
        action = default.action if action is None else action
    return TokenLimits(observation=observation, action=action)


def _frozen_lake_shape(kwargs: dict[str, Any]) -> tuple[int, int]:
    if kwargs.get("size") is not None:
        return kwargs["size"], kwargs["size"]
    desc = kwargs.get("desc") or DEFAULT_MAP
    return len(desc), len(desc[0])


def pad_rows(
    rows: Sequence[Sequence[int]], pad_id: int, length: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists to ``(B, T)`` ids and a ``(B, T)`` long mask (T: ``length`` or the longest row)."""
    width = max([len(r) for r in rows] + [1]) if length is None else length
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        if len(row) > width:
            raise ValueError(f"row {b} has {len(row)} ids, more than the width {width}")
        ids[b, : len(row)] = torch.tensor(list(row), dtype=torch.long)
        mask[b, : len(row)] = 1
    return ids, mask


def pad_nested(rows: Sequence[Sequence[Sequence[int]]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ragged ``[batch][item][id]`` lists to ``(B, N, T)`` ids and mask (missing items: padding)."""
    n = max([len(r) for r in rows] + [1])
    width = max([len(x) for r in rows for x in r] + [1])
    ids = torch.full((len(rows), n, width), pad_id, dtype=torch.long)  # (B, N, T)
    mask = torch.zeros((len(rows), n, width), dtype=torch.long)  # (B, N, T)
    for b, items in enumerate(rows):
        if items:
            ids[b, : len(items)], mask[b, : len(items)] = pad_rows(items, pad_id, width)
    return ids, mask


class TurnTokenizer:
    """The world model's word tokenizer with its caps; builds every row kind of the module docstring."""

    TOKENIZER_FOLDER = "tokenizer"

    def __init__(self, tokenizer: PreTrainedTokenizerFast, limits: TokenLimits) -> None:
        missing = [m for m in MARKERS if m not in tokenizer.get_vocab()]
        if missing:
            raise ValueError(f"tokenizer lacks the marker words {missing}; build it with TurnTokenizer.build")
        self.tokenizer = tokenizer
        self.limits = limits
        vocab = tokenizer.get_vocab()
        self.pad_id, self.bos_id, self.eos_id = (
            tokenizer.pad_token_id,
            tokenizer.bos_token_id,
            tokenizer.eos_token_id,
        )
        self.obs_id, self.act_id, self.res_id, self.look_id = (vocab[m] for m in MARKERS)
        self.newline_id = vocab[NEWLINE]

    @classmethod
    def build(cls, vocabulary: Sequence[str], limits: TokenLimits) -> TurnTokenizer:
        """From an env's word list (``env.vocabulary()``) plus the marker words."""
        return cls(build_word_tokenizer(vocabulary, extra_special_tokens=MARKERS), limits)

    @classmethod
    def for_env(cls, env_name: str, env_kwargs: dict[str, Any] | None = None) -> TurnTokenizer:
        """The env's vocabulary with ``default_token_limits``."""
        from envs.registry import make  # imports every env: only when asked

        env = make(env_name, **dict(env_kwargs or {}))
        return cls.build(env.vocabulary(), default_token_limits(env_name, env_kwargs))

    def __len__(self) -> int:
        return len(self.tokenizer)

    def check_matches(self, vocab_size: int, limits: TokenLimits, owner: str) -> None:
        """Refuse a model config (``owner``, e.g. ``"WorldModelConfig"``) built for another tokenizer."""
        if len(self) != vocab_size:
            raise ValueError(f"the tokenizer has {len(self)} ids but {owner}.encoder.vocab_size is {vocab_size}")
        if self.limits != limits:
            raise ValueError(f"the tokenizer's caps {self.limits} differ from the config's {limits}")

    def integer_values(self) -> list[int | None]:
        """Per token id, the integer its word spells (``"7"`` -> 7), None for every other word and
        for the special tokens: a function of the vocabulary alone (``world_model.ordinal``)."""
        words = self.tokenizer.convert_ids_to_tokens(list(range(len(self))))
        return [integer_value(w) for w in words]

    def save(self, folder: str | Path) -> None:
        self.tokenizer.save_pretrained(str(Path(folder) / self.TOKENIZER_FOLDER))

    @classmethod
    def load(cls, folder: str | Path, limits: TokenLimits) -> TurnTokenizer:
        path = Path(folder) / cls.TOKENIZER_FOLDER
        return cls(PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True), limits)

    # --- words ------------------------------------------------------------------------------------
    def words(self, texts: Sequence[str], cap: int) -> list[list[int]]:
        """Word ids of each text, first ``cap`` kept; marker words in the text are not markers."""
        if not texts:
            return []
        encoded = self.tokenizer(list(texts), add_special_tokens=False, split_special_tokens=True)
        return [ids[:cap] for ids in encoded["input_ids"]]

    def observation_words(self, texts: Sequence[str]) -> list[list[int]]:
        return self.words(texts, self.limits.observation)

    def action_words(self, texts: Sequence[str]) -> list[list[int]]:
        return self.words(texts, self.limits.action)

    # --- rows from word ids -----------------------------------------------------------------------
    def observation_row(self, observation: Sequence[int]) -> list[int]:
        return [self.obs_id, *observation, self.eos_id]

    def turn_row(self, result: Sequence[int], action: Sequence[int]) -> list[int]:
        return [self.res_id, *result, self.act_id, *action, self.eos_id]

    def query_row(self, action: Sequence[int] | None) -> list[int]:
        """``<act> action``, or ``<look>`` (asking for the latest observation) when ``action`` is None."""
        return [self.look_id] if action is None else [self.act_id, *action]

    def text_row(self, observation: Sequence[int]) -> list[int]:
        return [self.bos_id, *observation, self.eos_id]

    # --- padded batches from text -----------------------------------------------------------------
    def encode_observations(self, observations: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder observation rows: ``(B, T)`` ids and mask."""
        return pad_rows([self.observation_row(w) for w in self.observation_words(observations)], self.pad_id)

    def encode_turns(
        self, actions: Sequence[str], results: Sequence[str]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder turn rows (action text plus the result it produced): ``(B, T)`` ids and mask."""
        if len(actions) != len(results):
            raise ValueError(f"{len(actions)} actions for {len(results)} results")
        rows = [
            self.turn_row(r, a)
            for r, a in zip(self.observation_words(results), self.action_words(actions), strict=True)
        ]
        return pad_rows(rows, self.pad_id)

    def encode_queries(self, actions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Decoder query rows ``<act> action``: ``(B, A)`` ids and mask."""
        return pad_rows([self.query_row(w) for w in self.action_words(actions)], self.pad_id)

    def encode_texts(self, observations: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Decoder text rows ``<s> observation </s>``: ``(B, S)`` ids and mask."""
        return pad_rows([self.text_row(w) for w in self.observation_words(observations)], self.pad_id)

    # --- back to text -----------------------------------------------------------------------------
    def generated_words(self, ids: Sequence[int]) -> list[int]:
        """The word ids of a generated row: up to its first ``</s>``, without pad or ``<s>``."""
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                words.append(int(i))
        return words

    def decode(self, ids: Sequence[int]) -> str:
        """Text of generated word ids: words joined by spaces, lines by newlines (the envs' layout)."""
        pieces = self.tokenizer.convert_ids_to_tokens(self.generated_words(ids))
        lines: list[list[str]] = [[]]
        for piece in pieces:
            if piece == NEWLINE:
                lines.append([])
            else:
                lines[-1].append(piece)
        return "\n".join(" ".join(line) for line in lines)
