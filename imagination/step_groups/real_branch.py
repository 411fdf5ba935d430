"""The real-branch oracle (``algo=real_branch_gigpo``): counterfactual step groups played in the real env.

``algo=counterfactual_gigpo`` imagines each real step's group (the real action and G policy siblings,
each played h turns, valued by a latent critic) in a learned world model. This oracle builds the
same groups, with the same code (``play_step_groups``), in the real env: the env is cloned at the
real state and every member plays from a clone, as tree-search methods branch a simulator. Its step
advantages carry no model error, so it bounds what a perfect world model could give, and it shows
the price: every member's turns are real env steps, which the training loop adds to its x-axis.

Cloning. A ``Trajectory`` records its env seed and actions, not the env's state, so the state is
recovered by replay: a fresh env is reset with the trajectory's seed and its recorded actions are
stepped again, once per trajectory up to the deepest state asked for, taking a snapshot at each
state. Every answer must equal the recording (observation, reward, done), and at each state the
observation and anchor must too; anything else raises ``BranchReplayError``, never a silent branch.
The snapshot holds the env's ``random.Random`` (a lying oracle's lies, a slippery lake's slips):
every env in ``envs.registry`` draws only from an RNG seeded by ``reset``, in the order its steps
ask, so replaying the actions replays the RNG too, and all members start from the real RNG state
(the real action, replayed in a clone, meets exactly the outcome it met). An env without
``snapshot``/``restore`` is refused.

Counting. ``metrics()`` reports the last call's ``oracle/branch_env_steps`` (the members' turns),
``oracle/replay_env_steps`` (the replays) and ``oracle/env_steps``, their sum, which the loop adds to
``charts/real_env_steps``. An env that could snapshot during collection would save the replays; they
are logged apart so a reader can take them out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from critic.latent_critic import LatentCritic
from envs.base import Env, EnvSnapshot, SnapshotEnv, StepResult
from envs.collect import BranchReplayError, count_env_steps
from envs.registry import make
from envs.trajectory import Trajectory
from imagination.step_groups.groups import CounterfactualGroups, play_step_groups
from policy.advantages.config import AlgoConfig
from policy.lm_policy import LMPolicy
from world_model.turn_tokens import TurnTokenizer, token_limits

StateKey = tuple[int, int]  # (id of the trajectory object, turn t)


def replay_snapshots(
    env_name: str, env_kwargs: dict[str, Any], states: Sequence[tuple[Trajectory, int]]
) -> tuple[dict[StateKey, tuple[EnvSnapshot, str]], int]:
    """``({(id(trajectory), t): (snapshot, observation)}, replay steps)``: the real env at each state.

    Each trajectory is replayed once, from ``reset(trajectory.seed)`` to its deepest ``t``; the
    replay steps are the sum of those depths. Raises ``BranchReplayError`` where the replay departs
    from the recording, ValueError for an env that cannot be snapshotted or a state it did not play.
    """
    deepest: dict[int, tuple[Trajectory, int]] = {}
    for trajectory, t in states:
        if not 0 <= t < trajectory.num_turns:
            raise ValueError(f"state (trajectory {trajectory.trajectory_id}, turn {t}): not a turn it played")
        if trajectory.env_name != env_name or trajectory.env_kwargs != dict(env_kwargs):
            raise ValueError(
                f"trajectory {trajectory.trajectory_id} was recorded on {trajectory.env_name!r} with "
                f"{trajectory.env_kwargs}, the oracle branches {env_name!r} with {dict(env_kwargs)}"
            )
        _, depth = deepest.get(id(trajectory), (trajectory, -1))
        deepest[id(trajectory)] = (trajectory, max(depth, t))
    wanted = {(id(trajectory), t) for trajectory, t in states}
    snapshots: dict[StateKey, tuple[EnvSnapshot, str]] = {}
    steps = 0
    for trajectory, depth in deepest.values():
        env = make(env_name, **env_kwargs)
        if not isinstance(env, SnapshotEnv):
            raise ValueError(
                f"algo=real_branch_gigpo needs an env with snapshot()/restore(); {env_name!r} has none"
            )
        where = f"real branch of trajectory {trajectory.trajectory_id} (seed {trajectory.seed})"
        observation = env.reset(trajectory.seed)
        for t in range(depth + 1):
            turn = trajectory.turns[t]
            if (observation, env.anchor_observation()) != (turn.observation, turn.anchor_observation):
                raise BranchReplayError(
                    f"{where}: at turn {t} the replayed env shows {observation!r} (anchor "
                    f"{env.anchor_observation()!r}), the recording {turn.observation!r} (anchor "
                    f"{turn.anchor_observation!r}): the env is not determined by its seed and actions"
                )
            if (id(trajectory), t) in wanted:
                snapshots[(id(trajectory), t)] = (env.snapshot(), observation)
            if t == depth:
                break
            result = env.step(turn.action)
            steps += 1
            got = (result.observation, float(result.reward), bool(result.done))
            if got != (turn.next_observation, turn.reward, turn.done):
                raise BranchReplayError(
                    f"{where}: replaying turn {t} ({turn.action!r}) gave (observation, reward, done) = {got!r}, "
                    f"the recording has {(turn.next_observation, turn.reward, turn.done)!r}"
                )
            observation = result.observation
    return snapshots, steps


class RealBranchEnv:
    """A real env restored to a recorded state by ``start_from``, cut off after ``horizon`` turns there.

    The cut-off is a truncation (``info["truncated"]``), so the member is valued by the critic where
    it stops; the env's own end (done) is kept, and valued by the real return alone.
    """

    def __init__(self, env: Env, snapshots: dict[StateKey, tuple[EnvSnapshot, str]], horizon: int) -> None:
        self.env, self.snapshots, self.horizon = env, snapshots, horizon
        self.name, self.max_turns = env.name, env.max_turns
        self.played = 0

    def start_from(self, trajectory: Trajectory, k: int) -> str:
        if (id(trajectory), k) not in self.snapshots:
            raise ValueError(f"no replayed snapshot of trajectory {trajectory.trajectory_id} at turn {k}")
        snapshot, observation = self.snapshots[(id(trajectory), k)]
        self.env.restore(snapshot)  # a deep copy: every member gets its own clone, RNG state included
        self.played = 0
        return observation

    def reset(self, seed: int) -> str:
        self.played = 0
        return self.env.reset(seed)

    def step(self, action: str) -> StepResult:
        result = self.env.step(action)
        self.played += 1
        if result.done or self.played < self.horizon:
            return result
        return StepResult(result.observation, result.reward, False, {**result.info, "truncated": True})

    def anchor_observation(self) -> str:
        return self.env.anchor_observation()


class RealEnvBrancher:
    """The brancher of ``algo=real_branch_gigpo`` (``imagination.step_groups.counterfactual_gigpo.Brancher``).

    ``observation_words`` / ``action_words``: the latent critic's word caps (None: the env's), as
    ``critic.latent.max_*_words``. The real env has no randomness of its own to seed: a call's
    ``seed`` is unused (the siblings come from the policy's stream, the outcomes from the recorded RNG).
    """

    real_env = True

    def __init__(
        self,
        env_name: str,
        env_kwargs: dict[str, Any],
        algo: AlgoConfig,
        *,
        max_turns: int | None = None,
        observation_words: int | None = None,
        action_words: int | None = None,
    ) -> None:
        self.env_name, self.env_kwargs, self.algo, self.max_turns = (
            env_name,
            dict(env_kwargs),
            algo,
            max_turns,
        )
        limits = token_limits(
            env_name,
            self.env_kwargs,
            observation=observation_words,
            action=action_words,
            option_names=("critic.latent.max_observation_words", "critic.latent.max_action_words"),
        )
        self.tokenizer = TurnTokenizer.build(make(env_name, **self.env_kwargs).vocabulary(), limits)
        self.last: dict[str, float] = {}

    def __call__(
        self, policy: LMPolicy, critic: LatentCritic, states: list[tuple[Trajectory, int]], *, seed: int
    ) -> CounterfactualGroups:
        options = self.algo.counterfactual
        snapshots, replay_steps = replay_snapshots(self.env_name, self.env_kwargs, states)
        groups = play_step_groups(
            policy,
            lambda: RealBranchEnv(make(self.env_name, **self.env_kwargs), snapshots, options.horizon),
            critic,
            self.env_kwargs,
            states,
            siblings=options.siblings,
            horizon=options.horizon,
            gamma=self.algo.gamma,
            invalid_action_penalty=self.algo.invalid_action_penalty,
            max_turns=self.max_turns,
            source="real",
        )
        branch_steps = count_env_steps([m for members in groups.members for m in members], source=None)
        self.last = {
            "oracle/branch_env_steps": float(branch_steps),
            "oracle/replay_env_steps": float(replay_steps),
            "oracle/env_steps": float(branch_steps + replay_steps),
        }
        return groups

    def metrics(self) -> dict[str, float]:
        return dict(self.last)
