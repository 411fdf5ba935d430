"""The throughput benchmark: its pure helpers against hand counts, and a quick run's table (no timing claims)."""

import math

import pytest
import torch

from benchmarks import throughput


def test_token_shares_match_a_hand_count():
    # Two left-padded rows of width 5: row 0 has 2 pads, row 1 has 1; trained tokens: 2 and 1.
    attention = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    response = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.float)

    non_pad, padding, trained = throughput.token_shares(attention, response)

    assert non_pad == 7  # 3 + 4 real tokens
    assert padding == pytest.approx(3 / 10)
    assert trained == pytest.approx(3 / 10)
    with pytest.raises(ValueError, match="no positions"):
        throughput.token_shares(torch.zeros((0, 5)), torch.zeros((0, 5)))


def test_idle_decode_share_matches_a_hand_count():
    # Call 1: actions of 1 and 3 tokens decode 3 steps x 2 rows = 6 slots, 2 of them idle;
    # call 2: one action of 2 tokens, 2 slots, none idle. 2 idle of 8.
    assert throughput.idle_decode_share([[1, 3], [2]]) == pytest.approx(2 / 8)
    assert throughput.idle_decode_share([[4, 4, 4]]) == 0.0
    with pytest.raises(ValueError, match="no decode slots"):
        throughput.idle_decode_share([[]])


def test_series_pairs_each_repeat_for_its_ratio():
    # Reverie does 100 units in 2 s then 4 s; the reference does 50 units in 0.5 s then 2 s.
    series = throughput.Series(work=100.0, reference_work=50.0, reverie_s=[2.0, 4.0], reference_s=[0.5, 2.0])

    assert series.rates("reverie") == pytest.approx((100 / 3.0, 100 / 2.0))  # median time 3 s, best 2 s
    assert series.rates("reference") == pytest.approx((50 / 1.25, 50 / 0.5))
    # Per repeat: (100/2)/(50/0.5) = 0.5 and (100/4)/(50/2) = 1.0, so median 0.75 and min 0.5
    # (the ratio of the median rates would be 0.833: pairing is what the figure reports).
    assert series.ratios() == pytest.approx((0.75, 0.5))


@pytest.mark.slow
def test_quick_run_prints_every_row_with_positive_ratios(tmp_path, capsys):
    threads_before = torch.get_num_threads()
    throughput.main(["--quick", "--threads", "1", "--out", str(tmp_path)])
    assert torch.get_num_threads() == threads_before  # the benchmark leaves the caller's setting alone
    lines = capsys.readouterr().out.splitlines()

    rows = {}
    for line in lines:
        for figure in throughput.FIGURES:
            if line.startswith(figure):
                rows[figure] = line[len(figure) :].split()
    assert set(rows) == set(throughput.FIGURES)
    for figure, cells in rows.items():
        assert cells[0] == "1"  # the thread count
        numbers = [float(cell) for cell in cells[1:]]
        assert len(numbers) == 6  # reverie median/best, limit median/best, ratio median/min
        assert all(math.isfinite(x) and x > 0 for x in numbers), (figure, numbers)
    before = next(line for line in lines if line.startswith(throughput.UPDATE_BEFORE))  # new update / earlier path
    assert float(before.split("ratio med")[1].split()[0]) > 0
    share = next(line for line in lines if line.startswith("world model share"))
    assert 0 < float(share.split("median")[1].split()[0]) <= 1
    policy = next(line for line in lines if line.startswith("policy share"))
    assert 0 < float(policy.split("median")[1].split()[0]) <= 1 and "world model / policy" in policy
    assert any(line.startswith("batch:") and "padding" in line and "decode slots" in line for line in lines)
    assert (tmp_path / "throughput.png").stat().st_size > 0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="repeats"):
        throughput.Settings(repeats=0)
    with pytest.raises(ValueError, match="threads"):
        throughput.Settings(threads=(0,))
