"""The headline at several thresholds (benchmarks/headline_thresholds.py): the arms chosen per threshold,
each cell's text and the table, against references worked by hand."""

from __future__ import annotations

import math

import pytest

from benchmarks import headline_thresholds as ht
from experiments.reporting import load_runs
from experiments.reporting.plot import threshold_band
from experiments.reporting.thresholds import AtThreshold
from tests.benchmarks.benchmark_runs import write_benchmark_run

T_975_DF2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # Student's t, 2 degrees of freedom, closed form
T_975_DF1 = math.tan(math.pi * 0.475)  # 1 degree of freedom (Cauchy)


def test_an_arm_every_seed_of_which_held_it_is_a_geometric_mean_with_its_interval():
    # logs ln 2000 -+ ln 2: mean ln 2000, sample std ln 2, three seeds
    half = T_975_DF2 * math.log(2) / math.sqrt(3)
    assert ht.arm_text([1000, 2000, 4000]) == f"2,000 [{2000 * math.exp(-half):,.0f}, {2000 * math.exp(half):,.0f}]"


def test_an_arm_some_seeds_of_which_did_not_hold_it_says_how_many_did_and_when():
    assert ht.arm_text([None, 2000, 3000]) == "2/3 seeds held: 2,000 and 3,000"
    assert ht.arm_text([None, None]) == "0/2 seeds held"
    assert ht.arm_text([5000]) == "5,000 (too few seeds to bound)"
    assert ht.arm_text([]) == "-"
    assert ht.arm_text([None, 90.0], ht.duration_text) == "1/2 seeds held: 90 s"


def test_a_cpu_interval_is_written_in_its_means_unit():
    assert ht.duration_interval_text(600.0, (300.0, 1200.0)) == "10.0 min [5.0, 20.0]"
    assert ht.duration_interval_text(90.0, (13.0, 634.0)) == "90 s [13, 634]"
    assert ht.duration_interval_text(90.0, None) == "90 s too few seeds to bound"
    assert ht.duration_text(7200.0) == "2.0 h"


def test_the_ratio_pairs_seeds_by_seed_and_says_how_many_held():
    # The model-based dict lists seed 2 first: by seed every ratio is 2000/1000 = 8000/4000 = 2 (no spread).
    mb, mf = {2: 1000.0, 0: 1000.0, 1: 4000.0}, {0: 2000.0, 1: 8000.0, 2: 2000.0}
    assert ht.ratio_text(mb, mf) == "2.0x [2.0, 2.0]"
    assert ht.per_seed_text(mb, mf) == "2.0, 2.0, 2.0"
    # ratios 2, 4, 8: geometric mean 4, log std ln 2, two degrees of freedom
    half = T_975_DF2 * math.log(2) / math.sqrt(3)
    mb, mf = {0: 1000.0, 1: 1000.0, 2: 1000.0}, {0: 2000.0, 1: 4000.0, 2: 8000.0}
    assert ht.ratio_text(mb, mf) == f"4.0x [{4 * math.exp(-half):.1f}, {4 * math.exp(half):.1f}]"  # [0.7, 22.4]
    # Seed 1 left out (the model-based arm did not hold it): ratios 3 and 3 over 2 of 3 seeds.
    mb, mf = {0: 1000.0, 1: None, 2: 2000.0}, {0: 3000.0, 1: 5000.0, 2: 6000.0}
    assert ht.ratio_text(mb, mf) == "3.0x [3.0, 3.0] (2/3 seeds held)"
    assert ht.per_seed_text(mb, mf) == "3.0, -, 3.0"
    assert ht.ratio_text({0: 1000.0, 1: None}, {0: 3000.0, 1: 5000.0}) == "3.0x (1/2 seeds held; too few seeds to bound)"
    assert ht.ratio_text({0: None}, {0: 3000.0}) == "0/1 seeds held"
    assert ht.ratio_text({0: 1000.0}, {1: 3000.0}) == "-"  # no seed both arms ran


@pytest.fixture
def sweep(tmp_path):
    """Marks 10k apart. Held by hand (the crossing mark and the next two at or above):
    mb_grpo_r0.9: 0.6 at 10k and 10k; 0.8 at 10k and 20k.
    grpo: 0.6 at 10k and 10k; 0.8 never.  ppo_turn: 0.6 at 30k and 50k; 0.8 at 40k and 60k."""
    env_dir = tmp_path / "hidden_number"
    ledgers = {0: {"warm_start_expert_steps": 1000, "warm_start_check_steps": 2000},
               1: {"warm_start_expert_steps": 500, "warm_start_check_steps": 1500}}

    def run(method, values, seed, cpu_s):
        write_benchmark_run(env_dir, method, values, seed=seed, every=10_000, cpu_s=cpu_s, ledger=ledgers[seed])

    run("mb_grpo_r0.9", [0.3, 0.85, 0.9, 0.9], 0, 3000)
    run("mb_grpo_r0.9", [0.3, 0.7, 0.8, 0.8, 0.8], 1, 4000)
    run("grpo", [0.3, 0.6, 0.6, 0.6, 0.7, 0.7, 0.7], 0, 600)
    run("grpo", [0.3, 0.6, 0.6, 0.6, 0.7, 0.7, 0.7], 1, 600)
    run("ppo_turn", [0.3, 0.4, 0.5, 0.6, 0.8, 0.8, 0.8], 0, 600)
    run("ppo_turn", [0.3, 0.4, 0.5, 0.5, 0.5, 0.6, 0.8, 0.8, 0.8], 1, 800)
    return env_dir


def test_the_best_model_free_arm_is_chosen_at_each_threshold(sweep):
    rows = ht.threshold_rows(load_runs(sweep), (0.6, 0.8))
    # 0.6: grpo held it on both seeds at 10k, ppo_turn at 30k and 50k; 0.8: only ppo_turn held it.
    assert [(row.threshold, row.mb_label, row.mf_label) for row in rows] == [
        (0.6, "mb_grpo_r0.9", "grpo"), (0.8, "mb_grpo_r0.9", "ppo_turn")]
    # ppo_turn seed 0 at 0.8: 40k of its 60k real steps, 600 CPU s in all: 400 s; counted 40k + 1000 + 2000.
    assert rows[1].mf[0] == AtThreshold(40_000, pytest.approx(400.0), 43_000)
    assert rows[1].mb[1] == AtThreshold(20_000, pytest.approx(2000.0), 22_000)  # 20k of 40k, 4000 s in all


def test_the_table_at_two_thresholds_by_hand(sweep):
    table = ht.thresholds_table(ht.threshold_rows(load_runs(sweep), (0.6, 0.8))).splitlines()
    assert table[0].startswith("| threshold | model-based arm | best model-free arm | model-based: real steps |")
    # 0.6: both arms at 10k on both seeds (CPU: mb 1000 s of 3000 and 1000 of 4000; grpo 100 s of 600 twice).
    assert table[2] == ("| 0.6 | mb_grpo_r0.9 | grpo | 10,000 [10,000, 10,000] | 16.7 min [16.7, 16.7] | "
                        "10,000 [10,000, 10,000] | 100 s [100, 100] | 1.0x [1.0, 1.0] | 1.0, 1.0 | "
                        "1.0x [1.0, 1.0] |")  # counted: 13k / 13k and 12k / 12k
    # 0.8: mb 10k and 20k, ppo_turn 40k and 60k; ratios 4 and 3 (geometric mean sqrt 12 = 3.46), one degree
    # of freedom: half-width 12.706 * ((ln 4 - ln 3) / sqrt 2) / sqrt 2. CPU: mb 1000 and 2000 s, ppo 400 and 600 s.
    # Counted: (40k + 3k) / (10k + 3k) and (60k + 2k) / (20k + 2k).
    half = T_975_DF1 * (math.log(4 / 3) / math.sqrt(2)) / math.sqrt(2)
    counted = [43 / 13, 62 / 22]
    c_mean = math.sqrt(counted[0] * counted[1])
    c_half = T_975_DF1 * (math.log(counted[0] / counted[1]) / math.sqrt(2)) / math.sqrt(2)
    cpu_half = T_975_DF1 * (math.log(2) / math.sqrt(2)) / math.sqrt(2)
    ppo_half = T_975_DF1 * (math.log(1.5) / math.sqrt(2)) / math.sqrt(2)
    steps_half = ppo_half  # 40k and 60k: the same log spread as 400 and 600 s
    mb_steps = math.sqrt(10_000 * 20_000)
    mb_cpu, ppo_cpu, ppo_steps = math.sqrt(1000 * 2000), math.sqrt(400 * 600), math.sqrt(40_000 * 60_000)
    assert table[3] == (
        f"| 0.8 | mb_grpo_r0.9 | ppo_turn | {mb_steps:,.0f} [{mb_steps * math.exp(-cpu_half):,.0f}, "
        f"{mb_steps * math.exp(cpu_half):,.0f}] | {mb_cpu / 60:.1f} min [{mb_cpu * math.exp(-cpu_half) / 60:.1f}, "
        f"{mb_cpu * math.exp(cpu_half) / 60:.1f}] | {ppo_steps:,.0f} [{ppo_steps * math.exp(-steps_half):,.0f}, "
        f"{ppo_steps * math.exp(steps_half):,.0f}] | {ppo_cpu / 60:.1f} min [{ppo_cpu * math.exp(-ppo_half) / 60:.1f}, "
        f"{ppo_cpu * math.exp(ppo_half) / 60:.1f}] | {math.sqrt(12):.1f}x [{math.sqrt(12) * math.exp(-half):.1f}, "
        f"{math.sqrt(12) * math.exp(half):.1f}] | 4.0, 3.0 | {c_mean:.1f}x [{c_mean * math.exp(-c_half):.1f}, "
        f"{c_mean * math.exp(c_half):.1f}] |")


def test_a_seed_that_held_it_without_a_cpu_time_says_so():
    arm = {0: AtThreshold(1000.0, None, 1500.0), 1: AtThreshold(None, None, None)}
    assert ht.arm_cells(arm) == ("1/2 seeds held: 1,000", "CPU not recorded")


def test_the_threshold_band_spans_the_lowest_to_the_highest():
    assert threshold_band((0.8, 0.6, 0.9, 0.7)) == (0.6, 0.9, "thresholds 0.6, 0.7, 0.8, 0.9")
