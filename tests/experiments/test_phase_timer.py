"""The phase timer charges each phase its self time, on hand-set clocks, and its wrappers only time."""

from __future__ import annotations

from experiments.phase_timer import PhaseTimer, TimedAgent, TimedWorldModel


class Clock:
    """A clock that reads the times it is given, in order."""

    def __init__(self, readings: list[float]) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        return self.readings.pop(0)


def test_nested_phases_are_charged_their_own_time_only():
    # Reads: construct 0; enter outer 1; enter inner 3; leave inner 7; leave outer 8; metrics 20.
    # outer holds 1..3 and 7..8 = 3 s, inner 3..7 = 4 s; nothing is open after 8, so 8..20 goes nowhere.
    cpu = Clock([0, 1, 3, 7, 8, 20])
    wall = Clock([0, 10, 30, 70, 80, 200])  # ten times the CPU readings
    timer = PhaseTimer(cpu_clock=cpu, wall_clock=wall)
    with timer.phase("outer"), timer.phase("inner"):
        pass
    assert timer.metrics() == {"time/phase/outer_cpu_s": 3.0, "time/phase/inner_cpu_s": 4.0,
                               "time/phase/outer_wall_s": 30.0, "time/phase/inner_wall_s": 40.0}


def test_a_phase_entered_twice_adds_up_and_reset_forgets():
    # construct 0; a in 1 out 2; a in 5 out 9 -> a = 1 + 4 = 5; reset at 9.5; b in 10 out 10.25; metrics 11.
    readings = [0, 1, 2, 5, 9, 9.5, 10, 10.25, 11]
    timer = PhaseTimer(cpu_clock=Clock(readings), wall_clock=Clock(readings))
    for _ in range(2):
        with timer.phase("a"):
            pass
    assert timer.cpu_s == {"a": 5.0}
    timer.reset()
    with timer.phase("b"):
        pass
    assert timer.metrics() == {"time/phase/b_cpu_s": 0.25, "time/phase/b_wall_s": 0.25}


def test_metrics_charge_the_open_phase_up_to_now():
    # construct 0; enter 2; metrics at 5 -> 3 s while still open.
    timer = PhaseTimer(cpu_clock=Clock([0, 2, 5, 6]), wall_clock=Clock([0, 2, 5, 6]))
    with timer.phase("open"):
        assert timer.metrics()["time/phase/open_cpu_s"] == 3.0


class Model:
    device = "cpu"

    def step(self, states, actions, *, generator, greedy=False):
        return ("stepped", states, actions, generator, greedy)


class Agent:
    def act(self, views):
        return [v.upper() for v in views]


def test_wrappers_pass_calls_through_and_charge_their_phase():
    readings = iter(range(100))
    timer = PhaseTimer(cpu_clock=lambda: next(readings), wall_clock=lambda: 0.0)
    model = TimedWorldModel(Model(), timer, "model")
    assert model.step("s", ["a"], generator="g", greedy=True) == ("stepped", "s", ["a"], "g", True)
    assert model.device == "cpu"  # everything else is the model's own
    assert TimedAgent(Agent(), timer, "agent").act(["x", "y"]) == ["X", "Y"]
    # construct 0; model in 1 out 2; agent in 3 out 4: one second each.
    assert timer.cpu_s == {"model": 1, "agent": 1}
