"""The critic-cost benchmark runs in quick mode and gives a well-formed table (no timing claims)."""

import pytest

from benchmarks import critic_cost


def test_quick_run_gives_one_positive_row_per_history_length(tmp_path):
    result = critic_cost.run(critic_cost.QUICK_TURNS, repeats=2)

    assert [r.turns for r in result.rows] == list(critic_cost.QUICK_TURNS)
    tokens = [r.tokens for r in result.rows]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)  # longer histories, more tokens
    for r in result.rows:
        for value in (r.latent_ms, r.full_ms, r.cached_ms, r.full_ratio, r.cached_ratio):
            assert value > 0
    assert result.latent_params > 0 and result.transformer_params > 0
    assert 0.5 <= result.transformer_params / result.latent_params <= 2.0  # "similar parameter count"

    table = critic_cost.format_table(result).splitlines()
    assert len(table) == 2 + len(critic_cost.QUICK_TURNS)  # parameter line, header, one line per length
    critic_cost.plot(result, tmp_path / "critic_cost.png")
    assert (tmp_path / "critic_cost.png").stat().st_size > 0


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="turns"):
        critic_cost.run((0, 2))
    with pytest.raises(ValueError, match="repeats"):
        critic_cost.run((1,), repeats=0)
    with pytest.raises(ValueError, match="clock"):
        critic_cost.run((1,), clock="sundial")


def test_help_explains_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        critic_cost.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--quick", "--turns", "--repeats", "--out"):
        assert option in out
