"""``WorldModelOptions``: the ``world_model`` Hydra group, the world model's sizes and word caps.

Its ``encoder`` and ``decoder`` sections declare the knobs of the encoder and decoder once:
``EncoderConfig`` and ``DecoderConfig`` extend them with the sizes that come from the tokenizer
(vocabulary, row lengths), filled at build time by ``WorldModelConfig.from_options``, which is what a
saved model's config.json records.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any

from envs.checks import check_bool, check_int
from world_model.disagreement_score import check_score
from world_model.ensemble_options import LatentOptions
from world_model.lm.config import LMOptions


@dataclass
class EncoderSection:
    """The history encoder (``world_model.encoder.*``)."""

    embed_size: int = 64
    """Width of token embeddings and convolutions."""
    feature_size: int = 128
    """Width of one row's feature, the GRU's input."""
    conv_layers: int = 2
    """Residual convolution blocks (0: none)."""

    def __post_init__(self) -> None:
        check_int("world_model.encoder.embed_size", self.embed_size, 1)
        check_int("world_model.encoder.feature_size", self.feature_size, 1)
        check_int("world_model.encoder.conv_layers", self.conv_layers, 0)


@dataclass
class DecoderSection:
    """Each ensemble member's observation decoder (``world_model.decoder.*``)."""

    model_size: int = 64
    """Width of each member's Transformer decoder."""
    num_layers: int = 2
    """Blocks per member."""
    num_heads: int = 4
    """Attention heads; must divide model_size."""
    latent_slots: int = 8
    """Memory vectors cut from the latent."""
    copy_observation: bool = False
    """Also let the decoder cross-attend to the words of the observation the action was taken in (a
    copy path: grid envs mostly repeat it with a small edit); False keeps the decoder reading the
    latent and the action only (strict latent mediation)."""
    aligned_copy: bool = False
    """With the copy path, also start every position from the word at the same place in the
    observation acted in (a learned logit bonus for it): decoding as an edit of that observation."""

    def __post_init__(self) -> None:
        for name in ("model_size", "num_layers", "num_heads", "latent_slots"):
            check_int(f"world_model.decoder.{name}", getattr(self, name), 1)
        for name in ("copy_observation", "aligned_copy"):
            check_bool(f"world_model.decoder.{name}", getattr(self, name))
        if self.aligned_copy and not self.copy_observation:
            raise ValueError("world_model.decoder.aligned_copy needs world_model.decoder.copy_observation=true "
                             "(it reads the observation acted in)")
        if self.model_size % self.num_heads:
            raise ValueError(f"world_model.decoder.num_heads ({self.num_heads}) must divide "
                             f"world_model.decoder.model_size ({self.model_size})")


KIND_NAMES = ("latent", "lm")
"""The names of ``world_model.kinds.KINDS``, spelled here so that validating a config imports no model
(the table imports the models, which import this module); a test holds the two equal."""

SHARED_KEYS = ("name", "num_members", "head_hidden", "disagreement", "bootstrap", "max_observation_words",
               "max_action_words", "init")
"""The ``world_model`` keys every kind reads."""
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "latent": (*SHARED_KEYS, "ordinal_numbers", "latent_size", "encoder", "decoder"),
    "lm": (*SHARED_KEYS, "lm"),
}
"""Kind -> the ``world_model`` keys (a leaf, or a whole section) its build and fit read
(``world_model.kinds``); a value other than the default for any other key is refused at start, since
the kind would drop it without a word. Spelled here for the same reason as ``KIND_NAMES``; a test
sets every leaf to another value and holds each kind to this list."""


def _default(f: Field) -> Any:
    return f.default_factory() if f.default is MISSING else f.default


def changed_keys(options: Any, prefix: str = "") -> list[str]:
    """Dotted names of the leaves of dataclass ``options`` (sections walked recursively) whose value is
    not their field's default."""
    keys = []
    for f in fields(options):
        value = getattr(options, f.name)
        if is_dataclass(value):
            keys += changed_keys(value, f"{prefix}{f.name}.")
        elif value != _default(f):
            keys.append(prefix + f.name)
    return keys


def kinds_reading(key: str) -> list[str]:
    """The kinds whose ``KIND_KEYS`` cover the dotted ``key``."""
    return [kind for kind, read in KIND_KEYS.items() if any(key == r or key.startswith(f"{r}.") for r in read)]


def check_kind_reads(options: WorldModelOptions) -> None:
    """Refuse, naming them in one line, the keys set to a non-default value that ``options.name`` does not read."""
    unread = [(key, kinds_reading(key)) for key in changed_keys(options) if options.name not in kinds_reading(key)]
    if unread:
        raise ValueError("; ".join(f"world_model.{key} is read only by the {' and '.join(kinds)} world model; "
                                   f"world_model.name={options.name} does not use it (leave it at its default)"
                                   for key, kinds in unread))


@dataclass
class WorldModelOptions(LatentOptions):
    """Which world model (``name``), its sizes and the word caps of its tokenizer; the ensemble options
    (``num_members``, ``head_hidden``, ``disagreement``, ``bootstrap``, ``ordinal_numbers``) are
    declared in ``world_model.ensemble_options``. A key the chosen kind does not read (``KIND_KEYS``)
    set to a non-default value is refused, naming it."""

    name: str = "latent"
    """A kind of ``world_model.kinds``: ``latent`` (history latent + ensemble decoders) or ``lm`` (an
    ensemble of causal LMs over the text history, ``world_model.lm``; its shape is the ``lm`` section,
    its ensemble ``num_members``)."""
    lm: LMOptions = field(default_factory=LMOptions)
    """The LM world model's options (read only with ``name: lm``; set with another kind, refused)."""

    latent_size: int = 128
    """Size D of the history latent."""
    encoder: EncoderSection = field(default_factory=EncoderSection)
    """The history encoder."""
    decoder: DecoderSection = field(default_factory=DecoderSection)
    """Each member's observation decoder."""
    max_observation_words: int | None = None
    """Words kept of each observation; None uses the env's own cap (``default_token_limits``)."""
    max_action_words: int | None = None
    """Words kept of each action; None uses the env's own cap."""
    init: str | None = None
    """A saved world model to start a training run from (its folder, or a run or
    ``experiments.fit_world_model`` folder that saved one): the run builds the model as configured, loads
    those weights and refits as configured. Refused at start, naming this key, when it was saved for
    another env, other env options or another tokenizer (``experiments/init_models.py``)."""

    def __post_init__(self) -> None:
        check_score(self.disagreement, "world_model.disagreement")
        if self.name not in KIND_NAMES:
            raise ValueError(f"world_model.name must be one of {KIND_NAMES}, got {self.name!r}")
        if isinstance(self.lm, dict):
            self.lm = LMOptions(**self.lm)
        if isinstance(self.encoder, dict):  # built by hand rather than by Hydra
            self.encoder = EncoderSection(**self.encoder)
        if isinstance(self.decoder, dict):
            self.decoder = DecoderSection(**self.decoder)
        check_int("world_model.latent_size", self.latent_size, 1)
        self.check_latent("world_model")
        for name in ("max_observation_words", "max_action_words"):
            check_int(f"world_model.{name}", getattr(self, name), 1, optional=True)
        check_kind_reads(self)
        if self.name == "lm":
            self.lm.check_all_read()
