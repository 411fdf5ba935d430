"""Edges of small math functions that the main tests leave open, found by mutation testing
(docs/mutation_testing.md): population against sample variance, the bounds of a budget share, a
quantile's refused arguments, and a plan that draws nothing when every branch fits."""

from __future__ import annotations

import math
import random

import pytest
import torch

from experiments.reporting.curves import t_quantile
from imagination.mixing import budget_spent
from imagination.value_expansion import plan_expansion
from policy.advantages.fused import explained_variance_of


def test_explained_variance_uses_population_variances():
    # G = (0, 2): Var = 1 (population; 2 as a sample). V = (0, 0): residual G, explained 0.
    # V = (1, 1): residual (-1, 1), Var 1 -> 0. V = (0, 1): residual (0, 1), Var 0.25 -> 0.75.
    returns = torch.tensor([0.0, 2.0])
    assert explained_variance_of(torch.tensor([0.0, 1.0]), returns) == pytest.approx(0.75)
    # three rows, so a sample variance would differ in the ratio: G = (0, 0, 3): Var 2; V = 0 -> 0
    assert explained_variance_of(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.0, 0.0, 3.0])) == pytest.approx(
        1 - (8 / 9) / 2)  # residual (0, 0, 2): Var 8/9
    assert explained_variance_of(torch.tensor([1.0, 5.0]), torch.tensor([3.0, 3.0])) == 0.0  # constant G
    assert explained_variance_of(torch.zeros(0), torch.zeros(0)) == 0.0


def test_budget_spent_with_two_iterations_and_its_bounds():
    assert budget_spent(2, 2, 0, None) == 1.0  # the second of two iterations: all of it
    assert budget_spent(1, 2, 0, None) == 0.0
    assert budget_spent(1, 1, 0, None) == 0.0
    assert budget_spent(1, 4, 50, 100) == 0.5  # the step budget is further along
    assert budget_spent(0, 4, 0, None) == 0.0  # before the first iteration: not below 0
    assert budget_spent(9, 4, 0, None) == 1.0  # past the end: not above 1


@pytest.mark.parametrize(("p", "df"), [(1.0, 3), (0.4, 3), (1.5, 3), (0.975, 0)])
def test_t_quantile_refuses_what_it_cannot_answer(p, df):
    with pytest.raises(ValueError, match=r"t_quantile needs 0.5 <= p < 1 and df >= 1"):
        t_quantile(p, df)


def test_t_quantile_of_cauchy_past_the_first_bracket():
    # df = 1 is the Cauchy distribution: quantile tan(pi (p - 1/2)); p = 0.9 gives 3.0777 (beyond the
    # first bracket [0, 1], so the search doubles its bound twice)
    assert t_quantile(0.9, 1) == pytest.approx(math.tan(math.pi * 0.4), abs=1e-5)
    assert t_quantile(0.5, 4) == pytest.approx(0.0, abs=1e-9)


def test_a_plan_with_as_many_branches_as_the_budget_draws_nothing():
    branches = [(object(), 0), (object(), 1), (object(), 2)]
    rng = random.Random(5)
    state = rng.getstate()
    planned, k = plan_expansion(branches, 3, rng)
    assert planned == branches and k == 1
    assert rng.getstate() == state  # every branch fits: no draw, so later draws are unchanged
    planned, k = plan_expansion(branches, 7, rng)
    assert planned == branches and k == 2
