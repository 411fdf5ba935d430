"""The LM policy's configuration: which model, how the history is rendered, how actions are sampled;
and ``PPOConfig``, the hyper-parameters of one PPO update (``algo.ppo.*``).

A Hydra structured config: primitives, ``Optional[str]``, a list of names and the nested ``LoRAConfig``;
ranges checked in ``__post_init__``. The loss options' names (``AGG_MODES``, ``KL_KINDS``) live here,
beside the config that picks them, so that this file imports nothing of ``policy``:
``policy.advantages.config`` holds a ``PPOConfig`` and ``policy.losses`` reads the estimators' helpers,
and neither loops back through the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

ARCHITECTURES = ("llama", "qwen2")
TOKENIZERS = ("auto", "word", "bpe")
AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_KINDS = ("k1", "abs", "k2", "k3")
OLD_LOGP_SOURCES = ("sampling", "recompute")
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass
class LoRAConfig:
    """LoRA adapters on a pretrained policy (``peft``): only they train, the base weights stay frozen,
    and the KL reference is the same model with its adapters switched off."""

    rank: int = 0
    """Rank of each adapter; 0 trains every weight of the model instead (no adapters)."""

    alpha: float = 16.0
    """LoRA's scale numerator: an adapter's update is multiplied by alpha / rank."""

    dropout: float = 0.0
    """Dropout on an adapter's input while training."""

    targets: list[str] = field(default_factory=lambda: list(DEFAULT_LORA_TARGETS))
    """Names of the linear modules that get an adapter (Llama/Qwen2 names by default)."""

    save_merged: bool = True
    """Also write the merged model (base plus adapters, a plain Hugging Face folder) beside the adapters when
    the policy is saved, so a saved run evaluates without peft; false saves the adapters only."""

    def __post_init__(self) -> None:
        if self.rank < 0:
            raise ValueError(f"PolicyConfig.lora.rank must be >= 0 (0: no adapters), got {self.rank}")
        if not self.alpha > 0:
            raise ValueError(f"PolicyConfig.lora.alpha must be > 0, got {self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"PolicyConfig.lora.dropout must be in [0, 1), got {self.dropout}")
        if self.rank > 0 and not list(self.targets):
            raise ValueError("PolicyConfig.lora.targets must name at least one module when lora.rank > 0")


@dataclass
class PolicyConfig:
    """Model shape (for a tiny model built from scratch), prompt rendering and sampling."""

    pretrained: Optional[str] = None  # noqa: UP045 (OmegaConf structured configs want Optional)
    """A local Hugging Face model directory, a local ``.gguf`` file, or the name of a packaged model
    (``policy.model_source.PACKAGED_MODELS``: ``smollm2``); its own tokenizer and chat template are used.
    None: a tiny model is built from scratch over the env's word-level tokenizer, with the fields below."""

    model_cache_dir: Optional[str] = None  # noqa: UP045
    """Where a GGUF file is de-quantised once into a safetensors folder named by the file's hash, so later
    loads read that folder; None: ``reverie/models`` under the user's cache folder (``$XDG_CACHE_HOME`` or
    ``~/.cache``)."""

    lora: LoRAConfig = field(default_factory=LoRAConfig)
    """LoRA adapters on the pretrained model (``lora.rank`` 0: none)."""

    scored_logits: bool = False
    """In the learner, compute the LM head only at the scored (action) positions instead of over the whole
    vocabulary at every position: the same log-probs, far less memory with a large vocabulary. Off for the
    tiny models, whose numbers it could move by rounding."""

    system_prompt: Optional[str] = None  # noqa: UP045
    """The system message of a pretrained policy's chat prompt; None: the env's own (built from the answer
    the env gives a malformed action, which states its format, and one well-formed example:
    ``policy.chat_preamble``). Unused by a tokenizer without a chat template (the tiny policies)."""

    few_shot: int = 0
    """Episodes of the scripted expert on training tasks shown before every chat prompt as earlier
    user/assistant turns (0: none). Unused without a chat template; needs an env with an expert."""

    tokenizer: str = "auto"
    """The tiny model's tokenizer: ``word`` (word-level over the env's vocabulary; decodes ``[5]`` as
    ``[ 5 ]``), ``bpe`` (byte-level BPE trained on probe episodes: any text encodes, and decodes back
    exactly), or ``auto``: ``bpe`` for the adapter envs (textarena, gym_text), ``word`` for the others."""

    arch: str = "llama"
    """Architecture of the tiny model: "llama" or "qwen2"."""

    hidden_size: int = 128
    """Width of the tiny model."""

    num_layers: int = 3
    """Transformer blocks of the tiny model."""

    num_heads: int = 4
    """Attention heads of the tiny model; must divide hidden_size."""

    intermediate_size: int = 384
    """Width of the tiny model's MLP."""

    history_window: int = 2
    """K: how many past turns are rendered before the current observation (HGPO's K); 0 shows only the
    current observation."""

    max_prompt_tokens: int = 384
    """Longer prompts are left-truncated: the end (the current observation) is kept."""

    max_action_tokens: int = 12
    """The action token budget: at most this many tokens are sampled per action, its EOS included; an
    action cut off here has no EOS and is trained on exactly the tokens it has."""

    temperature: float = 1.0
    """Sampling temperature; 0 means greedy."""

    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p; 1 keeps all."""

    def __post_init__(self) -> None:
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"PolicyConfig.tokenizer must be one of {TOKENIZERS}, got {self.tokenizer!r}")
        if self.arch not in ARCHITECTURES:
            raise ValueError(f"PolicyConfig.arch must be one of {ARCHITECTURES}, got {self.arch!r}")
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_prompt_tokens", "max_action_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"PolicyConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads != 0:
            raise ValueError(
                f"PolicyConfig.num_heads ({self.num_heads}) must divide PolicyConfig.hidden_size ({self.hidden_size})"
            )
        if self.history_window < 0:
            raise ValueError(f"PolicyConfig.history_window must be >= 0, got {self.history_window}")
        if self.max_prompt_tokens < 2:
            raise ValueError(f"PolicyConfig.max_prompt_tokens must be >= 2 (BOS and one token), got {self.max_prompt_tokens}")
        if not self.temperature >= 0.0:
            raise ValueError(f"PolicyConfig.temperature must be >= 0 (0 is greedy), got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"PolicyConfig.top_p must be in (0, 1], got {self.top_p}")
        if self.few_shot < 0:
            raise ValueError(f"PolicyConfig.few_shot must be >= 0 (0: no few-shot episodes), got {self.few_shot}")
        if self.pretrained is not None and not str(self.pretrained).strip():
            raise ValueError("PolicyConfig.pretrained must be a local model directory or None, got an empty string")
        if isinstance(self.lora, dict):  # a plain container (a saved run's config read back) gives a dict
            self.lora = LoRAConfig(**self.lora)
        if self.lora.rank > 0 and self.pretrained is None:
            raise ValueError("PolicyConfig.lora.rank > 0 needs a pretrained model (policy.pretrained); the tiny "
                             "model trains all its weights")


@dataclass
class PPOConfig:
    """Hyper-parameters of one PPO update."""

    epochs: int = 2
    """Passes over the batch per update."""
    minibatch_size: int = 64
    """Rows per optimizer step (per rank); the last minibatch of a pass may be smaller."""
    micro_batch_size: int | None = None
    """Rows per forward and backward pass: each minibatch is cut into contiguous micro-batches of at most this
    many rows (each trimmed of its own padding), their gradients are accumulated, and the minibatch still
    takes one clip and one optimizer step (``policy.micro_batches``). The same update up to rounding, in
    the memory of a micro-batch's activations. None: the whole minibatch in one pass."""
    lr: float = 1e-4
    """Adam learning rate of the policy."""
    value_lr: float = 1e-3
    """Adam learning rate of the value model."""
    clip_low: float = 0.2
    """Lower PPO clip: the ratio is clipped at ``1 - clip_low``."""
    clip_high: float = 0.2
    """Upper PPO clip: the ratio is clipped at ``1 + clip_high`` (DAPO's clip-higher when larger)."""
    dual_clip: float | None = None
    """Dual-clip constant ``c`` (> 1) bounding the loss of negative-advantage tokens; None turns it off."""
    loss_agg: str = "token-mean"
    """How token losses become one number: one of ``AGG_MODES`` (verl's names)."""
    loss_scale_factor: float | None = None
    """Divisor of ``seq-mean-token-sum-norm`` (Dr. GRPO). It must be a constant; the training loop fills
    an unset value with the policy's action token budget (``policy.max_action_tokens``)."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (subtracted from the loss)."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    value_clip: float | None = 0.2
    """Clip range of the value prediction around the old value; None turns value clipping off."""
    max_grad_norm: float | None = 1.0
    """Gradient-norm clip applied to each model separately; None only measures the norm."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference policy (needs ``ref_model``)."""
    kl_kind: str = "k3"
    """KL estimator: one of ``KL_KINDS``."""
    length_buckets: int = 4
    """Length-aware minibatches (``policy.minibatches``): each epoch's shuffled rows are cut into buckets of
    this many minibatches, each bucket sorted by row length before it is cut, so similar lengths share a
    minibatch and trimming drops more padding; larger buckets leave less padding but less randomness in
    which rows meet. 0: plain shuffled minibatches (with ``trim_padding=False``, the update of earlier
    versions, bit for bit)."""
    trim_padding: bool = True
    """Cut each minibatch to its longest row (drop the leading columns that are padding in every row).
    The losses do not change (padding is masked, positions come from the attention mask); rounding may."""
    old_logp: str = "sampling"
    """Where the training loop takes the ratio's old log-probs from: ``sampling``, the log-probs the policy
    recorded while sampling each token (temperature 1, full fp32 on CPU; saves a forward pass over the
    batch); ``recompute``, a no-grad pass of the learner over the first epoch's minibatches (and their
    micro-batches), so the first ratios are exactly 1. Use ``recompute`` under mixed precision (``trainer.precision=bf16-mixed``):
    sampling runs outside the learner's autocast, so its log-probs differ from the learner's by the
    precision gap and the ratio would measure that gap rather than the update."""

    def __post_init__(self) -> None:
        for name in ("epochs", "minibatch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"PPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.micro_batch_size is not None and (
            isinstance(self.micro_batch_size, bool) or not isinstance(self.micro_batch_size, int)
            or self.micro_batch_size < 1
        ):
            raise ValueError(
                f"PPOConfig.micro_batch_size must be an integer >= 1 or None, got {self.micro_batch_size!r}"
            )
        for name in ("lr", "value_lr", "clip_high", "entropy_coef", "value_coef", "kl_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"PPOConfig.{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.clip_low < 1:
            raise ValueError(f"PPOConfig.clip_low must be in [0, 1), got {self.clip_low}")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ValueError(f"PPOConfig.dual_clip must be > 1 or None, got {self.dual_clip}")
        if self.loss_agg not in AGG_MODES:
            raise ValueError(f"PPOConfig.loss_agg must be one of {AGG_MODES}, got {self.loss_agg!r}")
        if self.loss_scale_factor is not None and self.loss_scale_factor <= 0:
            raise ValueError(f"PPOConfig.loss_scale_factor must be > 0 or None, got {self.loss_scale_factor}")
        for name in ("value_clip", "max_grad_norm"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(f"PPOConfig.{name} must be > 0 or None, got {getattr(self, name)}")
        if self.kl_kind not in KL_KINDS:
            raise ValueError(f"PPOConfig.kl_kind must be one of {KL_KINDS}, got {self.kl_kind!r}")
        if isinstance(self.length_buckets, bool) or not isinstance(self.length_buckets, int) or self.length_buckets < 0:
            raise ValueError(f"PPOConfig.length_buckets must be an integer >= 0, got {self.length_buckets!r}")
        if self.old_logp not in OLD_LOGP_SOURCES:
            raise ValueError(f"PPOConfig.old_logp must be one of {OLD_LOGP_SOURCES}, got {self.old_logp!r}")
