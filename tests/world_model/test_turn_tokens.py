"""Turn tokenisation: row layouts, caps, markers, decoding, and caps that hold each env's observations."""

import random

import pytest
import torch

import envs
from envs import frozen_lake, sokoban
from envs.tokenizer import split_words
from world_model.turn_tokens import TokenLimits, TurnTokenizer, default_token_limits, pad_nested, pad_rows


def test_rows_are_framed_by_markers_and_right_padded(hn_tokenizer):
    tk = hn_tokenizer
    words = tk.observation_words(["guess 8 : higher"])[0]
    action = tk.action_words(["guess(8)"])[0]
    assert len(words) == 4 and len(action) == 4
    ids, mask = tk.encode_turns(["guess(8)", "guess(1)"], ["guess 8 : higher", "guess 1 : lower"])
    assert ids[0].tolist() == [tk.res_id, *words, tk.act_id, *action, tk.eos_id]
    assert mask[0].tolist() == [1] * 11
    ids, mask = tk.encode_observations(["guess 8 : higher", "correct"])
    assert ids[1].tolist()[:3] == [tk.obs_id, tk.tokenizer.convert_tokens_to_ids("correct"), tk.eos_id]
    assert ids[1, 3:].eq(tk.pad_id).all() and mask[1].tolist() == [1, 1, 1, 0, 0, 0]
    queries, _ = tk.encode_queries(["guess(8)"])
    assert queries[0].tolist() == [tk.act_id, *action]
    assert tk.query_row(None) == [tk.look_id]
    texts, _ = tk.encode_texts(["guess 8 : higher"])
    assert texts[0].tolist() == [tk.bos_id, *words, tk.eos_id]


def test_caps_keep_the_first_words():
    tk = TurnTokenizer.build(envs.make("hidden_number").vocabulary(), TokenLimits(observation=3, action=2))
    assert tk.decode(tk.observation_words(["guess 8 : higher"])[0]) == "guess 8 :"
    assert len(tk.action_words(["guess(8)"])[0]) == 2


def test_marker_words_in_text_are_not_markers(hn_tokenizer):
    ids = hn_tokenizer.action_words(["guess(3) <act> </s>"])[0]
    assert hn_tokenizer.act_id not in ids and hn_tokenizer.eos_id not in ids


def test_decode_restores_the_env_layout():
    tk = TurnTokenizer.for_env("frozen_lake")
    grid = "P _ _ _\n_ O _ O\n_ _ _ O\nO _ _ G"
    ids = tk.observation_words([grid])[0]
    assert tk.decode([*ids, tk.eos_id, tk.pad_id]) == grid
    assert tk.decode([tk.bos_id, *ids[:2], tk.eos_id, *ids[2:]]) == "P _"  # stops at </s>


def test_padding_helpers():
    ids, mask = pad_rows([[5, 6], [7]], pad_id=0)
    assert ids.tolist() == [[5, 6], [7, 0]] and mask.tolist() == [[1, 1], [1, 0]]
    ids, mask = pad_nested([[[5]], [[6, 7], [8]]], pad_id=0)
    assert ids.shape == (2, 2, 2) and mask[0].tolist() == [[1, 0], [0, 0]]
    with pytest.raises(ValueError, match="width"):
        pad_rows([[1, 2, 3]], pad_id=0, length=2)


def test_bad_limits_and_unknown_envs_are_named():
    with pytest.raises(ValueError, match="TokenLimits.action"):
        TokenLimits(observation=4, action=0)
    with pytest.raises(ValueError, match="'nowhere'"):
        default_token_limits("nowhere")


def fits(limits: TokenLimits, texts) -> bool:
    return max(len(split_words(t)) for t in texts) <= limits.observation


def test_default_limits_hold_the_longest_grids():
    for rows, cols in [(5, 5), (8, 8), (6, 8)]:
        grid = "\n".join(" ".join("#" for _ in range(cols)) for _ in range(rows))
        limits = default_token_limits("sokoban", {"dim_room": (rows, cols)})
        assert fits(limits, [f"{sokoban.INVALID_ACTION_MESSAGE}\n{grid}"])
    for kwargs in [{}, {"size": 6}, {"desc": ["SFFFF", "FFFFG"]}]:
        env = envs.make("frozen_lake", **kwargs)
        first = env.reset(0)
        limits = default_token_limits("frozen_lake", kwargs)
        assert fits(limits, [first, f"{frozen_lake.ERROR}\n{env.render()}"])


class _Clumsy:
    """Expert, random, malformed and unavailable actions mixed: the longest error pages appear."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def act(self, views):
        choices = ("nonsense", "click[nothing]", "expert", "random")
        picks = [self.rng.choice(choices) for _ in views]
        return [
            v.env.expert_action() if p == "expert" else v.env.random_action(self.rng) if p == "random" else p
            for v, p in zip(views, picks, strict=True)
        ]


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("minishop", {"results_per_page": 10}),
        ("minishop", {}),
        ("hidden_number", {"observation": "transcript"}),
    ],
)
def test_default_limits_hold_played_observations(name, kwargs):
    trajectories = envs.collect(
        _Clumsy(), name, env_kwargs=kwargs, group_size=2, n_groups=8, seed=0, progress=False
    )
    texts = [turn.next_observation for t in trajectories for turn in t.turns]
    texts += [t.turns[0].observation for t in trajectories]
    assert fits(default_token_limits(name, kwargs), texts)


def test_tokenizer_save_and_load(tmp_path, hn_tokenizer):
    hn_tokenizer.save(tmp_path)
    loaded = TurnTokenizer.load(tmp_path, hn_tokenizer.limits)
    text = ["guess 8 : higher\ninvalid action . call guess(k)"]
    assert loaded.observation_words(text) == hn_tokenizer.observation_words(text)
    assert torch.equal(
        loaded.encode_turns(["guess(2)"], text)[0], hn_tokenizer.encode_turns(["guess(2)"], text)[0]
    )
