"""The in-loop NLL benchmark's arithmetic on hand-worked turns, and one measured run folder."""

from __future__ import annotations

import math

import pytest
from omegaconf import OmegaConf

from benchmarks.in_loop_nll import fresh_seeds, main, nll_figures
from tests.experiments.in_process import compose_config, train_in_process
from tests.experiments.test_determinism import BASE, MODEL_BASED


def test_figures_of_three_turns_by_hand():
    # turns 0 and 2 are valid guesses (their answer word is all the uncertainty), turn 1 was refused
    f = nll_figures(model_nll=[1.0, 0.5, 2.0], exact_nll=[0.5, 0.0, 1.0], answer_turn=[True, False, True],
                    model_answer_nll=[0.6, 9.0, 1.2])
    assert f.turns == 3 and f.answer_turns == 2
    assert f.model_nll == pytest.approx(3.5 / 3) and f.exact_nll == pytest.approx(0.5)
    assert f.ratio == pytest.approx((3.5 / 3) / 0.5)
    # the refused turn's 9.0 is not an answer word: (0.6 + 1.2) / 2 against (0.5 + 1.0) / 2
    assert f.model_answer_nll == pytest.approx(0.9) and f.exact_answer_nll == pytest.approx(0.75)
    assert f.answer_ratio == pytest.approx(1.2)
    # what is left of each turn once its answer word is taken out: 0.4, 0.5 (all of it), 0.8
    assert f.model_certain_nll == pytest.approx(1.7 / 3)


def test_no_uncertainty_gives_no_ratio_and_mismatched_lists_are_refused():
    f = nll_figures([0.1], [0.0], [False], [0.0])
    assert math.isnan(f.ratio) and math.isnan(f.answer_ratio) and f.answer_turns == 0
    with pytest.raises(ValueError, match="one model NLL"):
        nll_figures([0.1, 0.2], [0.0], [False], [0.0])
    with pytest.raises(ValueError, match="at least one turn"):
        nll_figures([], [], [], [])


def test_fresh_seeds_skip_the_stored_ones():
    kwargs = {"n": 10, "max_turns": 4}
    first = fresh_seeds(kwargs, set(), 5, seed=0)
    assert len(set(first)) == 5
    again = fresh_seeds(kwargs, set(first[:2]), 5, seed=0)
    assert len(again) == 5 and not set(again) & set(first[:2])
    assert again[:3] == first[2:]  # the same stream, the stored ones left out


def test_a_run_of_another_env_is_refused(tmp_path):
    run_dir, overrides = tmp_path / "run", [*BASE, "algo=grpo", *MODEL_BASED]
    (run_dir / "models" / "policy").mkdir(parents=True)
    for name in ("config.json", "tokenizer_config.json"):  # what a saved policy folder holds; never read
        (run_dir / "models" / "policy" / name).write_text("{}")
    config = compose_config(overrides)
    config.env.name, config.env.kwargs = "frozen_lake", {}
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config, resolve=True))
    with pytest.raises(ValueError, match="a frozen_lake run; the exact answer is known for hidden_number only"):
        main([str(run_dir)])


@pytest.mark.slow
def test_end_to_end_on_a_tiny_model_based_run(tmp_path, capsys):
    run_dir, overrides = tmp_path / "tiny", [*BASE, "algo=grpo", *MODEL_BASED]
    train_in_process(overrides, run_dir)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(compose_config(overrides), resolve=True))  # as the CLI does
    main([str(run_dir), "--episodes", "6"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny | "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    model, exact, ratio = float(cells[3]), float(cells[4]), float(cells[5])
    # a model fitted for a few steps is far from the exact predictive, which no model beats on average
    assert int(cells[2]) >= 6 and exact > 0 and model > exact and ratio == pytest.approx(model / exact, rel=1e-3)
