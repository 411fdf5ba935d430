"""Two-hop lookup as text (envs/lookup_text.py) behind the gymnasium adapter: a hand-made directory
played by hand, an agent that reads only the observations and always wins, the draw's rules checked
over many seeds, held-out (person, friend, city) combinations, and a vocabulary that covers it all."""

from __future__ import annotations

from collections import Counter

import pytest

from envs.lookup_text import CITIES, PEOPLE, Directory, LookupText
from envs.registry import make
from envs.splits import is_eval_task, split_seeds
from tests.envs.episode_words import words_missing_from_vocabulary

LOOKUP = {"entry_point": "envs.lookup_text:LookupText"}
HAND_MADE = Directory(
    friend={"ada": "cal", "bob": "ada", "cal": "eve", "dan": "bob", "eve": "ada", "fay": "gus", "gus": "hal",
            "hal": "fay"},
    city={"ada": "rome", "bob": "oslo", "cal": "lima", "dan": "baku", "eve": "doha", "fay": "riga", "gus": "rome",
          "hal": "oslo"},
    asked="ada",
)
QUESTION = "question : where does the friend of ada live ?"


def lookup(**options):
    return make("gym_text", **LOOKUP, **options)


def with_directory(env, directory: Directory):
    """Put the wrapped env on a hand-made directory after a reset (the test knows the private field)."""
    env._inner._directory = directory
    return env


def test_a_hand_worked_episode():
    env = lookup()
    env.reset(0)
    with_directory(env, HAND_MADE)
    assert env.expert_action() == "look ada"
    first = env.step("look ada")
    assert first.observation == f"{QUESTION}\nrecord : ada friend cal city rome"
    assert first.reward == 0.0 and not first.done and first.info["valid"]
    assert env.expert_action() == "look cal"
    second = env.step("LOOK cal ")  # any case, outer spaces
    assert second.observation == f"{QUESTION}\nrecord : cal friend eve city lima"
    assert env.expert_action() == "answer lima"
    last = env.step("answer lima")
    assert last.observation == f"{QUESTION}\nrecord : answer lima is right"
    assert last.reward == 1.0 and last.done and last.info["success"] and not last.info["truncated"]


def test_a_wrong_city_ends_the_episode_unrewarded():
    env = lookup()
    env.reset(0)
    with_directory(env, HAND_MADE)
    result = env.step("answer rome")  # ada's own city, not her friend's
    assert result.done and result.reward == 0.0 and not result.info["success"] and result.info["valid"]
    assert result.observation.endswith("record : answer rome is wrong")


def test_malformed_actions_are_invalid_turns_and_the_time_limit_truncates():
    env = lookup(kwargs={"time_limit": 3})
    env.reset(0)
    with_directory(env, HAND_MADE)
    error = ("invalid action . say look and a person or answer and a city . people : ada bob cal dan eve fay gus hal"
             " . cities : baku doha lima oslo riga rome")
    for turn, text in enumerate(["look rome", "answer ada"], start=1):  # a city is not a person, nor the reverse
        result = env.step(text)
        assert result.observation == f"{QUESTION}\nrecord : {error}"
        assert not result.info["valid"] and not result.done and not result.info["truncated"], turn
    last = env.step("look ada")
    assert last.info["valid"] and last.info["truncated"] and not last.done


@pytest.mark.parametrize("text", ["", "look", "look ada bob", "answer", "ask ada", "look  zed", "lookada", "?"])
def test_texts_that_are_not_one_verb_and_one_known_word_are_refused(text):
    assert not LookupText().is_well_formed(text)


def read_and_answer(observation: str, seen: dict[str, tuple[str, str]]) -> str:
    """An agent written from the module's description alone: it parses the question and the record
    text, remembers what it was shown, and looks people up until it can answer."""
    question_line, record_line = observation.split("\n")
    asked = question_line.split()[-3]  # "... the friend of NAME live ?"
    words = record_line.split()[2:]
    if len(words) == 5 and words[1] == "friend" and words[3] == "city":
        seen[words[0]] = (words[2], words[4])
    if asked not in seen:
        return f"look {asked}"
    friend = seen[asked][0]
    return f"answer {seen[friend][1]}" if friend in seen else f"look {friend}"


def test_an_agent_reading_only_the_observations_always_wins_in_three_turns():
    env = lookup()
    for seed in range(200):
        observation, seen = env.reset(seed), {}
        results = []
        while not (results and results[-1].done) and len(results) < 4:
            results.append(env.step(read_and_answer(observation, seen)))
            observation = results[-1].observation
        assert len(results) == 3 and results[-1].done and results[-1].info["success"], seed


def test_answering_at_once_wins_about_one_time_in_six():
    """Without looking, the best guess is any city: the friend's city is uniform over the six."""
    wins = 0
    for seed in range(3000):
        env = LookupText()
        env.reset(seed=seed)
        wins += env.step("answer rome")[1]
    assert abs(wins / 3000 - 1 / 6) < 0.025


def test_the_draw_never_makes_anyone_their_own_friend_and_covers_every_choice():
    friends, cities, asked = Counter(), Counter(), Counter()
    for seed in range(600):
        env = LookupText()
        env.reset(seed=seed)
        directory = env._directory
        assert set(directory.friend) == set(PEOPLE) == set(directory.city)
        assert all(friend != person for person, friend in directory.friend.items())
        friends.update(directory.friend.values())
        cities.update(directory.city.values())
        asked[directory.asked] += 1
    assert set(friends) == set(PEOPLE) and set(cities) == set(CITIES) and set(asked) == set(PEOPLE)


def test_the_same_seed_draws_the_same_directory():
    first, second = LookupText(), LookupText()
    first.reset(seed=11)
    second.reset(seed=11)
    assert first._directory == second._directory


def task_of(seed: int) -> str:
    env = lookup()
    env.reset(seed)
    return env.task_key()


def test_evaluation_asks_combinations_that_training_never_asks():
    every_key = {f"asked {a} friend {f} city {c}" for a in PEOPLE for f in PEOPLE if f != a for c in CITIES}
    held_out_keys = {key for key in every_key if is_eval_task(key)}
    assert len(every_key) == 336 and 40 <= len(held_out_keys) <= 95  # about a fifth
    train = {task_of(seed) for seed in split_seeds("gym_text", LOOKUP, "train", seed=0, count=400)}
    held_out = {task_of(seed) for seed in split_seeds("gym_text", LOOKUP, "eval", seed=0, count=100)}
    assert train <= every_key - held_out_keys and held_out <= held_out_keys
    assert len(held_out) >= 30 and len(train) >= 150


def test_the_vocabulary_covers_every_word_of_expert_and_random_episodes():
    env = lookup()
    assert words_missing_from_vocabulary(env, range(60), expert_share=0.6) == set()
    assert set(PEOPLE) | set(CITIES) <= set(env.vocabulary())


def test_a_bad_time_limit_names_the_option():
    with pytest.raises(ValueError, match="time_limit"):
        lookup(kwargs={"time_limit": 0})
