"""benchmarks.in_loop_exact_match: bins, the held mark and the window's CPU, on hand-made series and
records whose figures are worked out by hand."""

import json

import pytest

from benchmarks import in_loop_exact_match as m


def test_binned_means_take_each_value_into_the_bin_that_ends_at_or_after_it():
    # bins (0, 1000], (1000, 2000], (2000, 3000]; 1000 belongs to the first, 3500 to none.
    series = [(400, 0.0), (1000, 0.5), (1500, 0.2), (2000, 0.4), (2600, 1.0), (3500, 0.0)]
    means = m.binned_means(series, 1000, 3000)
    assert means == pytest.approx([0.25, 0.3, 1.0])


def test_an_empty_bin_is_none_and_a_ragged_last_bin_counts():
    assert m.binned_means([(100, 1.0), (2400, 0.5)], 1000, 2500) == [1.0, None, 0.5]


def test_binned_means_refuse_a_window_shorter_than_a_bin():
    with pytest.raises(ValueError, match="width"):
        m.binned_means([], 1000, 500)


@pytest.mark.parametrize(("means", "expected"), [
    ([0.1, 0.95, 0.92], 1000),  # from the second bin on
    ([0.95, 0.5, 0.91], 2000),  # a dip resets the run
    ([0.95, None, 0.91], 2000),  # so does an empty bin
    ([0.95, 0.96, 0.89], None),  # the last bin must hold
    ([0.9, 0.9], 0),  # the target itself counts
])
def test_held_from(means, expected):
    assert m.held_from(means, 1000, 0.9) == expected


def test_window_cpu_counts_only_the_iterations_inside_the_window():
    records = [
        {"iteration": 0, "charts/real_env_steps": 0, "eval/success_rate": 0.3},  # before the loop: out
        {"iteration": 1, "charts/real_env_steps": 400, "time/phase/wm_fit_cpu_s": 3.0, "time/phase/update_cpu_s": 1.0},
        {"iteration": 2, "charts/real_env_steps": 900, "time/phase/update_cpu_s": 0.5, "time/phase/update_wall_s": 9.0},
        {"iteration": 3, "charts/real_env_steps": 1300, "time/phase/wm_fit_cpu_s": 7.0},  # past the window
    ]
    # (3 + 1 + 0.5) s over 900 real steps = 5 ms per real step; wall keys are not CPU.
    assert m.window_cpu_ms_per_step(records, 1000) == pytest.approx(5.0)


def test_window_cpu_is_none_without_phase_times():
    assert m.window_cpu_ms_per_step([{"charts/real_env_steps": 500, "wm/one_step_exact_match": 0.2}], 1000) is None


def test_the_table_reads_a_run_folder(tmp_path):
    run = tmp_path / "arm=x,seed=0"
    run.mkdir()
    records = [
        {"iteration": 0, "charts/real_env_steps": 0, "eval/success_rate": 0.3},
        {"iteration": 1, "charts/real_env_steps": 600, "wm/one_step_exact_match": 0.2, "time/phase/wm_fit_cpu_s": 6.0},
        {"iteration": 2, "charts/real_env_steps": 1200, "wm/one_step_exact_match": 0.95, "time/phase/update_cpu_s": 6.0},
        {"iteration": 3, "charts/real_env_steps": 1900, "wm/one_step_exact_match": 0.91},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lines = m.table([run], 1000, 2000, 0.9).splitlines()
    assert lines[0] == "| run | 0-1k | 1-2k | >= 0.9 from | loop CPU ms / real step |"
    # 12 s over 1,900 real steps = 6.3 ms; bins 0.2 and (0.95 + 0.91) / 2 = 0.93, held from 1,000.
    assert lines[2] == "| arm=x,seed=0 | 0.20 | 0.93 | 1,000 | 6 |"


def test_main_names_a_folder_without_metrics(tmp_path, capsys):
    with pytest.raises(SystemExit):
        m.main([str(tmp_path)])
    assert "no metrics.jsonl" in capsys.readouterr().err
