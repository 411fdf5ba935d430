"""Sokoban: push rules, rewards and symbols on hand-built rooms; planner optimality against hand
counts and brute force; the reverse-play generator; expert success; parsing, seeding, vocabulary."""

from __future__ import annotations

import itertools
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.base import Env, EpisodeDoneError
from envs.sokoban import INVALID_ACTION_MESSAGE, SokobanEnv, parse_action, parse_grid, render_grid
from envs.sokoban_generator import GenerationError, generate_room
from envs.sokoban_solver import ACTIONS, is_solved, move, solve
from envs.tokenizer import build_word_tokenizer, split_words

TWO_BOXES_IN_A_ROW = """
# # # # # # #
# P X O _ _ #
# _ _ _ X O #
# _ _ _ _ _ #
# # # # # # #
"""


def grid(text: str) -> str:
    """Hand-written rooms in this file carry surrounding newlines; observations do not."""
    return text.strip()


def env_at(text: str, max_turns: int = 20) -> SokobanEnv:
    env = SokobanEnv(max_turns=max_turns)
    env.reset_to_grid(text)
    return env


# --- push rules, symbols, rewards -------------------------------------------------------------


def test_env_follows_the_protocol():
    assert isinstance(SokobanEnv(), Env)


def test_walking_into_a_wall_changes_nothing_but_costs_a_turn():
    room = grid("""
# # # # #
# P _ _ #
# _ X O #
# _ _ _ #
# # # # #
""")
    env = env_at(room)
    for action in ("Up", "Left"):
        result = env.step(action)
        assert result.observation == room
        assert result.reward == pytest.approx(-0.1)
        assert result.info == {"valid": True, "success": False}
        assert not result.done
    assert env.turn == 2


def test_walk_onto_floor_and_target_shows_p_then_s():
    env = env_at("""
# # # # #
# P _ O #
# _ X O #
# _ X _ #
# # # # #
""")
    assert env.step("Right").observation == grid("""
# # # # #
# _ P O #
# _ X O #
# _ X _ #
# # # # #
""")
    assert env.step("Right").observation == grid("""
# # # # #
# _ _ S #
# _ X O #
# _ X _ #
# # # # #
""")


def test_push_into_wall_or_box_changes_nothing():
    into_box = grid("""
# # # # # #
# P X X O #
# _ _ _ O #
# # # # # #
""")
    result = env_at(into_box).step("Right")
    assert result.observation == into_box and result.reward == pytest.approx(-0.1) and result.info["valid"]
    into_wall = grid("""
# # # # #
# _ P X #
# _ _ O #
# # # # #
""")
    result = env_at(into_wall).step("Right")
    assert result.observation == into_wall and result.reward == pytest.approx(-0.1) and result.info["valid"]


def test_push_onto_target_then_off_it_rewards_plus_one_then_minus_one():
    env = env_at(TWO_BOXES_IN_A_ROW)
    onto = env.step("Right")
    assert onto.observation == grid("""
# # # # # # #
# _ P √ _ _ #
# _ _ _ X O #
# _ _ _ _ _ #
# # # # # # #
""")
    assert onto.reward == pytest.approx(-0.1 + 1.0)
    off = env.step("Right")
    assert off.observation == grid("""
# # # # # # #
# _ _ S X _ #
# _ _ _ X O #
# _ _ _ _ _ #
# # # # # # #
""")
    assert off.reward == pytest.approx(-0.1 - 1.0)
    assert not off.done and off.info == {"valid": True, "success": False}


def test_last_box_on_target_ends_the_episode_with_the_finishing_bonus():
    env = env_at("""
# # # # # # #
# P X O _ _ #
# _ X O _ _ #
# # # # # # #
""")
    rewards = [env.step(a).reward for a in ("Right", "Left", "Down")]
    assert rewards == pytest.approx([0.9, -0.1, -0.1])
    final = env.step("Right")
    assert final.reward == pytest.approx(-0.1 + 1.0 + 10.0)
    assert final.done and final.info == {"valid": True, "success": True}
    assert final.observation == grid("""
# # # # # # #
# _ _ √ _ _ #
# _ P √ _ _ #
# # # # # # #
""")
    with pytest.raises(EpisodeDoneError):
        env.step("Up")


def test_parse_grid_and_render_grid_round_trip():
    puzzle, player, boxes = parse_grid(TWO_BOXES_IN_A_ROW)
    assert (puzzle.height, puzzle.width) == (5, 7)
    assert player == puzzle.cell(1, 1)
    assert boxes == {puzzle.cell(1, 2), puzzle.cell(2, 4)}
    assert puzzle.targets == {puzzle.cell(1, 3), puzzle.cell(2, 5)}
    assert render_grid(puzzle, player, boxes) == grid(TWO_BOXES_IN_A_ROW)
    unspaced = "#####\n#P_√#\n#XO_#\n#####"  # spacing is optional when writing rooms by hand
    assert render_grid(*parse_grid(unspaced)) == "# # # # #\n# P _ √ #\n# X O _ #\n# # # # #"


@pytest.mark.parametrize(
    "bad",
    [
        "#####\n#P_X#\n#####",
        "####\n#PXO\n####",
        "#####\n#_XO#\n#####",
        "#####\n#PXA#\n#O__#\n#####",
        "#####\n#PPXO#\n#####",
    ],
)
def test_parse_grid_rejects_malformed_rooms(bad):
    with pytest.raises(ValueError):
        parse_grid(bad)


# --- the planner ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("room", "shortest"),
    [
        ("# # # # # #\n# _ _ _ _ #\n# P X _ O #\n# _ _ _ _ #\n# # # # # #", 2),  # push, push
        ("# # # # # # #\n# _ _ _ _ _ #\n# O _ X _ P #\n# _ _ _ _ _ #\n# # # # # # #", 3),  # step, push, push
        # The player stands on the target, on the wrong side of the box: walk round it
        # (5 moves: the straight row is blocked), then push twice.
        ("# # # # # # #\n# _ _ _ _ _ #\n# S _ X _ _ #\n# _ _ _ _ _ #\n# # # # # # #", 7),
        # Two boxes: push the top one, walk back round (2 moves), push the bottom one.
        ("# # # # # # #\n# P X O _ _ #\n# _ X O _ _ #\n# # # # # # #", 4),
    ],
)
def test_solver_finds_the_hand_counted_shortest_plan(room, shortest):
    puzzle, player, boxes = parse_grid(room)
    plan = solve(puzzle, player, boxes)
    assert plan is not None and len(plan) == shortest
    for action in plan:
        player, boxes = move(puzzle, player, boxes, action)
    assert is_solved(puzzle, boxes)
    assert solve(*parse_grid(room), max_depth=shortest - 1) is None


def test_solver_reports_unsolvable_and_solved_states():
    cornered = "# # # # #\n# X _ _ #\n# _ P O #\n# _ _ _ #\n# # # # #"
    assert solve(*parse_grid(cornered)) is None
    env = env_at(cornered)
    assert env.expert_action() == "Up"  # documented fallback when no plan exists
    puzzle, player, _ = parse_grid("# # # # #\n# P X O #\n# # # # #")
    assert solve(puzzle, player, puzzle.targets) == []


def test_solver_node_cap_gives_up():
    room = parse_grid("# # # # # # #\n# _ _ _ _ _ #\n# S _ X _ _ #\n# _ _ _ _ _ #\n# # # # # # #")
    assert solve(*room, max_nodes=5) is None
    assert len(solve(*room, max_nodes=10_000)) == 7


def brute_force_shortest(puzzle, player, boxes, limit: int) -> int | None:
    """Try every move sequence of length 0, 1, ..., limit; independent of the BFS bookkeeping."""
    for length in range(limit + 1):
        for plan in itertools.product(ACTIONS, repeat=length):
            p, b = player, boxes
            for action in plan:
                p, b = move(puzzle, p, b, action)
            if is_solved(puzzle, b):
                return length
    return None


def test_solver_matches_brute_force_on_generated_rooms():
    checked = 0
    for seed in range(60):
        num_boxes = 1 + seed % 2
        room = generate_room(random.Random(seed), (5, 5), num_boxes, max_solution_length=7)
        if len(room.solution) > 6:
            continue  # keep the exhaustive search small
        assert brute_force_shortest(room.puzzle, room.player, room.boxes, 6) == len(room.solution)
        checked += 1
    assert checked >= 30


# --- the generator ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dim_room", "num_boxes"), [((6, 6), 1), ((5, 5), 1), ((6, 6), 2), ((5, 5), 2), ((7, 7), 3), ((8, 5), 3)]
)
def test_generated_rooms_are_walled_unsolved_and_solvable_within_budget(dim_room, num_boxes):
    for seed in range(40):
        room = generate_room(random.Random(seed), dim_room, num_boxes, max_solution_length=20)
        puzzle = room.puzzle
        assert (puzzle.height, puzzle.width) == dim_room
        for cell in puzzle.floor:
            row, col = puzzle.row_col(cell)
            assert 0 < row < dim_room[0] - 1 and 0 < col < dim_room[1] - 1
        assert len(room.boxes) == len(puzzle.targets) == num_boxes
        assert puzzle.targets <= puzzle.floor and room.boxes <= puzzle.floor
        assert not room.boxes & puzzle.targets
        assert room.player in puzzle.floor and room.player not in room.boxes
        assert 1 <= len(room.solution) <= 20
        player, boxes = room.player, room.boxes
        for action in room.solution:
            player, boxes = move(puzzle, player, boxes, action)
        assert is_solved(puzzle, boxes)


def test_generator_is_deterministic_in_the_rng_and_varied_across_seeds():
    assert generate_room(random.Random(7), (6, 6), 2) == generate_room(random.Random(7), (6, 6), 2)
    random.seed(1)  # global random state must not matter
    a = generate_room(random.Random(11))
    random.seed(2)
    assert generate_room(random.Random(11)) == a
    distinct = {(r.puzzle, r.player, r.boxes) for r in (generate_room(random.Random(s)) for s in range(50))}
    assert len(distinct) >= 45


def test_generator_fails_clearly_when_the_budget_cannot_be_met():
    with pytest.raises(GenerationError, match="after 5 attempts"):
        generate_room(random.Random(0), (6, 6), 1, max_solution_length=0, max_attempts=5)
    with pytest.raises(GenerationError, match="num_boxes=8"):
        generate_room(random.Random(0), (5, 5), 8)


def test_generation_takes_a_few_milliseconds():
    rng = random.Random(0)
    start = time.perf_counter()
    for _ in range(100):
        generate_room(rng, (6, 6), 2)
    per_room = (time.perf_counter() - start) / 100
    assert per_room < 0.02  # measured about 1 ms on a shared CPU; loose for busy machines


# --- the expert ---------------------------------------------------------------------------------


def run_expert(env: SokobanEnv, seed: int) -> tuple[bool, int, float]:
    env.reset(seed)
    total, turns = 0.0, 0
    while True:
        result = env.step(env.expert_action())
        total += result.reward
        turns += 1
        if result.done:
            return result.info["success"], turns, total


@pytest.mark.parametrize(
    ("dim_room", "num_boxes", "seeds"),
    [((6, 6), 1, 200), ((5, 5), 1, 200), ((6, 6), 2, 50), ((5, 5), 2, 40), ((6, 6), 3, 10)],
)
def test_expert_solves_generated_rooms_in_the_shortest_number_of_moves(dim_room, num_boxes, seeds):
    env = SokobanEnv(dim_room=dim_room, num_boxes=num_boxes)
    wins = 0
    for seed in range(seeds):
        shortest = len(generate_room(random.Random(seed), dim_room, num_boxes, 20).solution)
        success, turns, total = run_expert(env, seed)
        wins += success
        assert turns == shortest
        if num_boxes == 1:  # one push onto the target ends the episode, so no box ever leaves one
            assert total == pytest.approx(11.0 - 0.1 * shortest)
    assert wins / seeds >= 0.99


def test_expert_replans_after_the_agent_strays():
    env = SokobanEnv()
    rng = random.Random(3)
    for seed in range(30):
        env.reset(seed)
        done = False
        while not done:
            remaining = solve(env.puzzle, env.player, env.boxes)
            use_expert = rng.random() < 0.5
            action = env.expert_action() if use_expert else env.random_action(rng)
            if remaining is not None and use_expert:
                # The expert's move takes one step off the shortest distance to the goal.
                after = move(env.puzzle, env.player, env.boxes, action)
                assert len(solve(env.puzzle, *after)) == len(remaining) - 1
            done = env.step(action).done


# --- parsing, turns, seeding, vocabulary ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Up", "Up"),
        (" up ", "Up"),
        ("\tDOWN\n", "Down"),
        ("L e f t", "Left"),
        ("rIgHt", "Right"),
        ("go left", None),
        ("Up.", None),
        ("", None),
        ("upup", None),
        ("Left Right", None),
        ("north", None),
    ],
)
def test_action_parsing_is_case_and_whitespace_tolerant_otherwise_strict(text, expected):
    assert parse_action(text) == expected


def test_actions_survive_a_word_tokenizer_round_trip():
    env = SokobanEnv()
    tokenizer = build_word_tokenizer(env.vocabulary())
    for action in ACTIONS:
        decoded = tokenizer.decode(tokenizer(f" {action}\n").input_ids)
        assert parse_action(decoded) == action


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_text_never_raises_and_counts_the_turn(text):
    env = SokobanEnv(max_turns=3)
    before = env.reset(5)
    result = env.step(text)
    assert env.turn == 1
    assert result.info["valid"] == ("".join(text.split()).lower() in {"up", "down", "left", "right"})
    if not result.info["valid"]:
        assert result.observation == f"{INVALID_ACTION_MESSAGE}\n{before}"
        assert env.anchor_observation() == before
        assert result.reward == pytest.approx(-0.1)
        assert not result.done and result.info["success"] is False


def test_invalid_actions_run_out_the_turn_budget_and_then_stepping_raises():
    env = SokobanEnv(max_turns=4)
    env.reset(0)
    results = [env.step("jump") for _ in range(4)]
    assert [r.done for r in results] == [False, False, False, True]
    assert all(not r.info["valid"] and not r.info["success"] for r in results)
    assert "Up, Down, Left or Right" in results[-1].observation
    with pytest.raises(EpisodeDoneError):
        env.step("Up")


def test_stepping_before_reset_raises():
    with pytest.raises(EpisodeDoneError):
        SokobanEnv().step("Up")


def test_same_seed_same_room_and_reset_clears_the_episode():
    a, b = SokobanEnv(), SokobanEnv()
    first = a.reset(42)
    assert b.reset(42) == first
    a.step("Up")
    assert a.reset(42) == first and a.turn == 0
    assert len({a.reset(s) for s in range(30)}) >= 25
    assert SokobanEnv(dim_room=(5, 5)).reset(42).count("\n") == 4


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"dim_room": (4, 6)}, "dim_room"),
        ({"dim_room": 6}, "dim_room"),
        ({"dim_room": "66"}, "dim_room"),
        ({"dim_room": (6, 6, 6)}, "dim_room"),
        ({"num_boxes": 0}, "num_boxes"),
        ({"dim_room": (6, 9)}, "dim_room"),
        ({"num_boxes": 3, "dim_room": (5, 5)}, "num_boxes"),
        ({"num_boxes": 4}, "num_boxes"),
        ({"num_boxes": True}, "num_boxes"),
        ({"max_turns": 0}, "max_turns"),
        ({"max_turns": 2.5}, "max_turns"),
    ],
)
def test_bad_options_raise_value_errors_naming_the_option(kwargs, option):
    with pytest.raises(ValueError, match=option):
        SokobanEnv(**kwargs)


def test_dim_room_accepts_a_list_from_yaml_config():
    from omegaconf import OmegaConf

    options = OmegaConf.create({"dim_room": [5, 5], "num_boxes": 2})
    env = SokobanEnv(dim_room=options.dim_room, num_boxes=options.num_boxes)
    assert env.dim_room == (5, 5)
    assert env.reset(0).count("\n") == 4


def test_random_action_is_uniform_over_the_four_moves():
    rng = random.Random(0)
    counts = {a: 0 for a in ACTIONS}
    for _ in range(4000):
        counts[SokobanEnv().random_action(rng)] += 1
    assert all(900 < c < 1100 for c in counts.values())


@pytest.mark.parametrize(("dim_room", "num_boxes"), [((6, 6), 1), ((5, 5), 2)])
def test_random_episodes_render_only_vocabulary_words(dim_room, num_boxes):
    env = SokobanEnv(dim_room=dim_room, num_boxes=num_boxes)
    vocabulary = set(env.vocabulary())
    rng = random.Random(0)
    seen = set()
    for seed in range(60):
        texts = [env.reset(seed)]
        done = False
        while not done:
            action = env.random_action(rng) if rng.random() < 0.8 else "dance"
            result = env.step(action)
            texts += [result.observation, action] if result.info["valid"] else [result.observation]
            done = result.done
        for text in texts:
            seen.update(split_words(text))
    assert seen <= vocabulary
    assert {"√", "X", "O", "P", "#", "_", "\n", "Invalid"} <= seen  # the episodes did exercise the symbols
