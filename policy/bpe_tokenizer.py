"""A byte-level BPE tokenizer trained on the text an environment produces.

For envs Reverie did not write: their vocabulary is not known in advance, and their action parsers
are exact about spacing (TextArena reads ``[5]``, not ``[ 5 ]``), which the word-level tokenizer
cannot give back (it joins pieces with spaces). Byte-level BPE fixes both: every string encodes
(its bytes are the base alphabet, so there is no unknown token) and ``decode(encode(text)) == text``
exactly. Merges are learned with Hugging Face ``tokenizers`` on probe-episode text, so the env's
frequent words and action formats become single tokens. Nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from envs.tokenizer import BOS, EOS, PAD, UNK

BPE_VOCAB_SIZE = 1024  # merges beyond the 256 bytes and the special tokens; enough for a game's words


def build_bpe_tokenizer(texts: Iterable[str], vocab_size: int = BPE_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``texts`` (deterministic in them).

    Special tokens as the word-level tokenizer's (``<pad>``, ``<unk>``, ``<s>``, ``</s>``); ``<unk>``
    is never produced. Spaces are kept as bytes and nothing is cleaned up on decoding.
    """
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, UNK, BOS, EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(list(texts), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, unk_token=UNK, bos_token=BOS,
                                        eos_token=EOS, clean_up_tokenization_spaces=False)
    tokenizer.padding_side = "left"  # generation appends on the right
    return tokenizer
