"""The world-model benchmark runs in quick mode and gives well-formed, finite rows (no quality claims)."""

import math

import pytest

from experiments.benchmarks import world_model as bench


def test_quick_run_gives_finite_well_formed_rows(tmp_path):
    envs = ("hidden_number", "frozen_lake")
    result = bench.run(envs, (12, 24), (2, 2), eval_transitions=10, batch_size=4, latent_size=32, members=2,
                       log=lambda _: None)

    assert [(r.env, r.steps) for r in result.rows] == [(e, 2) for e in envs for _ in range(2)]
    for env in envs:
        sizes = [r.transitions for r in result.rows if r.env == env]
        assert sizes[0] >= 12 and sizes[1] >= 24 and sizes[0] < sizes[1]
    for r in result.rows:
        assert r.fit_s > 0 and r.eval_transitions >= 10
        for value in (r.exact_match, r.reward_acc, r.done_acc):
            assert 0.0 <= value <= 1.0
        if r.env == "hidden_number":
            for value in (r.text_nll, r.answer_nll, r.bayes_nll, r.ratio):
                assert math.isfinite(value) and value > 0
            assert r.text_nll >= r.answer_nll  # the answer token is one of the text's tokens
        else:
            assert math.isnan(r.text_nll) and math.isnan(r.bayes_nll)

    table = bench.format_table(result).splitlines()
    assert len(table) == 1 + len(result.rows)
    bench.plot(result, tmp_path / "world_model.png")
    assert (tmp_path / "world_model.png").stat().st_size > 0


def test_held_out_seeds_are_disjoint_from_training_seeds():
    train = bench.collect_pool("hidden_number", "train", 20)
    held_out = bench.collect_pool("hidden_number", "eval", 20)
    assert not {t.seed for t in train} & {t.seed for t in held_out}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown envs"):
        bench.run(("chess",), (10,), (1,))
    with pytest.raises(ValueError, match="steps"):
        bench.run(("hidden_number",), (10, 20), (1,))
    with pytest.raises(ValueError, match="sizes"):
        bench.run(("hidden_number",), (0,), (1,))


def test_help_explains_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--quick", "--sizes", "--steps", "--envs", "--out", "--eval-transitions"):
        assert option in out
