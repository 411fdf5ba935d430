"""envs.isolated_random under threads: a step run under ``step_timeout_s`` that hangs past its timeout
draws from its env's stream only, while the caller draws from its own; the same seeds replay."""

from __future__ import annotations

import random
import threading

import pytest

from envs.base import StepResult
from envs.isolated_random import IsolatedRandom
from envs.registry import unavailable
from envs.step_timeout import EnvStepTimeout, step_within

WAIT_S = 30.0  # a generous bound on events that come within milliseconds; nothing waits this long


class DrawingEnv:
    """An env that seeds and draws from the module-level ``random`` functions, as TextArena's games do;
    ``step("hang")`` blocks, between two draws, until ``release`` is set."""

    name = "drawing"

    def __init__(self) -> None:
        self._random = IsolatedRandom()
        self.draws: list[float] = []
        self.release, self.finished = threading.Event(), threading.Event()

    def reset(self, seed: int) -> str:
        with self._random.active():
            random.seed(seed)
            self.draws.append(random.random())
        return "start"

    def step(self, action: str) -> StepResult:
        with self._random.active():
            self.draws.append(random.random())
            if action == "hang":
                self.release.wait(WAIT_S)
            self.draws.append(random.randint(1, 10**9))
        self.finished.set()
        return StepResult("next", 0.0, False)


def hung_step_while_the_caller_draws(caller_seed: int, env_seed: int) -> tuple[list[float], list[float]]:
    """The caller's draws and the env's, around a step that hangs past its timeout."""
    random.seed(caller_seed)
    caller = [random.random()]
    env = DrawingEnv()
    env.reset(env_seed)
    caller.append(random.random())
    with pytest.raises(EnvStepTimeout):
        step_within(env, "hang", timeout_s=0.05)
    caller += [random.random() for _ in range(3)]  # the step is still inside its env's stream
    env.release.set()
    assert env.finished.wait(WAIT_S)  # the abandoned step has left its env's stream
    caller += [random.random() for _ in range(2)]
    step_within(env, "go", timeout_s=WAIT_S)  # a step that returns in time
    caller.append(random.random())
    return caller, env.draws


def test_a_hung_step_and_the_caller_each_draw_from_their_own_stream():
    caller, game = hung_step_while_the_caller_draws(1234, 7)
    reference = random.Random(1234)
    assert caller == [reference.random() for _ in range(8)]  # as if no env had run
    env_stream = random.Random(7)
    want = [env_stream.random(), env_stream.random(), env_stream.randint(1, 10**9),
            env_stream.random(), env_stream.randint(1, 10**9)]
    assert game == want  # reset, the hung step, the next step: one unbroken stream


def test_the_same_seeds_give_the_same_numbers_twice():
    assert hung_step_while_the_caller_draws(5, 9) == hung_step_while_the_caller_draws(5, 9)


def test_envs_stepped_in_two_threads_at_once_keep_their_streams():
    envs = [DrawingEnv(), DrawingEnv()]
    for seed, env in enumerate(envs):
        env.reset(seed)
    threads = [threading.Thread(target=env.step, args=("hang",)) for env in envs]
    for thread in threads:
        thread.start()
    for env in envs:  # both are inside their streams at once: each has drawn once, before its wait
        while len(env.draws) < 2:
            threading.Event().wait(0.001)
    for env in envs:
        env.release.set()
    for thread in threads:
        thread.join(WAIT_S)
    for seed, env in enumerate(envs):
        stream = random.Random(seed)
        assert env.draws == [stream.random(), stream.random(), stream.randint(1, 10**9)]


def test_outside_active_the_module_functions_are_the_global_stream():
    IsolatedRandom(3)
    random.seed(42)
    got = [random.random(), random.randint(1, 6), random.choice("abc")]
    state = random.getstate()
    reference = random.Random(42)
    assert got == [reference.random(), reference.randint(1, 6), reference.choice("abc")]
    assert state == reference.getstate()


@pytest.mark.skipif(unavailable("textarena") is not None, reason=str(unavailable("textarena")))
def test_a_textarena_step_that_hangs_past_its_timeout_leaves_the_callers_numbers(monkeypatch):
    from envs.registry import make

    def run() -> tuple[list[float], list[str]]:
        random.seed(99)
        env = make("textarena", game="GuessTheNumber-v0")
        release = threading.Event()
        original = env._inner.step

        def hanging_step(action):  # the game draws, then hangs inside its step
            random.random()
            release.wait(WAIT_S)
            return original(action)

        monkeypatch.setattr(env._inner, "step", hanging_step)
        texts = [env.reset(4)]
        drawn = [random.random()]
        with pytest.raises(EnvStepTimeout):
            step_within(env, "[10]", timeout_s=0.05)
        drawn += [random.random() for _ in range(3)]
        release.set()
        drawn.append(random.random())
        return drawn, texts

    first, texts = run()
    reference = random.Random(99)
    assert first == [reference.random() for _ in range(5)]
    assert run() == (first, texts)
