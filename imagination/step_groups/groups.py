"""Counterfactual step groups: the real action and G policy siblings, imagined from one real state.

For each real state ``(trajectory, t)`` (the history before turn t), ``G + 1`` ``DreamEnv``s start
from that history (``start_from``, the latent of the prefix; nothing is replayed). Member 0 plays the
real action ``trajectory.turns[t].action`` first, members 1..G a fresh draw from the policy on the
same history; every member then follows the policy until ``horizon`` imagined turns, the model's
done, halting (``halt_uncertainty``) or the turn cap. All members of all states run in one
``envs.collect`` call, so each round is one batched policy call and one batched world-model step.
Each member is valued with ``imagined_values``: its imagined (shaped) rewards plus the latent
critic's value where it was cut off.

``play_step_groups`` is that construction for any env a factory builds; ``imagine_counterfactual_groups``
gives it ``DreamEnv``s, the real-branch oracle (``imagination.step_groups.real_branch``) clones of the real env.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from critic.base import CriticStates, TurnCritic
from critic.fit import predict
from envs.agent import Agent, AgentView
from envs.base import Env
from envs.collect import collect
from envs.trajectory import SampledAction, Source, Trajectory
from imagination.dream_env import DreamEnv, DreamEnvFactory
from imagination.step_groups.advantages import imagined_values
from world_model.protocol import WorldModelLike, concat_states


@dataclass
class CounterfactualGroups:
    states: list[tuple[Trajectory, int]]
    """The real states, one group each."""
    members: list[list[Trajectory]]
    """``members[r][i]``: the imagined episode of member i from state r (0: the real action)."""
    values: torch.Tensor
    """``(R, G + 1)`` each member's value (``imagined_values``)."""
    halted: int
    """Members stopped by ``halt_uncertainty``."""


class RealActionFirst:
    """An agent that answers a chosen env's first turn with a given text, and defers to ``policy``.

    ``forced`` maps ``id(env)`` to ``(turn, text)``: when that env's episode has ``turn`` turns, the
    answer is ``text`` (a plain string: the real action is not trained through this turn); every other
    view goes to ``policy.act`` in one call.
    """

    def __init__(self, policy: Agent, forced: dict[int, tuple[int, str]]) -> None:
        self.policy = policy
        self.forced = forced

    def act(self, views: Sequence[AgentView]) -> list[str | SampledAction]:
        answers: list[str | SampledAction | None] = [None] * len(views)
        rest = []
        for i, view in enumerate(views):
            turn, text = self.forced.get(id(view.env), (-1, ""))
            if len(view.turns) == turn:
                answers[i] = text
            else:
                rest.append(i)
        for i, action in zip(rest, self.policy.act([views[i] for i in rest]) if rest else [], strict=True):
            answers[i] = action
        return answers  # type: ignore[return-value]  # every position is filled


def imagine_counterfactual_groups(
    policy: Agent,
    world_model: WorldModelLike,
    critic: TurnCritic | Callable[[CriticStates], torch.Tensor],
    env_name: str,
    env_kwargs: dict[str, Any],
    states: Sequence[tuple[Trajectory, int]],
    *,
    siblings: int,
    horizon: int,
    gamma: float,
    seed: int,
    invalid_action_penalty: float = 0.0,
    reward_penalty: float = 0.0,
    halt_uncertainty: float | None = None,
    max_turns: int | None = None,
) -> CounterfactualGroups:
    """Imagine and value one group of ``siblings + 1`` members at each real state ``(trajectory, t)``.

    ``t`` must be a turn the trajectory played (``0 <= t < num_turns``): its action is member 0's.
    ``seed`` seeds the world model's draws for the call (the policy samples from its own stream);
    ``reward_penalty`` and ``halt_uncertainty`` are ``DreamEnv``'s; ``max_turns`` caps episodes as in
    ``collect``. A turn's reward is the model's (penalised) reward minus ``invalid_action_penalty``
    where the action did not parse, as real rows are shaped. ``critic`` maps ``CriticStates`` (whose
    histories it reads) to values.
    """
    factory = DreamEnvFactory(
        world_model,
        env_name,
        env_kwargs,
        seed=seed,
        horizon=horizon,
        reward_penalty=reward_penalty,
        halt_uncertainty=halt_uncertainty,
    )
    built: list[DreamEnv] = []

    def make_env() -> DreamEnv:
        built.append(factory())
        return built[-1]

    groups = play_step_groups(
        policy,
        make_env,
        critic,
        env_kwargs,
        states,
        siblings=siblings,
        horizon=horizon,
        gamma=gamma,
        invalid_action_penalty=invalid_action_penalty,
        max_turns=max_turns,
        source="imagined",
    )
    groups.halted = sum(bool(env.last_info.get("halted", False)) for env in built)
    return groups


def play_step_groups(
    policy: Agent,
    make_env: Callable[[], Env],
    critic: TurnCritic | Callable[[CriticStates], torch.Tensor],
    env_kwargs: dict[str, Any],
    states: Sequence[tuple[Trajectory, int]],
    *,
    siblings: int,
    horizon: int,
    gamma: float,
    invalid_action_penalty: float = 0.0,
    max_turns: int | None = None,
    source: Source = "imagined",
) -> CounterfactualGroups:
    """Play and value the step groups in envs from ``make_env``: the world model or the real env.

    ``make_env`` builds one fresh env per member, which ``collect`` puts at the member's state by its
    ``start_from(trajectory, t)`` (or by replaying the prefix, for an env without it); the env cuts a
    member off after ``horizon`` turns with ``info["truncated"]``. Member 0 of each group plays the
    real action first, members 1..G the policy's draws; values as ``imagined_values``.
    """
    states = list(states)
    for trajectory, t in states:
        if not 0 <= t < trajectory.num_turns:
            raise ValueError(f"state (trajectory {trajectory.trajectory_id}, turn {t}): not a turn it played")
    group = siblings + 1
    if not states:
        return CounterfactualGroups([], [], torch.zeros(0, group), 0)
    forced: dict[int, tuple[int, str]] = {}
    made = 0

    def member_env() -> Env:
        nonlocal made
        env = make_env()
        r, member = divmod(made, group)  # collect builds group by group, member by member
        if member == 0:
            trajectory, t = states[r]
            forced[id(env)] = (t, trajectory.turns[t].action)
        made += 1
        return env

    members = collect(
        RealActionFirst(policy, forced),
        member_env,
        env_kwargs=env_kwargs,
        group_size=group,
        branches=states,
        max_turns=max_turns,
        source=source,
        progress=False,
    )
    played = [m.turns[m.branch_turn :] for m in members]
    lengths = torch.tensor([len(turns) for turns in played])  # (M,)
    rewards = torch.zeros(len(members), horizon)  # (M, H)
    for i, turns in enumerate(played):
        for j, turn in enumerate(turns):
            rewards[i, j] = turn.reward - (0.0 if turn.valid else invalid_action_penalty)
    cut_off = torch.tensor([m.truncated for m in members])  # (M,)
    ends = [(m, m.num_turns) for m in members if m.truncated]
    bootstrap = torch.zeros(len(members))  # (M,)
    if ends:
        ids = torch.zeros((len(ends), 1), dtype=torch.long)  # the latent critic reads histories only
        end_values = predict(critic, CriticStates(ids, torch.ones_like(ids), ends))  # (E,)
        bootstrap[cut_off] = end_values
    values = imagined_values(rewards, lengths, bootstrap, cut_off, gamma=gamma)  # (M,)
    return CounterfactualGroups(
        states=states,
        members=[members[r * group : (r + 1) * group] for r in range(len(states))],
        values=values.reshape(len(states), group),
        halted=0,
    )


@torch.no_grad()
def real_transition_uncertainty(
    world_model: WorldModelLike, states: Sequence[tuple[Trajectory, int]]
) -> torch.Tensor:
    """``(R,)`` how unsure the world model is at each real state: its ensemble's disagreement
    (``WorldModel.disagreement``, the members' mutual information pooled over the tokens by the
    model's ``disagreement`` option, by default their sum) about the outcome that really
    followed the real action there, teacher-forced on the latent of the real history before it.

    Histories are folded in rounds, one batched ``observe`` per turn depth over all trajectories.
    """
    states = list(states)
    if not states:
        return torch.zeros(0)
    unique: dict[int, Trajectory] = {}
    for trajectory, t in states:
        if not 0 <= t < trajectory.num_turns:
            raise ValueError(f"state (trajectory {trajectory.trajectory_id}, turn {t}): not a turn it played")
        unique.setdefault(id(trajectory), trajectory)
    order = list(unique.values())
    position = {id(trajectory): u for u, trajectory in enumerate(order)}
    depths = [world_model.initial_state([tr.turns[0].observation for tr in order])]  # U rows per depth
    for depth in range(max(t for _, t in states)):
        previous = depths[-1]
        alive = [u for u, tr in enumerate(order) if depth < tr.num_turns]
        folded = world_model.observe(
            previous.select(alive),
            [order[u].turns[depth].action for u in alive],
            [order[u].turns[depth].next_observation for u in alive],
        )
        # A trajectory that ended keeps its last state (never read): row u from folded when alive.
        slot = {u: n for n, u in enumerate(alive)}
        depths.append(concat_states(
            [folded.select([slot[u]]) if u in slot else previous.select([u]) for u in range(len(order))]
        ))
    chosen = concat_states([depths[t].select([position[id(tr)]]) for tr, t in states])  # R rows
    return world_model.disagreement(
        chosen,
        [tr.turns[t].action for tr, t in states],
        [tr.turns[t].next_observation for tr, t in states],
    ).cpu()  # (R,)
