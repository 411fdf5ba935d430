"""``DreamEnv``: a learned world model behind the same ``Env`` core as the real environments.

A dream episode starts from a real state and then lives in the model:

- ``reset(seed)`` builds the real env (``envs.registry.make``), resets it with ``seed`` to read its
  first observation (no env step is taken) and folds that into the latent with
  ``WorldModel.initial_state``;
- ``start_from(trajectory, k)`` folds a real history prefix, the first observation and the first
  ``k`` recorded turns, with ``initial_state`` + ``observe`` (nothing is sampled), and returns the
  observation after turn ``k``. ``collect(branches=...)`` calls it instead of replaying.

Each ``step(action)`` samples the tool result with ``WorldModel.step`` and reads reward and done
off that sampled text with the env's own rule (``envs.text_rules``), so they always agree with it:
an imagined ``correct`` ends the episode with reward 1 every time, as the real env would. An env
without a rule falls back to the model's heads, which read the latent after the sampled text. See
:class:`DreamEnv` for every field of the answer and the bias controls (``reward_penalty``,
``halt_uncertainty``, ``horizon``). ``anchor_observation()`` applies the env's anchor rule to the
imagined text, so GiGPO keys imagined steps as the real env keys the same observation.

Randomness lives in a :class:`DreamStepper`, which owns the ``torch.Generator`` and steps every
env that shares it with one batched ``WorldModel.step`` call per round (``collect`` finds it as the
env's ``batch_stepper``). :class:`DreamEnvFactory` builds envs sharing one stepper for ``collect``.

``WorldModel`` stands for any model of the seam (``world_model.protocol.WorldModelLike``): the latent
model or the LM world model; nothing here reads a model's state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from envs.base import EpisodeDoneError, StepResult, ensure_not_done
from envs.registry import action_validator, make
from envs.seeding import derive_seed_63bit
from envs.sokoban import BOX_ON_TARGET_REWARD, FINISHED_REWARD, STEP_PENALTY
from envs.text_rules import anchor_rule, outcome_rule
from envs.trajectory import Trajectory
from world_model import Predictions
from world_model.protocol import WorldModelLike, WorldStateLike, concat_states

# The model reward above which a done step counts as a success, per env: midway between the real
# env's reward on its success step and its best reward on any other step.
SUCCESS_REWARD: dict[str, float] = {
    "hidden_number": 0.5,  # 1.0 on "correct", else 0
    "frozen_lake": 0.5,  # 1.0 on reaching G, else 0
    # 10.9 when the last box lands on its target; at most 0.9 on any other turn
    "sokoban": STEP_PENALTY + BOX_ON_TARGET_REWARD + FINISHED_REWARD / 2,
    "minishop": 0.9,  # success is a purchase scoring 1.0; the next best scores 0.8
}


def default_success_reward(env: Any) -> float:
    """The success threshold of ``env``'s rewards: ``SUCCESS_REWARD`` for the hand-written envs, the
    adapter's own ``success_threshold`` (it depends on the wrapped game and reward option) otherwise."""
    if env.name in SUCCESS_REWARD:
        return SUCCESS_REWARD[env.name]
    threshold = getattr(env, "success_threshold", None)
    if threshold is None:
        raise ValueError(f"no success rule known for {env.name!r}; set env.success_reward")
    return float(threshold)


OUTCOMES = ("text", "model")
"""Where a ``DreamEnv`` reads reward and done: the env's rule on the sampled text, or the model's heads."""


class DreamStepper:
    """Steps ``DreamEnv``s that share ``model`` with one batched ``WorldModel.step`` per call.

    ``generator`` (on the model's device) is seeded with ``seed`` once, here, and draws every sample
    of every env stepped through this stepper: the observation words (done is never drawn; see
    ``WorldModel.step``). So a fresh stepper with the same seed, stepping the same envs from the same states
    with the same actions in the same rounds, gives the same results. The rows of one batch share
    the generator's draws, so an env's outcome depends on which envs were stepped with it (and in
    which order); a batch of one env equals that env stepped alone from the same generator state.
    ``greedy=True`` takes each most likely word (the generator is then unused).
    """

    def __init__(self, model: WorldModelLike, *, seed: int = 0, greedy: bool = False) -> None:
        self.model = model
        self.greedy = bool(greedy)
        self.generator = torch.Generator(device=model.device)
        self.reseed(seed)
        self._folded: tuple[tuple[str, tuple[tuple[str, str], ...]], WorldStateLike] | None = None

    def fold(self, first: str, prefix: Sequence[tuple[str, str]] = ()) -> WorldStateLike:
        """The state after observation ``first`` and the real (action, next observation) turns of
        ``prefix``: ``initial_state`` then one ``observe`` per turn; nothing is drawn.

        The latest answer is kept, so the members of a group (started one after another from the
        same prefix) fold it once. The returned state is shared: it is never changed in place.
        """
        key = (first, tuple(prefix))
        if self._folded is None or self._folded[0] != key:
            state = self.model.initial_state([first])
            for action, observation in key[1]:
                state = self.model.observe(state, [action], [observation])
            self._folded = (key, state)
        return self._folded[1]

    def reseed(self, seed: int) -> None:
        """Restart the generator from ``seed``."""
        self.seed = int(seed)
        self.generator.manual_seed(self.seed)

    def step_batch(self, envs: Sequence[DreamEnv], actions: Sequence[str]) -> list[StepResult]:
        """Step each env with its action; one ``WorldModel.step`` for all of them."""
        if len(envs) != len(actions):
            raise ValueError(f"{len(actions)} actions for {len(envs)} envs")
        if not envs:
            return []
        for env in envs:
            if env.batch_stepper is not self:
                raise ValueError("step_batch got an env that belongs to another stepper")
            env._check_steppable()
        if len({id(env) for env in envs}) != len(envs):
            raise ValueError("step_batch got the same env twice")
        states = concat_states([env._state for env in envs])  # B rows
        after, predictions = self.model.step(
            states, list(actions), generator=self.generator, greedy=self.greedy
        )
        return [
            env._advance(after.select([row]), predictions, row, action)
            for row, (env, action) in enumerate(zip(envs, actions, strict=True))
        ]


class DreamEnv:
    """The world model as an ``Env`` for env ``env_name`` built with ``env_kwargs``.

    ``name`` and ``max_turns`` are the real env's, so trajectories record the real env's name and a
    branch prefix counts towards the same turn budget.

    ``step(action)`` answers with the sampled observation; the reward is ``r`` minus
    ``reward_penalty * u``, where ``u`` is the step's uncertainty (the ensemble's disagreement on
    the emitted tokens, ``Predictions.uncertainty``) and ``r`` the reward the env's own outcome rule
    gives the sampled text (``envs.text_rules``; the model's mean reward for an env without one).

    Why the rule and not the model's reward and done heads: in these envs reward and done are
    functions of the observation the env shows (a ``correct`` line, the player on the goal, no
    box off target), so once the text is sampled there is nothing left to predict, and a second
    prediction can only contradict it. Drawing done from the heads' probability independently of
    the text could let an imagined turn say ``correct`` and go on; thresholding the heads still
    errs where they are imperfect. Reading the text with the env's rule makes the imagined episode
    one the real env could have produced from that text, and puts every modelling error in one
    place, the text, where the disagreement score sees it (MBPO likewise applies each env's known
    termination function to the predicted state). The heads' values stay in ``info``;
    ``outcome="model"`` uses them instead (an ablation, and the fallback for an env without a rule).

    The episode ends:

    - ``done`` when the outcome says so (the rule's, or the heads' done probability above 0.5), or
      when the turn count (a branch prefix included) reaches the real env's ``max_turns``, as the
      real env ends;
    - as a truncation (``done=False``, ``info["truncated"] = True``, so a critic bootstraps) when
      ``u > halt_uncertainty`` (``info["halted"]``) or when ``horizon`` steps were imagined since the
      start (``info["horizon_reached"]``). Halting overrides the outcome's done flag: the sampled text
      is not trusted there, so an uncertain ``correct`` is cut rather than scored as a success (the
      episode still ends on that turn); reaching the real turn budget on that same step still ends
      ``done``.

    ``info``: ``valid`` (the real env's parser, ``envs.registry.action_validator``; for minishop it
    only checks the syntax, not that the page offers the action), ``success`` (ended ``done`` with
    the outcome's reward above ``success_reward``, default ``SUCCESS_REWARD[env_name]``, the real
    env's rule in reward terms), ``turn``, ``imagined_steps``, ``uncertainty``, ``outcome_from``
    (``"text"`` or ``"model"``), ``text_reward`` / ``text_done`` (the outcome read, before the
    penalty), ``model_reward``, ``model_done`` (the heads' own values, kept for diagnostics),
    ``done_probability``, ``reward_std``, ``ended`` (the
    text closed within the word cap), ``truncated``, ``halted``, ``horizon_reached``; the latest
    step's info stays readable as ``last_info`` (``{}`` before the first step). The model is
    trusted on everything else: a malformed action is answered by whatever the model predicts.

    Randomness: a ``DreamEnv`` built without ``stepper`` gets a private :class:`DreamStepper`
    seeded from ``seed`` and reseeded at every ``reset`` / ``start_from`` with
    ``derive_seed_63bit(seed, start)``, so it is a fixed function of (seed, start, actions), like a real
    env of its seed. Given a shared ``stepper`` (leave ``seed`` and ``greedy`` unset), the stepper's
    generator is never reseeded by an env; see :class:`DreamStepper`.
    """

    def __init__(
        self,
        model: WorldModelLike,
        env_name: str,
        env_kwargs: dict[str, Any] | None = None,
        *,
        seed: int | None = None,
        greedy: bool | None = None,
        stepper: DreamStepper | None = None,
        reward_penalty: float = 0.0,
        halt_uncertainty: float | None = None,
        horizon: int | None = None,
        success_reward: float | None = None,
        outcome: str = "text",
    ) -> None:
        self.env_kwargs = dict(env_kwargs or {})
        self._real = make(env_name, **self.env_kwargs)  # checks name and options; gives the budget
        self.name = self._real.name
        self.max_turns = int(self._real.max_turns)
        self.model = model
        if stepper is None:
            self.batch_stepper = DreamStepper(model, seed=0 if seed is None else seed, greedy=bool(greedy))
            self._private = True
        else:
            if seed is not None or greedy is not None:
                raise ValueError("seed and greedy belong to the shared stepper; leave them unset")
            if stepper.model is not model:
                raise ValueError("the stepper steps another world model")
            self.batch_stepper = stepper
            self._private = False
        self.seed = self.batch_stepper.seed
        if (
            isinstance(reward_penalty, bool)
            or not isinstance(reward_penalty, (int, float))
            or reward_penalty < 0
        ):
            raise ValueError(f"reward_penalty must be a number >= 0, got {reward_penalty!r}")
        if halt_uncertainty is not None and (
            isinstance(halt_uncertainty, bool) or not isinstance(halt_uncertainty, (int, float))
        ):
            raise ValueError(f"halt_uncertainty must be a number or None, got {halt_uncertainty!r}")
        if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1):
            raise ValueError(f"horizon must be an integer >= 1 or None, got {horizon!r}")
        self.reward_penalty = float(reward_penalty)
        self.halt_uncertainty = None if halt_uncertainty is None else float(halt_uncertainty)
        self.horizon = horizon
        if success_reward is None:
            success_reward = default_success_reward(self._real)
        self.success_reward = float(success_reward)
        self._is_valid = action_validator(self.name, self.env_kwargs)
        self._anchor_rule = anchor_rule(self.name, self.env_kwargs)
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        self.outcome = outcome
        self._outcome_rule = outcome_rule(self.name, self.env_kwargs) if outcome == "text" else None
        self._anchor = ""  # the anchor of the current state (env's rule on the texts so far)
        self._state: WorldStateLike | None = None
        self._turn = 0  # turns of the episode, a branch prefix included
        self._imagined = 0  # turns imagined since the start
        self._done = True  # nothing to step until reset or start_from
        self.last_info: dict[str, Any] = {}  # the info of the latest step; {} until one is taken

    # --- starting ---------------------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        """Start from the real first observation of ``seed`` (no env step is taken)."""
        observation = self._real.reset(seed)
        if self._private:
            self.batch_stepper.reseed(derive_seed_63bit(self.seed, "reset", int(seed)))
        self._begin(self.batch_stepper.fold(observation), turn=0, anchor=self._first_anchor(observation))
        return observation

    def start_from(self, trajectory: Trajectory, k: int) -> str:
        """Start after the first ``k`` turns of a real ``trajectory``; return the observation then.

        The latent is ``initial_state`` of the first observation followed by ``observe`` of each
        of the ``k`` recorded (action, next observation) pairs; a trajectory without turns starts
        from the real first observation of its seed.
        """
        if (trajectory.env_name, trajectory.env_kwargs) != (self.name, self.env_kwargs):
            raise ValueError(
                f"trajectory {trajectory.trajectory_id} was recorded on {trajectory.env_name!r} with "
                f"{trajectory.env_kwargs}, this DreamEnv is {self.name!r} with {self.env_kwargs}"
            )
        if not 0 <= k <= trajectory.num_turns:
            raise ValueError(f"cannot start at turn {k} of a trajectory with {trajectory.num_turns} turns")
        prefix = trajectory.turns[:k]
        if any(turn.done for turn in prefix):
            raise ValueError(f"cannot start at turn {k}: the episode ended before it")
        if k >= self.max_turns:
            raise ValueError(f"cannot start at turn {k}: the turn budget is {self.max_turns}")
        first = trajectory.turns[0].observation if trajectory.turns else self._real.reset(trajectory.seed)
        turns = [(turn.action, turn.next_observation) for turn in prefix]
        state = self.batch_stepper.fold(first, turns)
        if self._private:
            self.batch_stepper.reseed(derive_seed_63bit(self.seed, "branch", trajectory.seed, first, turns))
        anchor = self._first_anchor(first)
        for _, observation in turns:
            anchor = self._next_anchor(anchor, observation)
        self._begin(state, turn=k, anchor=anchor)
        return prefix[-1].next_observation if prefix else first

    def _begin(self, state: WorldStateLike, turn: int, anchor: str) -> None:
        self._state, self._turn, self._imagined, self._done = state, turn, 0, False
        self._anchor = anchor
        self.last_info = {}

    # --- anchors --------------------------------------------------------------------------------------
    def anchor_observation(self) -> str:
        """The key GiGPO groups the current state on: the env's own anchor rule applied to the
        episode's texts (real ones up to the start, imagined ones after), the observation itself for
        an env without a rule."""
        if self._state is None:
            raise RuntimeError(f"{self.name} (dream): no episode; call reset(seed) or start_from() first")
        return self._anchor

    def _first_anchor(self, observation: str) -> str:
        return observation if self._anchor_rule is None else self._anchor_rule(observation, observation)

    def _next_anchor(self, anchor: str, observation: str) -> str:
        return observation if self._anchor_rule is None else self._anchor_rule(anchor, observation)

    # --- stepping ---------------------------------------------------------------------------------
    def step(self, action: str) -> StepResult:
        """Imagine one turn (through the stepper, as a batch of one)."""
        return self.batch_stepper.step_batch([self], [action])[0]

    def _check_steppable(self) -> None:
        if self._state is None:
            raise EpisodeDoneError(f"{self.name} (dream): step() before reset(seed) or start_from()")
        ensure_not_done(self._done, f"{self.name} (dream)")

    def _advance(self, state: WorldStateLike, predictions: Predictions, row: int, action: str) -> StepResult:
        """Take row ``row`` of one ``WorldModel.step`` as this env's turn."""
        self._state = state
        self._turn += 1
        self._imagined += 1
        uncertainty = float(predictions.uncertainty[row])
        model_reward = float(predictions.reward[row])
        model_done = bool(predictions.done[row])
        observation = predictions.observations[row]
        before, self._anchor = self._anchor, self._next_anchor(self._anchor, observation)
        if self._outcome_rule is None:
            text_reward, text_done = model_reward, model_done
        else:
            outcome = self._outcome_rule(before, observation)
            text_reward, text_done = float(outcome.reward), bool(outcome.done)
        out_of_turns = self._turn >= self.max_turns
        halted = self.halt_uncertainty is not None and uncertainty > self.halt_uncertainty
        done = out_of_turns or (text_done and not halted)
        horizon_reached = self.horizon is not None and self._imagined >= self.horizon
        truncated = not done and (halted or horizon_reached)
        self._done = done or truncated
        info = {
            "valid": bool(self._is_valid(action)),
            "success": done and text_reward > self.success_reward,
            "turn": self._turn,
            "imagined_steps": self._imagined,
            "uncertainty": uncertainty,
            "outcome_from": "model" if self._outcome_rule is None else "text",
            "text_reward": text_reward,
            "text_done": text_done,
            "model_reward": model_reward,
            "model_done": model_done,
            "done_probability": float(predictions.done_probability[row]),
            "reward_std": float(predictions.reward_std[row]),
            "ended": bool(predictions.ended[row]),
            "truncated": truncated,
            "halted": truncated and halted,
            "horizon_reached": truncated and horizon_reached and not halted,
        }
        reward = text_reward - self.reward_penalty * uncertainty
        self.last_info = info
        return StepResult(observation, reward, done, info)

    @property
    def world_state(self) -> WorldStateLike:
        """The current latent state (one row): what the model carries forward, e.g. for a latent critic."""
        if self._state is None:
            raise RuntimeError(f"{self.name} (dream): no episode; call reset(seed) or start_from() first")
        return self._state

    @property
    def done(self) -> bool:
        """Whether the episode has ended (done or truncated)."""
        return self._done


class DreamEnvFactory:
    """A zero-argument callable building ``DreamEnv``s that share one :class:`DreamStepper`.

    For ``collect(agent, factory, env_kwargs=env_kwargs, source="imagined", ...)``: every env of the
    call is stepped in one batched ``WorldModel.step`` per round, all drawing from the stepper's
    generator seeded with ``seed``; ``options`` go to each ``DreamEnv`` (``reward_penalty``,
    ``halt_uncertainty``, ``horizon``, ``success_reward``, ``outcome``). Use a fresh factory (or
    ``stepper.reseed``) per collect call for reproducible calls.
    """

    def __init__(
        self,
        model: WorldModelLike,
        env_name: str,
        env_kwargs: dict[str, Any] | None = None,
        *,
        seed: int = 0,
        greedy: bool = False,
        **options: Any,
    ) -> None:
        self.model = model
        self.env_name = env_name
        self.env_kwargs = dict(env_kwargs or {})
        self.stepper = DreamStepper(model, seed=seed, greedy=greedy)
        self.options = options
        self()  # fail here, not inside collect, on bad names or options

    def __call__(self) -> DreamEnv:
        return DreamEnv(self.model, self.env_name, self.env_kwargs, stepper=self.stepper, **self.options)
