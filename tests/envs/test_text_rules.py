"""envs.text_rules against the real envs: on recorded episodes, every rule gives the env's own anchors,
rewards and done flags (the turn budget, which is not in the text, aside)."""

import random

import pytest

from envs.registry import make
from envs.text_rules import TextOutcome, anchor_rule, outcome_rule
from world_model import TurnTokenizer

VARIANTS = [
    ("hidden_number", {}),
    ("hidden_number", {"observation": "transcript"}),
    ("hidden_number", {"noise": 0.2}),
    ("frozen_lake", {}),
    ("frozen_lake", {"is_slippery": True}),
    ("sokoban", {}),
    ("minishop", {}),
]


def episodes(name, kwargs, count=30):
    """(first observation, [(anchor before, action, StepResult, turn)]) per episode: expert, random and
    malformed actions mixed."""
    env = make(name, **kwargs)
    for seed in range(count):
        rng = random.Random(seed)
        first, turns, turn = env.reset(seed), [], 0
        while True:
            anchor = env.anchor_observation()
            if seed % 2:
                action = env.expert_action() if rng.random() < 0.8 else env.random_action(rng)
            else:
                action = env.random_action(rng) if rng.random() < 0.8 else "junk"
            result, turn = env.step(action), turn + 1
            turns.append((anchor, action, result, turn))
            if result.done:
                break
        yield env, first, turns


@pytest.mark.parametrize(("name", "kwargs"), VARIANTS)
def test_rules_give_the_real_envs_anchors_rewards_and_done_flags(name, kwargs):
    anchor_of, outcome_of = anchor_rule(name, kwargs), outcome_rule(name, kwargs)
    ended_by_text = 0
    for env, first, turns in episodes(name, kwargs):
        anchor = anchor_of(first, first)
        for real_anchor, _, result, turn in turns:
            assert anchor == real_anchor
            outcome = outcome_of(anchor, result.observation)
            assert outcome.reward == pytest.approx(result.reward, abs=1e-9)
            at_budget = turn >= env.max_turns
            assert outcome.done == result.done or (at_budget and result.done and not outcome.done)
            ended_by_text += outcome.done
            anchor = anchor_of(anchor, result.observation)
    assert ended_by_text > 0  # some episodes ended by the text itself, not only by the budget


@pytest.mark.parametrize(("name", "kwargs"), VARIANTS)
def test_rules_read_the_word_tokenizers_rendering_alike(name, kwargs):
    """An imagined observation is the tokenizer's rendering (``guess ( k )``); outcomes read the same."""
    tk = TurnTokenizer.for_env(name, kwargs)
    outcome_of = outcome_rule(name, kwargs)
    for _, first, turns in episodes(name, kwargs, count=10):
        anchor = anchor_rule(name, kwargs)(first, first)
        for _, _, result, _ in turns:
            rendered = tk.decode(tk.observation_words([result.observation])[0])
            assert outcome_of(anchor, rendered) == outcome_of(anchor, result.observation)
            anchor = anchor_rule(name, kwargs)(anchor, result.observation)


def test_envs_without_rules_and_garbled_text():
    assert anchor_rule("no_such_env") is None and outcome_rule("no_such_env") is None
    assert outcome_rule("hidden_number")("intro", "guess 3 : correct") == TextOutcome(1.0, True)
    assert outcome_rule("hidden_number")("intro", "guess 3 : lower\nguess 4 : correct") == TextOutcome(1.0, True)
    assert outcome_rule("hidden_number")("intro", "correct guess") == TextOutcome(0.0, False)
    assert outcome_rule("frozen_lake")("", "nonsense words") == TextOutcome(0.0, False)


SOKOBAN_BEFORE = "# # # # #\n# P X O #\n# # # # #"  # one box off its target


@pytest.mark.parametrize("written", [
    "nonsense words",  # a world model's garbled text: no room at all
    "",
    "Invalid action. Answer with one word: Up, Down, Left or Right.",
    "# # # # #\n# _ P _ #\n# # # # #",  # a room whose boxes the model lost: none off a target, none on one
])
def test_sokoban_text_without_a_box_on_a_target_neither_ends_nor_earns_the_finish(written):
    """Solved means a box on a target and none off one: text that holds no box at all (which no real
    room does) must not end an imagined episode with the finishing reward."""
    assert outcome_rule("sokoban")(SOKOBAN_BEFORE, written) == TextOutcome(-0.1, False)


def test_sokoban_rules_read_only_the_room_lines():
    """A line of prose (the invalid-action notice, or model text) is not part of the room: its words
    neither add boxes nor take the anchor's place."""
    solved = "# # # # #\n# _ P √ #\n# # # # #"
    assert outcome_rule("sokoban")(SOKOBAN_BEFORE, solved) == TextOutcome(pytest.approx(-0.1 + 1 + 10), True)
    noted = "X marks the spot\n" + solved  # prose holding the box symbol: still solved
    assert outcome_rule("sokoban")(SOKOBAN_BEFORE, noted) == TextOutcome(pytest.approx(-0.1 + 1 + 10), True)
    assert anchor_rule("sokoban")(SOKOBAN_BEFORE, noted) == solved
