"""The refit rules (``imagination.refit_below``, ``fit_replay``, ``fit_holdout``): each decision on
hand-worked cases, the keys' checks, and what ``refit_and_gate`` does and records with each on."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from envs.trajectory import Trajectory
from imagination import refit
from imagination.config import ImaginationConfig
from imagination.gate import ImaginationGate
from imagination.refit_rules import holdout_rows, is_new, replay_rows, should_refit


@pytest.mark.parametrize(("measure", "threshold", "expected"), [
    (0.4, 0.5, True), (0.5, 0.5, False), (0.9, 0.5, False), (0.0, 0.0, False), (math.nan, 0.5, False),
])
def test_should_refit_only_below_the_threshold(measure, threshold, expected):
    assert should_refit(measure, threshold) is expected


def test_replay_keeps_every_new_row_and_a_share_of_the_old_in_order():
    new = [False, False, False, False, True, True]  # old rows 0-3, new rows 4, 5
    assert replay_rows(new, 0.0, random.Random(0)) == [4, 5]
    assert replay_rows(new, 1.0, random.Random(0)) == [0, 1, 2, 3, 4, 5]  # the rows as they were
    got = replay_rows(new, 0.5, random.Random(7))
    assert got == sorted(got) and got[-2:] == [4, 5] and len(got) == 4  # 0.5 * 4 old = 2 of them
    assert set(got[:2]) == set(random.Random(7).sample([0, 1, 2, 3], 2))  # drawn, not the first two


def test_replay_of_rows_new_in_between():
    # new rows need not be at the end: 0.34 * 3 old = 1.02 -> 1 old row
    got = replay_rows([True, False, True, False, False], 0.34, random.Random(1))
    assert len(got) == 3 and {0, 2} <= set(got) and got == sorted(got)


@pytest.mark.parametrize(("n_new", "share", "count"), [
    (0, 0.5, 0), (1, 0.5, 0), (2, 0.9, 1), (10, 0.2, 2), (10, 0.01, 1), (10, 0.9, 9), (4, 0.5, 2),
])
def test_holdout_holds_a_share_of_the_new_rows_never_all(n_new, share, count):
    got = holdout_rows(n_new, share, random.Random(3))
    assert len(got) == count and len(set(got)) == count and all(0 <= i < n_new for i in got)


def trajectory(i: int, iteration: int | None) -> Trajectory:
    return Trajectory(env_name="hidden_number", env_kwargs={}, seed=i, group_id=i, trajectory_id=i,
                      iteration=iteration)


def test_new_means_collected_after_the_last_fit():
    assert [is_new(trajectory(0, it), 3) for it in (None, 1, 3, 4)] == [False, False, False, True]


WINDOW = [trajectory(i, it) for i, it in enumerate([None, 1, 2, 3, 4, 4, 4, 4])]  # last fit at 3: rows 4-7 new


def choose(config: ImaginationConfig) -> tuple[list[int], list[int], dict[str, float]]:
    decided: dict[str, float] = {}
    options = refit.refit_rule_options(config, 5, 3, decided)
    train, held = options["choose"](list(WINDOW))
    return [t.trajectory_id for t in train], [t.trajectory_id for t in held], decided


def test_no_rule_no_options():
    assert refit.refit_rule_options(ImaginationConfig(), 5, 3, {}) == {}


def test_replay_choice_and_its_counts():
    train, held, decided = choose(ImaginationConfig(fit_replay=0.0))
    assert (train, held) == ([4, 5, 6, 7], [])
    assert decided == {"wm/fit_new": 4.0, "wm/fit_replayed": 0.0, "wm/fit_held_out": 0.0}
    train, held, decided = choose(ImaginationConfig(fit_replay=1.0))
    assert (train, held) == (list(range(8)), [])
    assert decided["wm/fit_replayed"] == 4.0
    train, _, decided = choose(ImaginationConfig(fit_replay=0.5))
    assert len(train) == 6 and train[-4:] == [4, 5, 6, 7] and decided["wm/fit_replayed"] == 2.0


def test_holdout_choice_holds_new_rows_only():
    train, held, decided = choose(ImaginationConfig(fit_holdout=0.5, fit_loop="plain"))
    assert len(held) == 2 and set(held) <= {4, 5, 6, 7}  # 0.5 of the 4 new rows
    assert sorted(train + held) == list(range(8))  # no replay rule: every other row is trained on
    assert decided == {"wm/fit_new": 2.0, "wm/fit_replayed": 4.0, "wm/fit_held_out": 2.0}


def test_nothing_new_and_no_replay_keeps_every_row():
    decided: dict[str, float] = {}
    options = refit.refit_rule_options(ImaginationConfig(fit_replay=0.0), 5, 9, decided)
    train, held = options["choose"](list(WINDOW))
    assert (len(train), held, decided["wm/fit_new"]) == (8, [], 0.0)


@pytest.mark.parametrize(("key", "value"), [
    ("refit_below", 1.5), ("refit_below", -0.1), ("fit_replay", 2.0), ("fit_holdout", 0), ("fit_holdout", 0.95),
    ("fit_eval_every", 0), ("fit_patience", 0), ("fit_min_delta", -1.0),
])
def test_a_bad_refit_rule_key_names_itself(key, value):
    options = {key: value, "fit_loop": "plain"}
    with pytest.raises(ValueError, match=f"imagination.{key}") as error:
        ImaginationConfig(**options)
    assert "\n" not in str(error.value)


def test_early_stop_needs_the_plain_loop():
    with pytest.raises(ValueError, match="imagination.fit_holdout needs imagination.fit_loop=plain"):
        ImaginationConfig(fit_holdout=0.2)


def run_refit_and_gate(monkeypatch, config, *, exact_match, first_fit=False, iteration=2):
    calls: list[dict] = []

    def fake_refit(model, store, **options):
        calls.append(options)
        return {"wm/loss": 0.5, "trajectories": 3, "steps": 4, "wm/val_loss": 0.25}

    monkeypatch.setattr(refit, "refit_any_on_store", fake_refit)
    monkeypatch.setattr(refit, "refit_plain_on_store", fake_refit)
    monkeypatch.setattr(refit, "one_step_accuracy", lambda model, trajectories: SimpleNamespace(
        exact_match=exact_match, as_metrics=lambda prefix: {f"{prefix}one_step_exact_match": exact_match}))
    metrics = refit.refit_and_gate(object(), ImaginationGate(0.5), None, [trajectory(0, iteration)], config, iteration,
                                   first_fit=first_fit, fit_seed=9, log=print, iteration_at_refit=1)
    return metrics, calls


def test_refit_below_skips_a_model_that_keeps_up(monkeypatch):
    config = ImaginationConfig(refit_below=0.6, fit_every=1)
    metrics, calls = run_refit_and_gate(monkeypatch, config, exact_match=0.7)
    assert (calls, metrics["wm/refit_skipped"]) == ([], 1.0) and "wm/fit_trajectories" not in metrics
    metrics, calls = run_refit_and_gate(monkeypatch, config, exact_match=0.5)
    assert (len(calls), metrics["wm/refit_skipped"], metrics["wm/fit_trajectories"]) == (1, 0.0, 3.0)


def test_refit_below_never_skips_the_first_fit(monkeypatch):
    metrics, calls = run_refit_and_gate(monkeypatch, ImaginationConfig(refit_below=0.6), exact_match=0.9,
                                        first_fit=True)
    assert len(calls) == 1 and "wm/refit_skipped" not in metrics


def test_the_clock_decides_without_refit_below(monkeypatch):
    metrics, calls = run_refit_and_gate(monkeypatch, ImaginationConfig(fit_every=2), exact_match=0.1, iteration=3)
    assert calls == [] and "wm/refit_skipped" not in metrics  # iteration 3 of every 2: not due, as today


def test_holdout_passes_early_stop_and_records_the_steps_used(monkeypatch):
    config = ImaginationConfig(fit_holdout=0.2, fit_loop="plain", fit_eval_every=3, fit_patience=4, fit_min_delta=0.1)
    metrics, calls = run_refit_and_gate(monkeypatch, config, exact_match=0.5)
    assert calls[0]["early_stop"] == refit.EarlyStop(every=3, patience=4, min_delta=0.1)
    assert "choose" in calls[0]
    assert (metrics["wm/fit_steps_used"], metrics["wm/fit_val_loss"]) == (4.0, 0.25)


def test_the_first_fit_takes_no_rule(monkeypatch):
    config = ImaginationConfig(fit_holdout=0.2, fit_replay=0.1, fit_loop="plain")
    metrics, calls = run_refit_and_gate(monkeypatch, config, exact_match=0.5, first_fit=True)
    assert "choose" not in calls[0] and "early_stop" not in calls[0] and "wm/fit_steps_used" not in metrics
