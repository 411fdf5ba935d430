"""Trajectories as chat messages, one JSON object per line (JSONL): how other agents' data comes in.

One line holds one trajectory::

    {"messages": [{"role": "system", "content": "..."},      optional, only first
                  {"role": "user", "content": obs_0},        the first observation
                  {"role": "assistant", "content": action_0},
                  {"role": "tool", "content": next_obs_0},   the tool result, also obs_1
                  {"role": "assistant", "content": action_1},
                  {"role": "tool", "content": next_obs_1}, ...],
     "rewards": [r_0, r_1, ...], "episode_return": float, "success": bool,
     "env_name": str, "env_kwargs": {...}, "seed": int, "group_id": int, "trajectory_id": int,
     "source": "real" | "imagined", "dones": [...], "valid": [...], "anchors": [...],
     "truncated": bool, "branch_turn": int, "iteration": int | null, "policy_version": int | null}

Observations are ``user`` or ``tool`` messages, actions are ``assistant`` messages. Between two
actions there is one observation message (the tool result, which is also the next turn's
observation) or two (the tool result, then a differing next observation; exported as ``user``).
After the last action there is at most one (its tool result; missing means ``""``).

Importing fills what a foreign file leaves out: rewards from ``"rewards"`` (a list), else
``"reward"`` (a final reward on the last turn), else ``"episode_return"`` on the last turn, else
zeros; ``truncated`` False; ``dones`` False except the last turn (unless ``truncated``); ``valid``
True; anchors equal to the observations; ``success`` False; ``env_name`` ``"unknown"``; ``seed`` -1
(unknown); ``trajectory_id`` and ``group_id`` the 0-based line number; ``source`` ``"real"``;
``branch_turn`` 0; ``iteration`` and ``policy_version`` null. Unknown keys are ignored. Files are
parsed with ``json`` only: nothing is evaluated or unpickled. ``Turn.sample`` (token ids) is not
exported: a chat file carries text.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from envs.trajectory import Trajectory, Turn

OBSERVATION_ROLES = ("user", "tool")
ROLES = ("system", "assistant", *OBSERVATION_ROLES)


class ChatFormatError(ValueError):
    """A chat JSONL line that cannot be read as a trajectory; the message says where and why."""


def trajectory_to_messages(traj: Trajectory, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The trajectory as chat messages (see the module docstring for the layout)."""
    messages = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
    for k, turn in enumerate(traj.turns):
        if k == 0:
            messages.append({"role": "user", "content": turn.observation})
        elif turn.observation != traj.turns[k - 1].next_observation:
            messages.append({"role": "user", "content": turn.observation})  # not the previous result
        messages.append({"role": "assistant", "content": turn.action})
        messages.append({"role": "tool", "content": turn.next_observation})
    return messages


def trajectory_to_chat_record(traj: Trajectory, system_prompt: str | None = None) -> dict[str, Any]:
    """One JSONL object: messages plus reward fields and every piece of trajectory metadata."""
    if json.loads(json.dumps(traj.env_kwargs)) != traj.env_kwargs:
        raise ValueError(
            f"env_kwargs {traj.env_kwargs!r} do not survive JSON: use str keys and lists, not tuples"
        )
    return {
        "messages": trajectory_to_messages(traj, system_prompt),
        "rewards": [t.reward for t in traj.turns],
        "episode_return": traj.episode_return,
        "success": traj.success,
        "env_name": traj.env_name,
        "env_kwargs": traj.env_kwargs,
        "seed": traj.seed,
        "group_id": traj.group_id,
        "trajectory_id": traj.trajectory_id,
        "source": traj.source,
        "dones": [t.done for t in traj.turns],
        "valid": [t.valid for t in traj.turns],
        "anchors": [t.anchor_observation for t in traj.turns],
        "truncated": traj.truncated,
        "branch_turn": traj.branch_turn,
        "iteration": traj.iteration,
        "policy_version": traj.policy_version,
    }


def export_chat_jsonl(
    trajectories: Iterable[Trajectory], path: str | os.PathLike[str], system_prompt: str | None = None
) -> None:
    """Write one chat record per line; the file appears complete or not at all (temp file + rename)."""
    path = Path(path)
    lines = [
        json.dumps(trajectory_to_chat_record(t, system_prompt), ensure_ascii=False) for t in trajectories
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex}")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(tmp, path)


def import_chat_jsonl(path: str | os.PathLike[str]) -> list[Trajectory]:
    """Read every non-blank line as a trajectory; a bad line raises ``ChatFormatError`` naming it."""
    path = Path(path)
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # tolerate a UTF-8 byte-order mark
    trajectories = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise ChatFormatError(f"not UTF-8 ({err.reason} at byte {err.start})") from err
            except json.JSONDecodeError as err:
                raise ChatFormatError(f"invalid JSON ({err.msg} at column {err.colno})") from err
            trajectories.append(chat_record_to_trajectory(record, index=number - 1))
        except ChatFormatError as err:
            raise ChatFormatError(f"{path}, line {number}: {err}") from err
    return trajectories


def chat_record_to_trajectory(record: Any, index: int = 0) -> Trajectory:
    """Parse one chat record; ``index`` fills missing ids. Raises ``ChatFormatError`` saying what is wrong."""
    if not isinstance(record, dict):
        raise ChatFormatError(f"expected a JSON object, got {type(record).__name__}")
    if "messages" not in record:
        raise ChatFormatError("missing 'messages'")
    steps = _parse_messages(record["messages"])
    n = len(steps)
    observations = [obs for obs, _, _ in steps]
    rewards = _rewards(record, n)
    truncated = _field(record, "truncated", bool, False)
    dones = _list_field(record, "dones", bool, n, [k == n - 1 and not truncated for k in range(n)])
    valid = _list_field(record, "valid", bool, n, [True] * n)
    anchors = _list_field(record, "anchors", str, n, observations)
    source = _field(record, "source", str, "real")
    if source not in ("real", "imagined"):
        raise ChatFormatError(f"'source' must be 'real' or 'imagined', got {source!r}")
    if truncated and n and dones[-1]:
        raise ChatFormatError("'truncated' is true but the last turn is done: an episode ends one way")
    branch_turn = _field(record, "branch_turn", int, 0)
    if not 0 <= branch_turn <= n:
        raise ChatFormatError(f"'branch_turn' is {branch_turn} but the messages hold {n} turns")
    turns = [
        Turn(obs, action, next_obs, rewards[k], dones[k], valid[k], anchors[k])
        for k, (obs, action, next_obs) in enumerate(steps)
    ]
    return Trajectory(
        env_name=_field(record, "env_name", str, "unknown"),
        env_kwargs=_field(record, "env_kwargs", dict, {}),
        seed=_field(record, "seed", int, -1),
        group_id=_field(record, "group_id", int, index),
        trajectory_id=_field(record, "trajectory_id", int, index),
        source=source,
        turns=turns,
        success=_field(record, "success", bool, False),
        truncated=truncated,
        branch_turn=branch_turn,
        iteration=_field(record, "iteration", int, None, nullable=True),
        policy_version=_field(record, "policy_version", int, None, nullable=True),
    )


def _parse_messages(messages: Any) -> list[tuple[str, str, str]]:
    """(observation, action, next observation) per assistant message, checking the role order."""
    if not isinstance(messages, list):
        raise ChatFormatError(f"'messages' must be a list, got {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ChatFormatError(f"messages[{i}] must be an object with a string 'role'")
        if message["role"] not in ROLES:
            raise ChatFormatError(f"messages[{i}] has role {message['role']!r}; expected one of {ROLES}")
        if message["role"] == "system" and i > 0:
            raise ChatFormatError(f"messages[{i}] is a system message; only the first message may be one")
        if not isinstance(message.get("content"), str):
            raise ChatFormatError(f"messages[{i}] must have a string 'content'")
    start = 1 if messages and messages[0]["role"] == "system" else 0
    # Cut the conversation at the actions: runs[k] holds the observation messages before action k.
    runs: list[list[int]] = [[]]
    actions: list[int] = []
    for i in range(start, len(messages)):
        if messages[i]["role"] == "assistant":
            actions.append(i)
            runs.append([])
        else:
            runs[-1].append(i)
    if not actions:
        if len(runs[0]) > 1:
            raise ChatFormatError(
                f"messages[{runs[0][1]}]: two observation messages in a row without an action"
            )
        return []
    if len(runs[0]) != 1:
        where = actions[0] if not runs[0] else runs[0][1]
        raise ChatFormatError(
            f"messages[{where}]: exactly one user/tool observation must precede the first action"
        )
    for k in range(1, len(actions)):
        if not runs[k]:
            raise ChatFormatError(f"messages[{actions[k]}]: two assistant messages in a row")
        if len(runs[k]) > 2:
            raise ChatFormatError(
                f"messages[{runs[k][2]}]: more than two observation messages between actions"
            )
    if len(runs[-1]) > 1:
        raise ChatFormatError(f"messages[{runs[-1][1]}]: more than one observation after the last action")

    def content(indices: list[int], pick: int) -> str:
        return messages[indices[pick]]["content"] if indices else ""

    steps = []
    for k, action in enumerate(actions):
        observation = content(runs[k], -1)  # a differing next observation comes after the result
        next_observation = content(runs[k + 1], 0)
        steps.append((observation, messages[action]["content"], next_observation))
    return steps


def _rewards(record: dict[str, Any], n: int) -> list[float]:
    if "rewards" in record:
        rewards = _list_field(record, "rewards", float, n, [])
    elif "reward" in record or "episode_return" in record:
        key = "reward" if "reward" in record else "episode_return"
        final = _field(record, key, float, 0.0)
        if n == 0 and final != 0.0:
            raise ChatFormatError(f"'{key}' is {final} but there is no assistant turn to give it to")
        rewards = [0.0] * (n - 1) + [final] if n else []
    else:
        rewards = [0.0] * n
    if "episode_return" in record:
        claimed = _field(record, "episode_return", float, 0.0)
        total = float(sum(rewards))
        same = total == claimed or (math.isnan(total) and math.isnan(claimed))
        if not (same or math.isclose(total, claimed, rel_tol=1e-9, abs_tol=1e-9)):
            raise ChatFormatError(f"'episode_return' is {claimed} but the turn rewards sum to {total}")
    return rewards


def _check_type(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _field(record: dict[str, Any], key: str, kind: type, default: Any, nullable: bool = False) -> Any:
    if key not in record:
        return default
    value = record[key]
    if value is None and nullable:
        return None
    if not _check_type(value, kind):
        expected = f"{kind.__name__} or null" if nullable else kind.__name__
        raise ChatFormatError(f"'{key}' must be {expected}, got {type(value).__name__}")
    return float(value) if kind is float else value


def _list_field(record: dict[str, Any], key: str, kind: type, n: int, default: list[Any]) -> list[Any]:
    if key not in record:
        return default
    values = record[key]
    if not isinstance(values, list) or not all(_check_type(v, kind) for v in values):
        raise ChatFormatError(f"'{key}' must be a list of {kind.__name__}")
    if len(values) != n:
        raise ChatFormatError(f"'{key}' has {len(values)} entries but the messages hold {n} turns")
    return [float(v) for v in values] if kind is float else values
