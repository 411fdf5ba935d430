from envs.tokenizer import PAD, UNK, build_word_tokenizer, split_words


def test_split_keeps_newlines_and_isolates_punctuation():
    assert split_words("guess(12)\n# P\t√") == ["guess", "(", "12", ")", "\n", "#", "P", "√"]


def test_word_level_round_trip_with_spacing_and_unknowns():
    tok = build_word_tokenizer(["guess ( ) higher lower correct 1 2 12"])
    ids = tok("guess(12) maybe higher").input_ids
    assert tok.convert_ids_to_tokens(ids) == ["guess", "(", "12", ")", UNK, "higher"]
    assert tok.decode(ids) == f"guess ( 12 ) {UNK} higher"


def test_ids_are_deterministic_and_specials_come_first():
    a = build_word_tokenizer(["b a c"])
    b = build_word_tokenizer(["c b a"])
    assert a.get_vocab() == b.get_vocab()
    assert a.pad_token == PAD and a.pad_token_id == 0
    assert a.padding_side == "left"
