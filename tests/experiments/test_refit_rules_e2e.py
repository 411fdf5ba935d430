"""The refit rules in the training loop: a replay of every older row is today's run, bit for bit, and
with every rule on the loop runs and records what each rule decided."""

from __future__ import annotations

import logging

import pytest
from safetensors.torch import load_file

from tests.experiments.in_process import train_in_process
from tests.experiments.test_imagination_e2e import SMALL_WORLD_MODEL
from tests.experiments.test_train_e2e import TINY, read_records

pytestmark = pytest.mark.slow

BASE = [*TINY, "algo=grpo", "trainer.iterations=3", *SMALL_WORLD_MODEL, "imagination=dyna",
        "imagination.ratio=0.5", "imagination.gate_threshold=0", "imagination.fit_loop=plain"]
RULE_KEYS = ("wm/fit_new", "wm/fit_replayed", "wm/fit_held_out")


def comparable(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(("charts/elapsed_s", "time/", *RULE_KEYS))}
            for r in records]


def test_a_replay_of_every_older_row_is_todays_run(tmp_path):
    today, replay = tmp_path / "today", tmp_path / "replay"
    train_in_process(BASE, today)
    train_in_process([*BASE, "imagination.fit_replay=1.0"], replay)
    records = read_records(replay)
    assert comparable(records) == comparable(read_records(today))
    refits = [r for r in records[1:] if "wm/fit_new" in r]
    assert len(refits) == 3 and all(r["wm/fit_new"] == 4 for r in refits)  # one real group of 4 each iteration
    assert [r["wm/fit_replayed"] for r in refits] == [16, 20, 24]  # the 16 experts, then each earlier group
    weights = [load_file(run / "models" / "world_model" / "model.safetensors") for run in (today, replay)]
    assert weights[0].keys() == weights[1].keys()
    assert all((weights[0][k] == weights[1][k]).all() for k in weights[0])


def test_every_rule_on_records_its_decisions(tmp_path):
    run = tmp_path / "rules"
    train_in_process([*BASE, "imagination.refit_below=1.0", "imagination.fit_replay=0.25",
                      "imagination.fit_holdout=0.5", "imagination.fit_steps=6", "imagination.fit_eval_every=1",
                      "imagination.fit_patience=1"], run)
    records = read_records(run)[1:]
    assert all(r["wm/refit_skipped"] in (0.0, 1.0) for r in records)
    for r in records:
        if r["wm/refit_skipped"] == 0.0:
            assert 1 <= r["wm/fit_steps_used"] <= 6 and r["wm/fit_held_out"] == 2  # half of 4 new episodes
        else:
            assert "wm/fit_steps_used" not in r


def test_the_first_fit_on_the_experts_stops_early(tmp_path, caplog):
    # Patience 1 with readings every step and a min_delta no loss can beat: the fit on the 16 experts
    # stops after its first step (the reading before it is the best there will be).
    run = tmp_path / "first"
    caplog.set_level(logging.INFO, logger="experiments.build")
    train_in_process([*BASE, "imagination.first_fit_holdout=0.25", "imagination.first_fit_steps=40",
                      "imagination.fit_eval_every=1", "imagination.fit_patience=1", "imagination.fit_min_delta=1e9"],
                     run)
    assert "the warm-start fit took 1 of its 40 steps (first_fit_holdout)" in caplog.messages
    assert all("wm/fit_steps_used" not in r for r in read_records(run)[1:])  # refits: fit_holdout is off
