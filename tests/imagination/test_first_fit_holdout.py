"""``imagination.first_fit_holdout``: the first fit stops early on a held-out share, as a refit does with
``fit_holdout``. The share's count on hand-worked cases, the split it makes, the key's checks, what
``refit_and_gate`` passes and records, and the expert fit on a real tiny model."""

from __future__ import annotations

import pytest

from envs.trajectory import Trajectory
from imagination import refit
from imagination.config import ImaginationConfig
from imagination.refit_rules import holdout_count
from tests.imagination.test_refit_rules import run_refit_and_gate
from tests.world_model.conftest import hidden_number_trajectories, tiny_model
from world_model import TurnTokenizer
from world_model.early_stop import EarlyStop


# round(share * n), at least one, never all, none below two rows: 25.6 -> 26, 0.1 -> 1, 9.9 -> 9
@pytest.mark.parametrize(("n", "share", "count"), [
    (0, 0.5, 0), (1, 0.9, 0), (2, 0.9, 1), (10, 0.3, 3), (10, 0.01, 1), (11, 0.9, 10), (256, 0.1, 26), (5, 0.5, 2),
])
def test_holdout_count_by_hand(n, share, count):
    assert holdout_count(n, share) == count


def rows(n: int) -> list[Trajectory]:
    return [Trajectory(env_name="hidden_number", env_kwargs={}, seed=i, group_id=i, trajectory_id=i, iteration=None)
            for i in range(n)]


def test_off_passes_nothing():
    assert refit.first_fit_options(ImaginationConfig(fit_holdout=0.5, fit_loop="plain"), 5, {}) == {}


def test_the_split_holds_the_share_out_of_every_row_and_trains_on_the_rest():
    config = ImaginationConfig(first_fit_holdout=0.25, fit_loop="plain", fit_eval_every=3, fit_patience=4,
                               fit_min_delta=0.1)
    decided: dict[str, float] = {}
    options = refit.first_fit_options(config, 5, decided)
    train, held = options["choose"](rows(8))
    train_ids, held_ids = [t.trajectory_id for t in train], [t.trajectory_id for t in held]
    assert len(held_ids) == 2 and not set(train_ids) & set(held_ids)  # 0.25 of 8; none of them trained on
    assert sorted(train_ids + held_ids) == list(range(8)) and train_ids == sorted(train_ids)
    assert decided == {"wm/fit_held_out": 2.0}
    assert options["early_stop"] == EarlyStop(every=3, patience=4, min_delta=0.1)
    _, again = refit.first_fit_options(config, 5, {})["choose"](rows(8))
    assert [t.trajectory_id for t in again] == held_ids  # seeded by the fit's seed


@pytest.mark.parametrize("value", [0, 0.95, -0.1])
def test_a_bad_share_names_the_key(value):
    with pytest.raises(ValueError, match="imagination.first_fit_holdout"):
        ImaginationConfig(first_fit_holdout=value, fit_loop="plain")


def test_it_needs_the_plain_loop():
    with pytest.raises(ValueError, match="imagination.first_fit_holdout needs imagination.fit_loop=plain"):
        ImaginationConfig(first_fit_holdout=0.2)


def test_refit_and_gate_stops_the_first_fit_early_and_records_the_steps(monkeypatch):
    config = ImaginationConfig(first_fit_holdout=0.2, fit_loop="plain", fit_eval_every=2)
    metrics, calls = run_refit_and_gate(monkeypatch, config, exact_match=0.5, first_fit=True)
    assert calls[0]["early_stop"] == EarlyStop(every=2, patience=2, min_delta=0.0) and "choose" in calls[0]
    assert calls[0]["steps"] == config.first_fit_steps  # at most that many
    assert metrics["wm/fit_steps_used"] == 4.0  # what the fit took (the fake's 4)
    # a later refit without fit_holdout takes no rule and records no steps used
    metrics, calls = run_refit_and_gate(monkeypatch, config, exact_match=0.5)
    assert "early_stop" not in calls[0] and "wm/fit_steps_used" not in metrics


@pytest.fixture(scope="module")
def experts() -> list[Trajectory]:
    return hidden_number_trajectories(seed=2, groups=20, agent="expert")


def test_the_expert_fit_as_today_holds_out_a_tenth_and_runs_every_step(experts):
    tokenizer = TurnTokenizer.for_env("hidden_number")
    config = ImaginationConfig(first_fit_steps=3, fit_batch_size=8)
    held_out, fit = refit.fit_on_demonstrations(tiny_model(tokenizer), experts, config, seed=0)
    assert held_out == experts[:2] and fit["steps"] == 3  # 20 // 10


def test_the_expert_fit_stops_on_its_held_out_share(experts):
    # Readings every step, patience 1, and no reading can improve by 1e9: the loss before the first
    # step is the best, the reading after step 1 is one without improvement, so the fit stops there.
    tokenizer = TurnTokenizer.for_env("hidden_number")
    config = ImaginationConfig(first_fit_steps=50, fit_batch_size=8, fit_loop="plain", first_fit_holdout=0.25,
                               fit_eval_every=1, fit_patience=1, fit_min_delta=1e9)
    held_out, fit = refit.fit_on_demonstrations(tiny_model(tokenizer), experts, config, seed=0)
    assert held_out == experts[:5] and fit["steps"] == 1 and fit["wm/val_losses"] == 2  # 0.25 of 20
    # with a patience it never runs out of, the fit takes every step
    config = ImaginationConfig(first_fit_steps=4, fit_batch_size=8, fit_loop="plain", first_fit_holdout=0.25,
                               fit_eval_every=1, fit_patience=10)
    _, fit = refit.fit_on_demonstrations(tiny_model(tokenizer), experts, config, seed=0)
    assert fit["steps"] == 4 and fit["wm/val_losses"] == 5
