"""Word-level Hugging Face tokenizers built from an environment's vocabulary.

Text is split into words (runs of letters/digits/underscore), single punctuation or symbol
characters, and newlines; spaces and tabs are dropped. Decoding joins pieces with single spaces, so
``guess(7)`` decodes as ``guess ( 7 )``: every env's action parser accepts that spacing.
Nothing is downloaded: the tokenizer is made from the word list alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIAL_TOKENS = [PAD, UNK, BOS, EOS]
NEWLINE = "\n"
_PIECE = re.compile(r"\n|\w+|[^\w\s]")


def split_words(text: str) -> list[str]:
    """Split text exactly as the tokenizer's pre-tokenizer does."""
    return _PIECE.findall(text)


def words_of(texts: Iterable[str]) -> set[str]:
    """All pieces occurring in ``texts``: a convenient way for an env to build its vocabulary."""
    found: set[str] = set()
    for text in texts:
        found.update(split_words(text))
    return found


def build_word_tokenizer(vocabulary: Iterable[str], extra_special_tokens: Iterable[str] = ()) -> PreTrainedTokenizerFast:
    """A ``PreTrainedTokenizerFast`` over ``vocabulary`` (words; multi-piece entries are split).

    Ids are deterministic: special tokens first, then the sorted pieces.
    """
    pieces = words_of(vocabulary) | {NEWLINE}
    specials = SPECIAL_TOKENS + [t for t in extra_special_tokens if t not in SPECIAL_TOKENS]
    vocab = {token: i for i, token in enumerate(specials)}
    for piece in sorted(pieces):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"[^\S\n]+"), behavior="removed"),  # spaces and tabs, not newlines
            pre_tokenizers.Split(Regex(r"\n|\w+|[^\w\s]"), behavior="isolated"),
        ]
    )
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins pieces with spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNK,
        bos_token=BOS,
        eos_token=EOS,
        additional_special_tokens=specials[len(SPECIAL_TOKENS):] or None,
    )
    tokenizer.padding_side = "left"  # generation appends on the right
    return tokenizer
