"""Early stopping of a refit on held-out data: the decision on hand-worked losses, and the plain fit's use of it."""

import math

import pytest
import torch

from envs import TrajectoryStore
from world_model.data import trainable
from world_model.early_stop import EarlyStop, early_stop
from world_model.plain_fit import fit_plain, held_out_stop, plain_steps, refit_plain_on_store

from .conftest import hidden_number_trajectories, tiny_model


@pytest.mark.parametrize(("losses", "patience", "min_delta", "expected"), [
    ([], 2, 0.0, None),
    ([1.0], 1, 0.0, None),
    ([1.0, 1.0], 1, 0.0, 1),  # equal is no improvement
    ([1.0, 0.9, 0.95, 0.96], 2, 0.0, 3),  # best at 1; readings 2 and 3 do not beat 0.9
    ([1.0, 0.9, 0.95], 2, 0.0, None),  # one reading since the best: go on
    ([1.0, 0.5, 0.4, 0.3], 1, 0.0, None),  # every reading improves
    ([1.0, 0.99, 0.98], 2, 0.05, 2),  # neither beats 1.0 - 0.05 = 0.95
    ([1.0, 0.94, 0.93, 0.92], 2, 0.05, 3),  # 0.94 < 0.95 improves; then 0.93, 0.92 are not below 0.89
    ([math.nan, 1.0, 1.1], 1, 0.0, 2),  # NaN never improves; 1.0 does (on inf), 1.1 does not
])
def test_early_stop_on_hand_worked_losses(losses, patience, min_delta, expected):
    assert early_stop(losses, patience, min_delta) == expected


def test_plain_steps_stops_when_asked():
    # w = 0, loss (w - b)^2, SGD lr 0.1 on batches 1, 3; stop after the second step: w = 0.76 (as in test_plain_fit)
    w = torch.zeros((), dtype=torch.float64, requires_grad=True)
    batches = [torch.tensor(1.0, dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64)]
    asked: list[int] = []

    def stop(steps: int) -> bool:
        asked.append(steps)
        return steps == 2

    _, steps, epochs = plain_steps(batches, lambda b: (w - b) ** 2, torch.optim.SGD([w], lr=0.1), 10, stop)
    assert (steps, epochs, asked) == (2, 1, [1, 2])
    assert float(w.detach()) == pytest.approx(0.76, abs=1e-12)


def test_a_fit_that_does_not_move_stops_after_patience_readings(hn_tokenizer):
    # lr 0: the weights never change, so no reading beats the first one (read before any step); with a
    # reading every 3 steps and patience 2 the fit stops at the reading of step 6 (readings at 0, 3, 6).
    data = trainable(hidden_number_trajectories(seed=0, groups=8))
    assert len(data) >= 12
    got = fit_plain(data[:8], data[8:12], tiny_model(hn_tokenizer), max_steps=50, batch_size=4, lr=0.0,
                    early_stop=EarlyStop(every=3, patience=2, min_delta=0.0))
    assert (got["steps"], got["wm/val_losses"]) == (6, 3)


def test_a_fit_with_no_early_stop_due_runs_to_the_cap_with_the_same_weights(hn_tokenizer):
    # patience beyond the readings: the cap (7 steps), a reading every 2 steps plus the first (0, 2, 4, 6),
    # and the weights of the fit without readings, bit for bit (reading draws nothing from the fit's RNG).
    data = trainable(hidden_number_trajectories(seed=0, groups=8))
    plain, watched = tiny_model(hn_tokenizer, seed=0), tiny_model(hn_tokenizer, seed=0)
    fit_plain(data[:8], [], plain, max_steps=7, batch_size=4, lr=5e-3, seed=3)
    got = fit_plain(data[:8], data[8:12], watched, max_steps=7, batch_size=4, lr=5e-3, seed=3,
                    early_stop=EarlyStop(every=2, patience=100, min_delta=0.0))
    assert (got["steps"], got["wm/val_losses"]) == (7, 4)
    expected = plain.state_dict()
    assert all(torch.equal(tensor, expected[name]) for name, tensor in watched.state_dict().items())


def test_refit_on_store_hands_the_chosen_held_out_rows_to_the_fit(hn_tokenizer, tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    store.append(hidden_number_trajectories(seed=1, groups=8))
    # lr 0 and patience 1: the first reading after the first step does not improve, so one step
    got = refit_plain_on_store(tiny_model(hn_tokenizer), store, steps=20, batch_size=4, lr=0.0, last=6,
                               choose=lambda window: (window[:-2], window[-2:]),
                               early_stop=EarlyStop(every=1, patience=1, min_delta=0.0))
    assert (got["trajectories"], got["held_out"], got["steps"], got["wm/val_losses"]) == (4, 2, 1, 2)


def test_reading_the_held_out_loss_leaves_the_global_rng_alone(hn_tokenizer):
    # a reading that drew from the global generator would move the fit's later draws (dropout, if a
    # model had it): early stopping on would then change the weights of the steps it lets run
    data = trainable(hidden_number_trajectories(seed=0, groups=8))
    state = torch.get_rng_state()
    losses: list[float] = []
    stop = held_out_stop(tiny_model(hn_tokenizer), data[:4], EarlyStop(every=1, patience=5, min_delta=0.0), losses, 4)
    assert stop is not None and stop(1) is False
    assert len(losses) == 2 and torch.equal(torch.get_rng_state(), state)
