"""The TextArena adapter: global-random isolation, Reverie's turn and validity bookkeeping, rewards,
task keys, and no exception on any action text. Skipped where the optional package is absent."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs import collect
from envs.registry import make, unavailable

pytestmark = pytest.mark.skipif(unavailable("textarena") is not None, reason=str(unavailable("textarena")))

GAMES = ["GuessTheNumber-v0", "Mastermind-v0", "TowerOfHanoi-v0", "FrozenLake-v0"]


def guess_target(seed: int) -> int:
    """GuessTheNumber's hidden number, modelled independently: random.seed(seed), then randint(1, 20)."""
    return random.Random(seed).randint(1, 20)


def misses(seed: int, count: int) -> list[int]:
    """``count`` distinct guesses that are not the hidden number."""
    return [g for g in range(1, 21) if g != guess_target(seed)][:count]


@pytest.mark.parametrize("game", GAMES)
def test_the_callers_global_random_stream_is_untouched(game):
    random.seed(1234)
    expected = [random.random() for _ in range(6)]
    random.seed(1234)
    got = [random.random()]
    env = make("textarena", game=game)
    rng = random.Random(0)
    env.reset(7)
    got.append(random.random())
    for _ in range(3):
        result = env.step(env.random_action(rng))
        got.append(random.random())
        if result.done:
            env.reset(8)
    got.append(random.random())
    assert got == expected


@pytest.mark.parametrize("game", GAMES)
def test_an_episode_is_fixed_by_its_seed_whatever_else_draws_from_random(game):
    def episode(interleave: bool) -> list[str]:
        env, other = make("textarena", game=game), make("textarena", game=game)
        rng = random.Random(3)
        texts = [env.reset(11)]
        for turn in range(6):
            if interleave:  # another env reseeding the global stream, and the caller drawing from it
                other.reset(turn)
                random.random()
            result = env.step(env.random_action(rng))
            texts.append(result.observation)
            if result.done:
                break
        return texts

    assert episode(False) == episode(True)


def test_guess_the_number_turns_and_validity_follow_reverie():
    seed = 5
    first, second = misses(seed, 2)
    env = make("textarena", game="GuessTheNumber-v0", max_turns=4)
    env.reset(seed)
    r1 = env.step(f"[{first}]")
    r2 = env.step(f"[{first}]")  # a repeated guess: well formed, but the game refuses it
    r3 = env.step(f"[{second}]")
    r4 = env.step(f"[{misses(seed, 3)[2]}]")
    assert [r.info["valid"] for r in (r1, r2, r3, r4)] == [True, False, True, True]
    assert [r.info["turn"] for r in (r1, r2, r3, r4)] == [1, 2, 3, 4]  # the invalid move is a turn here
    assert [r.info["game_turn"] for r in (r1, r2, r3)] == [1, 1, 2]  # but not in TextArena's count
    assert [r.done for r in (r1, r2, r3, r4)] == [False, False, False, True]  # Reverie's budget: 4 turns
    assert not r4.info["success"] and r4.reward == 0.0


def test_two_invalid_moves_in_a_row_end_the_game_without_raising():
    env = make("textarena", game="GuessTheNumber-v0")
    env.reset(2)
    a, b = env.step("five"), env.step("[ 5 ]")
    assert (a.info["valid"], a.done) == (False, False)
    assert (b.info["valid"], b.done, b.reward, b.info["success"]) == (False, True, 0.0, False)


@pytest.mark.parametrize("reward", ["success", "textarena"])
def test_a_loss_with_partial_credit_is_not_a_success(reward):
    seed, env = 9, make("textarena", game="GuessTheNumber-v0", reward=reward)
    env.reset(seed)
    guesses = misses(seed, 10)
    results = [env.step(f"[{g}]") for g in guesses]
    assert results[-1].done and not any(r.done for r in results[:-1])
    credit = 1 - abs(guesses[-1] - guess_target(seed)) / 19  # TextArena's completion share on a loss
    assert results[-1].info["game_reward"] == pytest.approx(credit) and 0 < credit < 1
    assert results[-1].reward == pytest.approx(0.0 if reward == "success" else credit)
    assert not results[-1].info["success"]


def test_a_win_is_a_success_with_reward_one():
    seed, env = 4, make("textarena", game="GuessTheNumber-v0")
    env.reset(seed)
    result = env.step(f"[{guess_target(seed)}]")
    assert (result.done, result.reward, result.info["success"], result.info["valid"]) == (True, 1.0, True, True)


def test_the_expert_reads_only_the_hints_and_wins_within_the_budget():
    for seed in range(20):
        trajectory = collect(_Expert(), "textarena", env_kwargs={"game": "GuessTheNumber-v0"}, group_size=1,
                             group_seeds=[seed], progress=False)[0]
        assert trajectory.success and trajectory.num_turns <= 5  # binary search over 20 numbers


class _Expert:
    def act(self, views):
        return [view.env.expert_action() for view in views]


def test_task_keys_where_the_game_draws_an_observable_task():
    lake = make("textarena", game="FrozenLake-v0")
    keys = set()
    for seed in range(6):
        lake.reset(seed)
        keys.add(lake.task_key())
    assert len(keys) > 1 and None not in keys  # random holes: the map is the task
    guess = make("textarena", game="GuessTheNumber-v0")
    guess.reset(0)
    assert guess.task_key() is None  # the hidden number is chance, not an observable task


@pytest.mark.parametrize("game", GAMES)
@settings(max_examples=30, deadline=None)
@given(actions=st.lists(st.text(max_size=16), min_size=1, max_size=6))
def test_any_action_text_gives_an_answer_never_an_exception(game, actions):
    env = make("textarena", game=game)
    env.reset(0)
    for turn, action in enumerate(actions, start=1):
        result = env.step(action)
        assert isinstance(result.observation, str) and result.info["turn"] == turn
        assert isinstance(result.info["valid"], bool)
        if result.done:
            break


def test_unknown_games_and_options_fail_naming_the_key():
    with pytest.raises(ValueError, match="env.kwargs.game"):
        make("textarena", game="NoSuchGame-v0")
    with pytest.raises(ValueError, match="env.kwargs.reward"):
        make("textarena", reward="dense")


def test_a_game_ended_by_invalid_moves_with_partial_credit_is_no_success():
    seed = 6
    near = guess_target(seed) + (1 if guess_target(seed) < 20 else -1)  # one off: credit 18/19
    env = make("textarena", game="GuessTheNumber-v0", reward="textarena")
    env.reset(seed)
    env.step(f"[{near}]")
    env.step("x")
    last = env.step("x")  # the second invalid move in a row: TextArena ends the game
    assert last.done and last.info["game_reward"] == pytest.approx(18 / 19)
    assert not last.info["success"] and last.reward == pytest.approx(18 / 19)


UNLISTED = "LightsOut-v0"  # not in envs.textarena_games; moves are `[row col]`, 0-4


def test_an_unlisted_game_without_a_rule_probes_with_malformed_actions_only():
    env = make("textarena", game=UNLISTED)
    assert not env.capabilities.random_action
    words = env.vocabulary()  # probe episodes: no random action, so the malformed probe every turn
    assert "Lights" in words and len(words) > 20
    assert env.is_well_formed("I press [2 3]") and not env.is_well_formed("2 3")  # the bracket default


def test_an_unlisted_game_takes_its_random_action_rule_and_pattern_from_the_options():
    env = make("textarena", game=UNLISTED, random_action="[{0-4} {0-4}]", action_pattern=r"\[\d \d\]")
    assert env.capabilities.random_action
    env.reset(0)
    rng = random.Random(1)
    actions = [env.random_action(rng) for _ in range(30)]
    assert {a for a in actions} <= {f"[{r} {c}]" for r in range(5) for c in range(5)} and len(set(actions)) > 5
    result = env.step(actions[0])
    assert result.info["valid"] and "Move 1" in result.observation  # the game took the move
    assert env.is_well_formed("[2 3]") and not env.is_well_formed("[up]")  # the pattern given, not the default


def test_bad_rules_fail_naming_the_key():
    with pytest.raises(ValueError, match="env.kwargs.random_action"):
        make("textarena", game=UNLISTED, random_action="[{0-4]")
    with pytest.raises(ValueError, match="env.kwargs.action_pattern"):
        make("textarena", game=UNLISTED, action_pattern="[unclosed")


def test_a_game_that_needs_a_download_it_cannot_make_fails_in_one_line(monkeypatch):
    import textarena

    def refused_download(*args, **kwargs):  # what nltk raises once its download was refused
        raise LookupError("\n" + "*" * 70 + "\n  Resource 'words' not found.\n  Please use the NLTK Downloader")

    monkeypatch.setattr(textarena, "make", refused_download)
    with pytest.raises(RuntimeError) as refusal:
        make("textarena", game="Hangman-v0")
    message = str(refusal.value)
    assert "\n" not in message and "env.kwargs.game" in message and "'Hangman-v0'" in message
    assert "download" in message and "Resource 'words' not found." in message
