"""HiddenNumberEnv: hand-checked dynamics, exact Bayes quantities against brute force, expert, fuzz."""

from __future__ import annotations

import itertools
import math
import random
import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.base import Env, EpisodeDoneError
from envs.hidden_number import HiddenNumberEnv
from envs.tokenizer import split_words


def seed_where(env: HiddenNumberEnv, actions: list[str], answers: list[str]) -> int:
    """The first seed whose episode answers ``actions`` with ``answers`` (search, not a guess)."""
    for seed in range(10_000):
        env.reset(seed)
        got = []
        for action in actions:
            result = env.step(action)
            got.append(result.info.get("answer"))
            if result.done:
                break
        if got == answers:
            env.reset(seed)
            for a in actions:
                env.step(a)
            return seed
    raise AssertionError("no seed found")


def play(env: Env, seed: int, policy) -> list:
    """Run one episode; return the list of (observation, StepResult)."""
    steps = []
    obs = env.reset(seed)
    done = False
    while not done:
        result = env.step(policy(env))
        steps.append((obs, result))
        obs, done = result.observation, result.done
    return steps


def test_satisfies_protocol_and_first_observation():
    env = HiddenNumberEnv()
    assert isinstance(env, Env)
    assert env.name == "hidden_number" and env.max_turns == 6
    assert env.reset(0) == "find the hidden number in 1 .. 16 . call guess(k)"
    assert HiddenNumberEnv(n=5).reset(0) == "find the hidden number in 1 .. 5 . call guess(k)"


def test_hand_checked_noiseless_episode():
    env = HiddenNumberEnv()
    seed_where(env, ["guess(8)", "guess ( 12 )", "guess(10)"], ["higher", "lower", "higher"])
    # 8 < hidden < 12 and hidden > 10 leaves only 11.
    assert env.posterior()[10] == 1.0
    assert env.expert_action() == "guess(11)"
    result = env.step("guess(11)")
    assert result.observation == "guess 11 : correct"
    assert (result.reward, result.done) == (1.0, True)
    assert result.info == {
        "valid": True,
        "turn": 4,
        "guess": 11,
        "answer": "correct",
        "lied": False,
        "success": True,
    }


def test_correct_ends_with_reward_one_and_success():
    env = HiddenNumberEnv()
    env.reset(3)
    steps = 0
    while True:
        result = env.step(env.expert_action())
        steps += 1
        if result.done:
            break
    assert result.info["answer"] == "correct" and result.observation.endswith(": correct")
    assert result.reward == 1.0 and result.info["success"] is True and steps <= 5
    with pytest.raises(EpisodeDoneError):
        env.step("guess(1)")


def test_out_of_range_and_malformed_are_invalid_turns_and_episode_ends_at_max_turns():
    env = HiddenNumberEnv(max_turns=4)
    env.reset(0)
    error = "invalid action . call guess(k) with k in 1 .. 16"
    for turn, action in enumerate(["guess(0)", "guess(17)", "guess 7", "guess(7) now"], start=1):
        result = env.step(action)
        assert result.observation == error
        assert result.info["valid"] is False and result.info["turn"] == turn and result.reward == 0.0
        assert result.done is (turn == 4)
    assert result.info["success"] is False
    with pytest.raises(EpisodeDoneError):
        env.step("guess(1)")


@pytest.mark.parametrize("action", ["guess(7)", "guess ( 7 )", " GUESS(7) ", "Guess\t( 07 )\n"])
def test_spacing_and_case_variants_parse(action):
    env = HiddenNumberEnv()
    env.reset(0)
    result = env.step(action)
    assert result.info["valid"] is True and result.info["guess"] == 7
    assert result.observation.startswith("guess 7 : ")


def test_transcript_mode_lists_every_result_and_appends_errors():
    env = HiddenNumberEnv(observation="transcript")
    seed_where(env, ["guess(8)", "guess(12)"], ["higher", "lower"])
    assert env.anchor_observation() == "guess 8 : higher\nguess 12 : lower"
    result = env.step("hello")
    assert result.observation == (
        "guess 8 : higher\nguess 12 : lower\ninvalid action . call guess(k) with k in 1 .. 16"
    )
    result = env.step("guess(10)")
    assert result.observation.split("\n")[:2] == ["guess 8 : higher", "guess 12 : lower"]
    assert result.observation.split("\n")[2].startswith("guess 10 : ")
    assert len(result.observation.split("\n")) == 3  # the earlier error line is not kept


def test_anchor_is_transcript_in_either_mode():
    last = HiddenNumberEnv(observation="last")
    assert last.reset(4) == last.anchor_observation()
    last.step("guess(2)")
    last.step("nonsense")
    last.step("guess(15)")
    lines = last.anchor_observation().split("\n")
    assert len(lines) == 2 and lines[0].startswith("guess 2 : ") and lines[1].startswith("guess 15 : ")


# --- exact Bayes --------------------------------------------------------------------------------
def test_noiseless_posterior_and_predictive_by_hand():
    env = HiddenNumberEnv()
    env.reset(0)
    assert env.posterior() == pytest.approx([1 / 16] * 16)
    assert env.predictive_distribution(8) == pytest.approx(
        {"correct": 1 / 16, "higher": 8 / 16, "lower": 7 / 16}
    )
    seed_where(env, ["guess(8)"], ["higher"])
    assert env.posterior() == pytest.approx([0.0] * 8 + [1 / 8] * 8)
    # Consistent set 9..16: 12 is right w.p. 1/8, 13..16 above (4/8), 9..11 below (3/8).
    assert env.predictive_distribution(12) == pytest.approx(
        {"correct": 1 / 8, "higher": 4 / 8, "lower": 3 / 8}
    )
    assert env.predictive_distribution(3) == pytest.approx({"correct": 0.0, "higher": 1.0, "lower": 0.0})


def test_noisy_posterior_and_predictive_by_hand():
    # n=4, p=1/4, history "guess 2 : higher": likelihoods h=1: 1/4 (a lie), h=2: 0, h=3,4: 3/4.
    env = HiddenNumberEnv(n=4, noise=0.25)
    seed_where(env, ["guess(2)"], ["higher"])
    assert env.posterior() == pytest.approx([1 / 7, 0.0, 3 / 7, 3 / 7])
    # guess 3: correct 3/7; higher = h4 truthful (3/4 * 3/7) + h1 lying (1/4 * 1/7) = 5/14.
    assert env.predictive_distribution(3) == pytest.approx(
        {"correct": 3 / 7, "higher": 5 / 14, "lower": 3 / 14}
    )


def brute_force(n: int, p: Fraction, history: list[tuple[int, str]], next_guess: int):
    """Enumerate every hidden number and every lie pattern (one coin per guess, next one included)."""
    joint_history = [Fraction(0)] * n
    joint_next = {"higher": Fraction(0), "lower": Fraction(0), "correct": Fraction(0)}
    guesses = [g for g, _ in history] + [next_guess]
    for hidden in range(1, n + 1):
        for coins in itertools.product([False, True], repeat=len(guesses)):
            prob = Fraction(1, n)
            answers = []
            for guess, lie in zip(guesses, coins, strict=True):
                prob *= p if lie else 1 - p
                if guess == hidden:
                    answers.append("correct")  # the coin is irrelevant here; both branches sum to 1
                else:
                    up = hidden > guess
                    answers.append("higher" if up != lie else "lower")
            if answers[:-1] == [a for _, a in history]:
                joint_history[hidden - 1] += prob
                joint_next[answers[-1]] += prob
    evidence = sum(joint_history)
    return [j / evidence for j in joint_history], {a: j / evidence for a, j in joint_next.items()}


@pytest.mark.parametrize("n,noise", [(5, 0.0), (5, 0.2), (6, 0.35), (4, 0.5)])
def test_posterior_and_predictive_match_brute_force(n, noise):
    env = HiddenNumberEnv(n=n, noise=noise, max_turns=4)
    rng = random.Random(n)
    for seed in range(12):
        env.reset(seed)
        history: list[tuple[int, str]] = []
        done = False
        while not done:
            for k in range(1, n + 1):
                post, pred = brute_force(n, Fraction(noise), history, k)
                assert env.posterior() == pytest.approx([float(x) for x in post])
                assert env.predictive_distribution(k) == pytest.approx({a: float(x) for a, x in pred.items()})
            result = env.step(env.random_action(rng))
            history.append((result.info["guess"], result.info["answer"]))
            done = result.done


def test_sampled_answers_follow_the_predictive_distribution():
    # First guess 8 with n=16, p=0.3: P(higher) = 8/16 * 0.7 + 7/16 * 0.3 = 0.48125.
    env = HiddenNumberEnv(noise=0.3)
    counts = {"higher": 0, "lower": 0, "correct": 0}
    trials = 3000
    for seed in range(trials):
        env.reset(seed)
        counts[env.step("guess(8)").info["answer"]] += 1
    env.reset(0)  # empty history: the predictive of a first guess
    expected = env.predictive_distribution(8)
    assert expected["higher"] == pytest.approx(0.48125)
    for answer, prob in expected.items():
        tolerance = 4 * math.sqrt(prob * (1 - prob) / trials) + 1e-9
        assert abs(counts[answer] / trials - prob) < tolerance, answer


def test_hidden_number_is_uniform_over_seeds():
    # The posterior assumes a uniform prior: check the seeds deliver one (200 expected per value).
    env = HiddenNumberEnv(n=8, max_turns=8)
    counts = [0] * 8
    for seed in range(1600):
        env.reset(seed)
        found = next(k for k in range(1, 9) if env.step(f"guess({k})").info["answer"] == "correct")
        counts[found - 1] += 1
    assert all(130 < c < 270 for c in counts), counts


# --- expert -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,max_turns", [(16, 6), (100, 7), (1, 1), (2, 2)])
def test_noiseless_expert_always_wins_within_log2_turns(n, max_turns):
    env = HiddenNumberEnv(n=n, max_turns=max_turns)
    bound = math.ceil(math.log2(n + 1))
    wins = 0
    for seed in range(200):
        steps = play(env, seed, lambda e: e.expert_action())
        wins += steps[-1][1].info["success"]
        assert len(steps) <= bound
    assert wins / 200 >= 0.99


def test_noisy_expert_beats_random():
    env = HiddenNumberEnv(noise=0.1, max_turns=10)
    rng = random.Random(0)
    expert = sum(play(env, s, lambda e: e.expert_action())[-1][1].info["success"] for s in range(200))
    rand = sum(play(env, s, lambda e: e.random_action(rng))[-1][1].info["success"] for s in range(200))
    assert expert / 200 >= 0.95 and rand / 200 <= 0.7


# --- seeding, fuzz, vocabulary, options ---------------------------------------------------------
def test_same_seed_same_episode_different_seeds_differ():
    def observations(seed: int) -> list[str]:
        rng = random.Random(99)
        env = HiddenNumberEnv(noise=0.2, observation="transcript")
        return [r.observation for _, r in play(env, seed, lambda e: e.random_action(rng))]

    assert observations(5) == observations(5)
    assert len({tuple(observations(s)) for s in range(10)}) > 1


def oracle_guess(text: str, n: int) -> int | None:
    """Independent reference parser: split on ASCII whitespace and around parentheses."""
    pieces = [t for t in re.split(r"[ \t\n\r\f\v]+|(?=[()])|(?<=[()])", text) if t]
    if len(pieces) != 4 or not all(t.isascii() for t in pieces):
        return None
    word, left, number, right = pieces
    if word.lower() != "guess" or left != "(" or right != ")" or not number.isdigit():
        return None
    return int(number) if 1 <= int(number) <= n else None


near_valid = st.builds(
    lambda a, w, b, num, c, d: f"{a}{w}{b}({num}{c}){d}",
    st.sampled_from(["", " ", "\t", "\n "]),
    st.sampled_from(["guess", "GUESS", "Guess", "gues", "guess guess"]),
    st.sampled_from(["", " ", "  "]),
    st.sampled_from(["1", "16", "0", "17", "007", "x", "", "-3", "1 2"]),
    st.sampled_from(["", " "]),
    st.sampled_from(["", " ", ".", "\n"]),
)
actions = st.one_of(
    st.text(max_size=20), st.text(alphabet="guesGUES()\t 0123456789", max_size=14), near_valid
)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    texts=st.lists(actions, min_size=1, max_size=8),
    noise=st.sampled_from([0.0, 0.3]),
)
def test_fuzz_arbitrary_text_actions(seed, texts, noise):
    env = HiddenNumberEnv(max_turns=5, noise=noise)
    env.reset(seed)
    for turn, text in enumerate(texts, start=1):
        result = env.step(text)
        expected = oracle_guess(text, 16)
        assert result.info["valid"] is (expected is not None)
        assert result.info["turn"] == turn
        if expected is None:
            assert "guess(k)" in result.observation and result.reward == 0.0
        else:
            assert result.observation.startswith(f"guess {expected} : ")
        assert result.done is (turn == 5 or result.info["success"])
        if result.done:
            with pytest.raises(EpisodeDoneError):
                env.step(text)
            break


def test_vocabulary_covers_everything_rendered():
    for kwargs in [{}, {"n": 7, "observation": "transcript", "noise": 0.3}, {"n": 20, "max_turns": 9}]:
        env = HiddenNumberEnv(**kwargs)
        vocabulary = set(env.vocabulary())
        rng = random.Random(1)
        malformed = ["", "guess(0)", f"guess({env.n + 1})", "help"]

        def mixed(e, rng=rng, malformed=malformed):
            return rng.choice([e.expert_action(), e.random_action(rng), *malformed])

        for seed in range(60):
            for obs, result in play(env, seed, mixed):
                for text in (
                    obs,
                    result.observation,
                    env.anchor_observation(),
                    env.expert_action(),
                    env.random_action(rng),
                ):
                    assert set(split_words(text)) <= vocabulary, text


@pytest.mark.parametrize(
    "kwargs,option",
    [
        ({"n": 0}, "n"),
        ({"n": 2.5}, "n"),
        ({"max_turns": 0}, "max_turns"),
        ({"noise": -0.1}, "noise"),
        ({"noise": 0.7}, "noise"),
        ({"observation": "full"}, "observation"),
    ],
)
def test_bad_options_raise_naming_the_option(kwargs, option):
    with pytest.raises(ValueError, match=option):
        HiddenNumberEnv(**kwargs)


def test_predictive_rejects_out_of_range_guess():
    env = HiddenNumberEnv(n=4)
    env.reset(0)
    with pytest.raises(ValueError, match="k"):
        env.predictive_distribution(5)
