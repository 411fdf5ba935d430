"""FrozenLakeEnv: hand-checked dynamics and table, gymnasium parity, experts, seeding, fuzz."""

from __future__ import annotations

import math
import random
from collections import deque
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.base import Env, EpisodeDoneError
from envs.frozen_lake import DEFAULT_MAP, FrozenLakeEnv
from envs.tokenizer import split_words

THIRD = 1 / 3
# Independent model of the dynamics: (drow, dcol) for Left, Down, Right, Up.
MOVES = [(0, -1), (1, 0), (0, 1), (-1, 0)]


def walk(desc, row, col, direction):
    drow, dcol = MOVES[direction]
    return min(max(row + drow, 0), len(desc) - 1), min(max(col + dcol, 0), len(desc[0]) - 1)


def shortest_path(desc) -> int | None:
    """Forward breadth-first search from S over non-slippery moves (holes end the walk)."""
    start = next((r, c) for r, row in enumerate(desc) for c, ch in enumerate(row) if ch == "S")
    seen, queue = {start: 0}, deque([start])
    while queue:
        r, c = queue.popleft()
        if desc[r][c] == "G":
            return seen[(r, c)]
        if desc[r][c] == "H":
            continue
        for d in range(4):
            nxt = walk(desc, r, c, d)
            if nxt not in seen:
                seen[nxt] = seen[(r, c)] + 1
                queue.append(nxt)
    return None


def play(env: Env, seed: int, policy) -> list:
    """Run one episode; return the list of (observation, StepResult)."""
    steps, obs, done = [], env.reset(seed), False
    while not done:
        result = env.step(policy(env))
        steps.append((obs, result))
        obs, done = result.observation, result.done
    return steps


def test_protocol_and_first_observation():
    env = FrozenLakeEnv()
    assert isinstance(env, Env)
    assert env.name == "frozen_lake" and env.max_turns == 12
    assert env.reset(0) == (
        "reach G and avoid O . answer Left , Down , Right or Up\nP _ _ _\n_ O _ O\n_ _ _ O\nO _ _ G"
    )
    assert env.anchor_observation() == "P _ _ _\n_ O _ O\n_ _ _ O\nO _ _ G"
    assert FrozenLakeEnv(size=8).max_turns == 24


# --- dynamics by hand ---------------------------------------------------------------------------
def test_walk_to_the_goal_by_hand():
    env = FrozenLakeEnv()
    env.reset(0)
    result = env.step("Left")  # into the wall: stays
    assert result.observation == "P _ _ _\n_ O _ O\n_ _ _ O\nO _ _ G" and result.info["state"] == 0
    states = [env.step(a).info["state"] for a in ["Down", "Down", "Right", "Down", "Right"]]
    assert states == [4, 8, 9, 13, 14]
    result = env.step("Right")
    assert result.observation == "_ _ _ _\n_ O _ O\n_ _ _ O\nO _ _ √"
    assert (result.reward, result.done, result.info["success"], result.info["turn"]) == (1.0, True, True, 7)
    with pytest.raises(EpisodeDoneError):
        env.step("Up")


def test_hole_ends_the_episode_with_zero():
    env = FrozenLakeEnv()
    env.reset(0)
    env.step("Right")
    result = env.step("down")
    assert result.observation == "_ _ _ _\n_ X _ O\n_ _ _ O\nO _ _ G"
    assert (result.reward, result.done, result.info["success"], result.info["state"]) == (0.0, True, False, 5)
    with pytest.raises(EpisodeDoneError):
        env.step("Up")


def test_invalid_actions_count_turns_and_keep_the_state():
    env = FrozenLakeEnv(max_turns=3)
    env.reset(0)
    env.step("Right")
    for turn, text in [(2, "jump"), (3, "u p")]:
        result = env.step(text)
        assert (
            result.observation
            == "invalid action . answer Left , Down , Right or Up\n_ P _ _\n_ O _ O\n_ _ _ O\nO _ _ G"
        )
        assert result.info["valid"] is False and result.info["turn"] == turn and result.info["state"] == 1
        assert result.reward == 0.0
    assert result.done and result.info["success"] is False
    with pytest.raises(EpisodeDoneError):
        env.step("Right")


@pytest.mark.parametrize("text,state", [(" up ", 0), ("DOWN", 4), ("\tRight\n", 1), ("lEfT", 0)])
def test_case_and_whitespace_variants_parse(text, state):
    env = FrozenLakeEnv()
    env.reset(0)
    result = env.step(text)
    assert result.info["valid"] is True and result.info["state"] == state


# --- the transition table -----------------------------------------------------------------------
def test_transition_table_hand_checked_entries():
    plain = FrozenLakeEnv().transition_probabilities()
    assert plain[0][0] == [(1.0, 0, 0.0, False)]  # Left into the wall
    assert plain[0][1] == [(1.0, 4, 0.0, False)]
    assert plain[1][1] == [(1.0, 5, 0.0, True)]  # into the hole at (1, 1)
    assert plain[14][2] == [(1.0, 15, 1.0, True)]  # onto the goal
    assert all(plain[s][a] == [(1.0, s, 0.0, True)] for s in (5, 7, 11, 12, 15) for a in range(4))

    slippery = FrozenLakeEnv(is_slippery=True).transition_probabilities()
    # Left from 0 slips Up (wall), goes Left (wall) or slips Down, in gymnasium's order a-1, a, a+1.
    assert slippery[0][0] == [(THIRD, 0, 0.0, False), (THIRD, 0, 0.0, False), (THIRD, 4, 0.0, False)]
    assert slippery[14][1] == [(THIRD, 13, 0.0, False), (THIRD, 14, 0.0, False), (THIRD, 15, 1.0, True)]
    assert slippery[10][2] == [(THIRD, 14, 0.0, False), (THIRD, 11, 0.0, True), (THIRD, 6, 0.0, False)]
    for s, row in slippery.items():
        for a, outcomes in row.items():
            assert math.isclose(sum(p for p, *_ in outcomes), 1.0), (s, a)


def test_transition_table_is_a_copy():
    env = FrozenLakeEnv()
    env.transition_probabilities()[0][0].clear()
    assert env.transition_probabilities()[0][0] == [(1.0, 0, 0.0, False)]


@pytest.mark.parametrize("is_slippery", [False, True])
@pytest.mark.parametrize("size,seed", [(None, 0), (4, 3), (8, 11), (6, 5)])
def test_transition_table_matches_gymnasium(is_slippery, size, seed):
    frozen_lake = pytest.importorskip("gymnasium.envs.toy_text.frozen_lake")
    env = FrozenLakeEnv(size=size, is_slippery=is_slippery)
    env.reset(seed)
    ours = env.transition_probabilities()
    theirs = frozen_lake.FrozenLakeEnv(desc=env.desc, is_slippery=is_slippery).P
    assert ours.keys() == theirs.keys()
    for s in theirs:
        assert ours[s].keys() == theirs[s].keys()
        for a in theirs[s]:
            assert len(ours[s][a]) == len(theirs[s][a]), (s, a)
            for (p, nxt, r, done), (gp, gnxt, gr, gdone) in zip(ours[s][a], theirs[s][a], strict=True):
                assert math.isclose(p, gp) and (nxt, r, done) == (gnxt, gr, gdone), (s, a)


def test_slips_follow_the_table():
    # Down from the start: Left (stay at 0), Down (4), Right (1), each with probability 1/3.
    env = FrozenLakeEnv(is_slippery=True)
    trials, counts = 3000, {0: 0, 4: 0, 1: 0}
    for seed in range(trials):
        env.reset(seed)
        result = env.step("Down")
        counts[result.info["state"]] += 1
        assert result.info["slipped"] is (result.info["direction"] != "Down")
    tolerance = 4 * math.sqrt(THIRD * (1 - THIRD) / trials)
    assert all(abs(c / trials - THIRD) < tolerance for c in counts.values()), counts


# --- random maps --------------------------------------------------------------------------------
def test_random_maps_are_seeded_well_formed_and_solvable_in_time():
    env = FrozenLakeEnv(size=5)
    maps = []
    for seed in range(100):
        env.reset(seed)
        desc = env.desc
        assert len(desc) == 5 and all(len(r) == 5 for r in desc)
        assert desc[0][0] == "S" and desc[-1][-1] == "G" and "".join(desc).count("S") == 1
        assert set("".join(desc)) <= set("SFHG")
        assert shortest_path(desc) is not None and shortest_path(desc) <= env.max_turns
        maps.append(tuple(desc))
    env.reset(7)
    assert tuple(env.desc) == maps[7]
    assert len(set(maps)) > 90
    holes = sum(m.count("H") for rows in maps for m in rows) / (100 * 23)  # 23 cells are drawn
    assert 0.1 < holes < 0.25  # drawn with 0.2, a little fewer after rejecting blocked maps
    assert FrozenLakeEnv(size=3, p_frozen=1.0).reset(0).endswith("P _ _\n_ _ _\n_ _ G")


def test_random_map_not_available_before_reset():
    env = FrozenLakeEnv(size=4)
    with pytest.raises(RuntimeError):
        env.transition_probabilities()


# --- experts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [None, 4, 8])
def test_expert_takes_a_shortest_path_without_slip(size):
    env = FrozenLakeEnv(size=size)
    wins = 0
    for seed in range(200 if size else 5):
        steps = play(env, seed, lambda e: e.expert_action())
        wins += steps[-1][1].info["success"]
        assert len(steps) == shortest_path(env.desc)
    assert wins / (200 if size else 5) >= 0.99


SMALL = ("SFF", "FHF", "FFG")


@cache
def best_success(row: int, col: int, turns: int) -> float:
    """Expectimax over slippery moves on SMALL: the best chance of reaching G within ``turns``."""
    if SMALL[row][col] == "G":
        return 1.0
    if SMALL[row][col] == "H" or turns == 0:
        return 0.0
    return max(action_value(row, col, a, turns) for a in range(4))


def action_value(row: int, col: int, action: int, turns: int) -> float:
    return (
        sum(
            best_success(*walk(SMALL, row, col, d), turns - 1)
            for d in ((action - 1) % 4, action, (action + 1) % 4)
        )
        / 3
    )


def test_slippery_expert_is_optimal_for_the_turns_left():
    env = FrozenLakeEnv(desc=list(SMALL), is_slippery=True, max_turns=6)
    names = ["Left", "Down", "Right", "Up"]
    wins, trials = 0, 1000
    for seed in range(trials):
        env.reset(seed)
        state, turn, done = 0, 0, False
        while not done:
            action = env.expert_action()
            row, col = divmod(state, 3)
            values = [action_value(row, col, a, 6 - turn) for a in range(4)]
            assert math.isclose(values[names.index(action)], max(values)), (state, turn, values)
            result = env.step(action)
            state, turn, done = result.info["state"], turn + 1, result.done
        wins += result.info["success"]
    value = best_success(0, 0, 6)
    assert abs(wins / trials - value) < 4 * math.sqrt(value * (1 - value) / trials)


# --- seeding, fuzz, vocabulary, options ---------------------------------------------------------
def test_same_seed_same_episode_different_seeds_differ():
    def observations(seed: int, **kwargs) -> list[str]:
        rng = random.Random(42)
        return [r.observation for _, r in play(FrozenLakeEnv(**kwargs), seed, lambda e: e.random_action(rng))]

    for kwargs in [{"is_slippery": True}, {"size": 4}]:
        assert observations(3, **kwargs) == observations(3, **kwargs)
        assert len({tuple(observations(s, **kwargs)) for s in range(10)}) > 1
    # A fixed map without slip is deterministic: the seed changes nothing.
    assert len({tuple(observations(s)) for s in range(5)}) == 1


def oracle_action(text: str) -> str | None:
    """Independent reference: the text, stripped of ASCII whitespace, is one action name in any case."""
    word = text.strip(" \t\n\r\f\v")
    if not word.isascii():
        return None
    return {"left": "Left", "down": "Down", "right": "Right", "up": "Up"}.get(word.lower())


near_valid = st.builds(
    lambda a, w, b: a + w + b,
    st.sampled_from(["", " ", "\t", "\n"]),
    st.sampled_from(["Left", "DOWN", "right", "uP", "u p", "Upp", "left right", "Lef"]),
    st.sampled_from(["", " ", "  ", "\n", "."]),
)
actions = st.one_of(st.text(max_size=12), st.text(alphabet="LeftDownRightUp \t", max_size=8), near_valid)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), texts=st.lists(actions, min_size=1, max_size=8), slippery=st.booleans())
def test_fuzz_arbitrary_text_actions(seed, texts, slippery):
    env = FrozenLakeEnv(is_slippery=slippery, max_turns=5)
    env.reset(seed)
    for turn, text in enumerate(texts, start=1):
        before = env.anchor_observation()
        result = env.step(text)
        expected = oracle_action(text)
        assert result.info["valid"] is (expected is not None)
        assert result.info["turn"] == turn
        if expected is None:
            assert result.observation == f"invalid action . answer Left , Down , Right or Up\n{before}"
            assert result.reward == 0.0
        assert result.done is (turn == 5 or result.info["state"] in (5, 7, 11, 12, 15))
        if result.done:
            with pytest.raises(EpisodeDoneError):
                env.step(text)
            break


def test_vocabulary_covers_everything_rendered():
    for kwargs in [{}, {"is_slippery": True}, {"size": 6}, {"desc": ["SFG", "HFH"]}]:
        env = FrozenLakeEnv(**kwargs)
        vocabulary = set(env.vocabulary())
        rng = random.Random(0)

        def mixed(e, rng=rng):
            return rng.choice([e.expert_action(), e.random_action(rng), "fly", "up!"])

        for seed in range(40):
            for obs, result in play(env, seed, mixed):
                for text in (obs, result.observation, env.anchor_observation(), env.expert_action()):
                    assert set(split_words(text)) <= vocabulary, text


def test_custom_map_without_a_path_is_playable():
    env = FrozenLakeEnv(desc=["SH", "HG"], max_turns=2)
    env.reset(0)
    assert env.expert_action() in ("Left", "Up")  # the only moves that keep out of the holes
    assert env.step(env.expert_action()).info["state"] == 0


@pytest.mark.parametrize(
    "kwargs,option",
    [
        ({"desc": list(DEFAULT_MAP), "size": 4}, "desc"),
        ({"size": 1}, "size"),
        ({"size": 4.0}, "size"),
        ({"p_frozen": 0.0}, "p_frozen"),
        ({"is_slippery": "yes"}, "is_slippery"),
        ({"max_turns": 0}, "max_turns"),
        ({"desc": "SFFG"}, "desc"),
        ({"desc": ["SF", "FX"]}, "desc"),
        ({"desc": ["SF", "SG"]}, "desc"),
        ({"desc": ["SF", "FFG"]}, "desc"),
        ({"desc": ["SF", "FF"]}, "desc"),
    ],
)
def test_bad_options_raise_naming_the_option(kwargs, option):
    with pytest.raises(ValueError, match=option):
        FrozenLakeEnv(**kwargs)
