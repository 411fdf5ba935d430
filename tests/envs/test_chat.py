"""Chat JSONL: exact messages, exact round trips, defaults for foreign files, located errors."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.chat import ChatFormatError, export_chat_jsonl, import_chat_jsonl, trajectory_to_messages
from envs.trajectory import Trajectory, Turn


def two_turn() -> Trajectory:
    return Trajectory(
        env_name="hidden_number",
        env_kwargs={"n": 8, "lie": 0.1},
        seed=42,
        group_id=3,
        trajectory_id=7,
        source="imagined",
        turns=[
            Turn("Find n in 1..8", "guess(4)", "higher", 0.0, False, True, "lo=1 hi=8"),
            Turn("higher", "guess 6", "bad format: use guess(k)", -0.5, True, False, "lo=5 hi=8"),
        ],
        success=False,
        branch_turn=1,
        iteration=4,
        policy_version=9,
    )


def test_messages_are_user_then_assistant_tool_pairs() -> None:
    assert trajectory_to_messages(two_turn(), system_prompt="Play well.") == [
        {"role": "system", "content": "Play well."},
        {"role": "user", "content": "Find n in 1..8"},
        {"role": "assistant", "content": "guess(4)"},
        {"role": "tool", "content": "higher"},
        {"role": "assistant", "content": "guess 6"},
        {"role": "tool", "content": "bad format: use guess(k)"},
    ]


def test_an_observation_that_is_not_the_last_result_gets_its_own_user_message() -> None:
    traj = two_turn()
    traj.turns[1].observation = "higher (2 guesses left)"
    assert [m["role"] for m in trajectory_to_messages(traj)] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
    ]
    assert trajectory_to_messages(traj)[3]["content"] == "higher (2 guesses left)"


def test_record_carries_rewards_and_metadata(tmp_path: Path) -> None:
    export_chat_jsonl([two_turn()], tmp_path / "out.jsonl")
    (line,) = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(line)
    assert record["rewards"] == [0.0, -0.5] and record["episode_return"] == -0.5
    assert record["success"] is False and record["source"] == "imagined"
    assert (record["env_name"], record["env_kwargs"], record["seed"]) == (
        "hidden_number",
        {"n": 8, "lie": 0.1},
        42,
    )
    assert (record["group_id"], record["trajectory_id"]) == (3, 7)
    assert record["valid"] == [True, False] and record["dones"] == [False, True]
    assert record["anchors"] == ["lo=1 hi=8", "lo=5 hi=8"]
    assert (record["truncated"], record["branch_turn"], record["iteration"], record["policy_version"]) == (
        False,
        1,
        4,
        9,
    )


def test_round_trip_is_exact(tmp_path: Path) -> None:
    odd = two_turn()
    odd.turns[1].observation = "a fresh view\u2028with a line separator"
    odd.turns[1].reward = float("inf")
    odd.turns[0].reward = 0.1 + 0.2
    empty = Trajectory("x", {}, 0, 0, 1, turns=[], success=True)
    trajs = [two_turn(), odd, empty]
    export_chat_jsonl(trajs, tmp_path / "a" / "t.jsonl", system_prompt="sys\nprompt")
    assert import_chat_jsonl(tmp_path / "a" / "t.jsonl") == trajs


def test_minimal_foreign_file_imports_with_defaults(tmp_path: Path) -> None:
    lines = [
        {
            "messages": [
                {"role": "system", "content": "You are an agent."},
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": "search[shoes]"},
                {"role": "user", "content": "3 results"},
                {"role": "assistant", "content": "buy[1]", "extra": "ignored"},
            ],
            "reward": 1,
        },
        {
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            "episode_return": 0.5,
        },
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
    ]
    path = tmp_path / "foreign.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    first, second, third = import_chat_jsonl(path)
    assert first == Trajectory(
        env_name="unknown",
        env_kwargs={},
        seed=-1,
        group_id=0,
        trajectory_id=0,
        source="real",
        turns=[
            Turn("task", "search[shoes]", "3 results", 0.0, False, True, "task"),
            Turn("3 results", "buy[1]", "", 1.0, True, True, "3 results"),
        ],
        success=False,
    )
    assert second.turns == [Turn("q", "a", "", 0.5, True, True, "q")]
    assert (second.trajectory_id, second.group_id) == (1, 1)
    assert third.turns[0].reward == 0.0 and third.trajectory_id == 2
    assert (third.truncated, third.branch_turn, third.iteration, third.policy_version) == (
        False,
        0,
        None,
        None,
    )


def test_a_truncated_foreign_episode_has_no_done_turn(tmp_path: Path) -> None:
    record = {**json.loads(GOOD), "truncated": True, "iteration": None}
    (traj,) = import_chat_jsonl(write_lines(tmp_path / "f.jsonl", [json.dumps(record)]))
    assert traj.truncated and traj.iteration is None
    assert [t.done for t in traj.turns] == [False]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = json.dumps({"messages": [{"role": "user", "content": "o"}, {"role": "assistant", "content": "a"}]})


def raises_at(path: Path, line: int, what: str) -> None:
    with pytest.raises(ChatFormatError, match=re.escape(f"{path}, line {line}: ") + ".*" + what):
        import_chat_jsonl(path)


def test_bad_json_names_its_line(tmp_path: Path) -> None:
    raises_at(write_lines(tmp_path / "f.jsonl", [GOOD, GOOD, '{"messages": [', GOOD]), 3, "invalid JSON")


def test_blank_lines_still_count_towards_line_numbers(tmp_path: Path) -> None:
    raises_at(write_lines(tmp_path / "f.jsonl", [GOOD, "", GOOD, "[1, 2]"]), 4, "expected a JSON object")


def test_two_assistant_messages_in_a_row(tmp_path: Path) -> None:
    bad = {"messages": [{"role": "user", "content": "o"}] + [{"role": "assistant", "content": "a"}] * 2}
    raises_at(
        write_lines(tmp_path / "f.jsonl", [json.dumps(bad)]), 1, re.escape("messages[2]: two assistant")
    )


@pytest.mark.parametrize(
    ("record", "what"),
    [
        ({"rewards": [1.0]}, "missing 'messages'"),
        ({"messages": "hi"}, "'messages' must be a list"),
        ({"messages": [{"role": "assistant", "content": "a"}]}, "must precede the first action"),
        (
            {"messages": [{"role": "user", "content": 3}]},
            re.escape("messages[0] must have a string 'content'"),
        ),
        ({"messages": [{"role": "robot", "content": "x"}]}, "has role 'robot'"),
        (
            {"messages": [{"role": "user", "content": "o"}, {"role": "system", "content": "s"}]},
            "only the first",
        ),
        ({"messages": json.loads(GOOD)["messages"], "rewards": [1.0, 2.0]}, "'rewards' has 2 entries"),
        ({"messages": json.loads(GOOD)["messages"], "rewards": ["1"]}, "'rewards' must be a list of float"),
        ({"messages": json.loads(GOOD)["messages"], "seed": "7"}, "'seed' must be int"),
        ({"messages": json.loads(GOOD)["messages"], "success": 1}, "'success' must be bool"),
        ({"messages": json.loads(GOOD)["messages"], "source": "dream"}, "'source' must be"),
        ({"messages": json.loads(GOOD)["messages"], "rewards": [1.0], "episode_return": 2.0}, "sum to 1.0"),
        ({"messages": [], "reward": 1.0}, "no assistant turn"),
        ({"messages": json.loads(GOOD)["messages"], "truncated": True, "dones": [True]}, "ends one way"),
        (
            {"messages": json.loads(GOOD)["messages"], "branch_turn": 2},
            "'branch_turn' is 2 but the messages hold 1",
        ),
        (
            {"messages": json.loads(GOOD)["messages"], "iteration": "3"},
            "'iteration' must be int or null, got str",
        ),
        (
            {"messages": json.loads(GOOD)["messages"], "truncated": None},
            "'truncated' must be bool, got NoneType",
        ),
    ],
)
def test_malformed_records_say_what_is_wrong(tmp_path: Path, record: dict, what: str) -> None:
    raises_at(write_lines(tmp_path / "f.jsonl", [GOOD, json.dumps(record)]), 2, what)


def test_invalid_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b'{"messages": "\xff"}\n')
    raises_at(path, 2, "not UTF-8")


texts = st.text(max_size=10)
turn_st = st.builds(
    Turn, texts, texts, texts, st.floats(allow_nan=False), st.booleans(), st.booleans(), texts
)
# Observations drawn independently of earlier results exercise the extra-user-message path.


@st.composite
def traj_st(draw: st.DrawFn) -> Trajectory:
    turns = draw(st.lists(turn_st, max_size=4))
    truncated = draw(st.booleans())
    if truncated and turns:  # a truncated episode's last turn is not done
        turns[-1].done = False
    return Trajectory(
        env_name=draw(texts),
        env_kwargs=draw(
            st.dictionaries(texts, st.integers() | texts | st.lists(st.booleans(), max_size=2), max_size=2)
        ),
        seed=draw(st.integers()),
        group_id=draw(st.integers()),
        trajectory_id=draw(st.integers()),
        source=draw(st.sampled_from(["real", "imagined"])),
        turns=turns,
        success=draw(st.booleans()),
        truncated=truncated,
        branch_turn=draw(st.integers(0, len(turns))),
        iteration=draw(st.none() | st.integers()),
        policy_version=draw(st.none() | st.integers()),
    )


@settings(max_examples=60, deadline=None)
@given(trajs=st.lists(traj_st(), max_size=3), system_prompt=st.none() | texts)
def test_random_trajectories_round_trip(trajs: list[Trajectory], system_prompt: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        export_chat_jsonl(trajs, Path(folder) / "t.jsonl", system_prompt=system_prompt)
        assert import_chat_jsonl(Path(folder) / "t.jsonl") == trajs
