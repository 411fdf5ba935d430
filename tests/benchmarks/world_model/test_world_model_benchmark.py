"""The world-model benchmark: its pure parts against hand-worked cases, and smoke runs (no quality claims)."""

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import world_model as bench
from benchmarks.world_model.exact import (
    exact_distributions,
    frozen_lake_grid,
    next_cell_distribution,
)
from benchmarks.world_model.report import TARGETS, target_line
from benchmarks.world_model.scoring import match_at, open_loop
from envs.agent import RandomAgent
from envs.collect import collect
from envs.frozen_lake import FrozenLakeEnv
from envs.trajectory import Trajectory, Turn
from world_model.state import Predictions, WorldState

ROOT = Path(__file__).resolve().parents[3]
MAP = ("SFF", "FHF", "FFG")  # cell 0 is the top-left corner: slips into the border stay put


# --- AUROC --------------------------------------------------------------------------------------------
def test_auroc_matches_a_hand_worked_example():
    # positives 0.35 and 0.8 against negatives 0.1 and 0.4: 0.35 beats 0.1 only, 0.8 beats both -> 3 / 4
    assert bench.auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    # a tie counts one half: positive 0.5 vs negatives 0.5 (1/2) and 0.2 (1) -> 0.75
    assert bench.auroc([0.5, 0.5, 0.2], [True, False, False]) == 0.75
    assert bench.auroc([3.0, 1.0], [True, False]) == 1.0
    assert bench.auroc([1.0, 3.0], [True, False]) == 0.0


def test_auroc_is_nan_without_both_classes_and_agrees_with_counting_pairs():
    assert math.isnan(bench.auroc([0.1, 0.2], [False, False]))
    assert math.isnan(bench.auroc([0.1, 0.2], [True, True]))
    rng = random.Random(0)
    scores = [rng.choice([0.0, 0.1, 0.2, 0.3]) for _ in range(40)]
    labels = [rng.random() < 0.3 for _ in range(40)]
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    pairs = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg) / (len(pos) * len(neg))
    assert bench.auroc(scores, labels) == pytest.approx(pairs)


# --- exact distributions ------------------------------------------------------------------------------
def test_slippery_next_cell_distribution_by_hand():
    env = FrozenLakeEnv(desc=MAP, is_slippery=True)
    first = env.reset(0)
    assert first.endswith(frozen_lake_grid(MAP, 0))  # the helper draws the grid as the env does
    table = env.transition_probabilities()
    # Right from the corner slips Up (stays on 0), goes Right (1) or slips Down (3): a third each.
    right = next_cell_distribution(table, MAP, 0, 2)
    assert right == pytest.approx({frozen_lake_grid(MAP, c): 1 / 3 for c in (0, 1, 3)})
    # Left: Down (3) a third; Left and Up both hit the border and stay on 0: two thirds together.
    left = next_cell_distribution(table, MAP, 0, 0)
    assert left == pytest.approx({frozen_lake_grid(MAP, 0): 2 / 3, frozen_lake_grid(MAP, 3): 1 / 3})
    assert sum(left.values()) == pytest.approx(1.0)


def _slippery_episode(seed: int) -> Trajectory:
    kwargs = {"desc": MAP, "is_slippery": True}
    return collect(RandomAgent(seed=seed), "frozen_lake", group_size=1, group_seeds=[seed], env_kwargs=kwargs,
                   progress=False)[0]


def test_exact_nll_of_a_recorded_slippery_episode():
    kwargs = {"desc": MAP, "is_slippery": True}
    t = _slippery_episode(3)
    dists = exact_distributions("frozen_lake", kwargs, [t])
    assert len(dists) == t.num_turns
    for dist, turn in zip(dists, t.turns, strict=True):
        assert sum(dist.values()) == pytest.approx(1.0)
        assert dist[turn.next_observation] > 0
    # The first move starts in the corner: hand-worked probability of what happened.
    first = t.turns[0]
    by_hand = {"Left": {0: 2 / 3, 3: 1 / 3}, "Down": {0: 1 / 3, 3: 1 / 3, 1: 1 / 3},
               "Right": {0: 1 / 3, 1: 1 / 3, 3: 1 / 3}, "Up": {0: 2 / 3, 1: 1 / 3}}[first.action]
    cell = next(c for c in by_hand if frozen_lake_grid(MAP, c) == first.next_observation)
    assert -math.log(dists[0][first.next_observation]) == pytest.approx(-math.log(by_hand[cell]))


def test_exact_replay_refuses_a_tampered_recording():
    kwargs = {"desc": MAP, "is_slippery": True}
    t = _slippery_episode(3)
    t.turns[0].next_observation = "P _ _\n_ _ _\n_ _ G"
    with pytest.raises(RuntimeError, match="diverged"):
        exact_distributions("frozen_lake", kwargs, [t])


def test_hidden_number_exact_predictive_sums_to_one():
    pool = bench.collect_pool("hidden_number_noisy", "eval", 12)
    dists = exact_distributions("hidden_number", {"noise": 0.1}, pool)
    assert len(dists) == sum(t.num_turns for t in pool)
    for dist in dists:
        assert sum(dist.values()) == pytest.approx(1.0) and len(dist) == 3


# --- open loop ----------------------------------------------------------------------------------------
class RightForKSteps:
    """A fake world model: its latent counts imagined steps; it answers ``seen <action>`` (the
    truth) for the first ``k`` steps of a rollout and ``nonsense`` after."""

    def __init__(self, k: int) -> None:
        self.k = k

    def step(self, states, actions, *, generator, greedy):
        latent = states.latent + 1  # (B, 1)
        texts = [f"seen {a}" if n <= self.k else "nonsense" for n, a in zip(latent[:, 0].tolist(), actions, strict=True)]
        zeros = torch.zeros(len(actions))
        pred = Predictions(texts, zeros, zeros, zeros.bool(), zeros, zeros, zeros, zeros.bool())
        return WorldState(latent, tuple(texts)), pred


def test_open_loop_counts_the_kth_step_of_each_rollout():
    actions = [["a", "b", "c", "d", "e"], ["a", "b"], [], ["x", "y", "z"]]
    wanted = [[f"seen {a}" for a in row] for row in actions]
    states = WorldState(torch.zeros(4, 1), ("", "", "", ""))
    matches = open_loop(RightForKSteps(2), states, actions, wanted, batch_size=2)
    assert matches == [[True, True, False, False, False], [True, True], [], [True, True, False]]
    assert match_at(matches, 1) == (1.0, 3)
    assert match_at(matches, 2) == (1.0, 3)
    assert match_at(matches, 3) == (0.0, 2)
    assert match_at(matches, 5) == (0.0, 1)
    assert math.isnan(match_at(matches, 6)[0])


# --- revisits, targets --------------------------------------------------------------------------------
def test_revisits_are_exact_repeats_within_the_episode():
    pages = ["search", "results", "item 3", "item 3", "search", "item 4", "results"]
    turns = [Turn(pages[i], f"a{i}", pages[i + 1], 0.0, False, True, pages[i]) for i in range(len(pages) - 1)]
    t = Trajectory("minishop", {}, seed=0, group_id=0, trajectory_id=0, turns=turns)
    assert bench.revisits(t) == [False, False, True, True, False, True]


def test_targets_report_the_first_size_met_with_its_cpu_and_budget_and_the_best_otherwise():
    def row(n, match, cpu_s):
        return bench.Row("frozen_lake", n, 10, 1.0, 50, {"match": match}, fit_cpu_s=cpu_s)

    target = next(t for t in TARGETS if t.key == "match")
    assert target.threshold == 0.99 and target.max_transitions == 5000
    assert target_line(target, [row(300, 0.9, 10.0), row(1000, 0.995, 20.0), row(3000, 1.0, 40.0)]) == (
        "met at 1000 transitions (fit 20 CPU s)"
    )
    assert target_line(target, [row(3000, 0.95, 10.0), row(10000, 0.995, 4000.0)]) == (
        "met at 10000 transitions (fit 4000 CPU s, over the 5000 transitions allowed, over 1 CPU-hour)"
    )
    assert target_line(target, [row(300, 0.9, 1.0), row(1000, 0.95, 1.0), row(3000, 0.93, 1.0)]) == (
        "not met (best 0.950 at 1000)"
    )
    assert target_line(target, [row(300, math.nan, 1.0)]) == "not met (no value: -)"
    ratio = [t for t in TARGETS if t.key == "ratio"]
    assert [(t.kinds, t.threshold) for t in ratio] == [(("bayes",), 1.05), (("slippery",), 1.10)]


def test_reliability_bins():
    assert bench.reliability([0.05, 0.15, 0.12, 1.0], [False, True, False, True], bins=10) == [
        (0.05, 0.0, 1), (pytest.approx(0.135), 0.5, 2), (1.0, 1.0, 1)]


# --- runs ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_run_gives_well_formed_rows_with_a_shift_fit(tmp_path):
    result = bench.run(("frozen_lake", "hidden_number"), (12, 24), (2, 2), eval_transitions=6, shift=(10, 1),
                       batch_size=4, latent_size=32, members=2)
    curve = [r for r in result.rows if not r.shift]
    assert [(r.env, r.steps) for r in curve] == [(e, 2) for e in ("frozen_lake", "hidden_number") for _ in range(2)]
    assert [(r.env, r.shift) for r in result.rows if r.shift] == [("frozen_lake", True)]
    for r in result.rows:
        assert r.fit_s > 0 and r.eval_transitions >= 6
        assert r.fit_cpu_s > 0
        for key in ("match", "reward", "done", "reward_tf", "done_tf"):
            assert 0.0 <= r.get(key) <= 1.0
    for r in curve:
        if r.env == "hidden_number":
            assert r.get("nll_text") >= r.get("nll_answer") > 0 and r.get("nll_exact") > 0
            assert r.get("ratio") == pytest.approx(r.get("nll_text") / r.get("nll_exact"))
        else:
            assert r.get("open_loop_1") == pytest.approx(r.get("match"))  # step 1 is the one-step prediction
            assert r.get("open_loop_5_n") <= r.get("open_loop_1_n") == r.eval_transitions
    probs, hits = result.calibration["hidden_number"]
    assert len(probs) == 3 * curve[-1].eval_transitions and all(0 <= p <= 1 for p in probs)
    assert "== targets ==" in bench.format_targets(result) and "frozen_lake" in bench.format_table(result)
    assert set(result.cost) == {"frozen_lake", "hidden_number"}
    assert all(fit > 0 and imagine > 0 for fit, imagine in result.cost.values())
    assert "cost hidden_number: fit" in bench.format_costs(result)


@pytest.mark.slow
def test_quick_cli_covers_every_kind_in_a_subprocess(tmp_path):
    command = [sys.executable, "-m", "benchmarks.world_model", "--quick", "--envs", "hidden_number",
               "frozen_lake_slippery", "sokoban", "minishop", "--sizes", "10", "--eval-transitions", "1",
               "--shift-size", "0", "--out", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    for env, kind in (("hidden_number", "bayes"), ("frozen_lake_slippery", "slippery"), ("sokoban", "deterministic"),
                      ("minishop", "shop")):
        assert f"== {env} ({kind}) ==" in done.stdout
    assert "== targets ==" in done.stdout and "revisited-page exact match" in done.stdout
    assert (tmp_path / "world_model.png").stat().st_size > 0
    assert (tmp_path / "world_model_calibration.png").stat().st_size > 0


def test_the_copy_ablation_fits_both_arms_on_the_same_data(capsys):
    """``--ablation copy_observation``: the latent model off and on, same data and budget, one row each."""
    from benchmarks.world_model.models import build

    assert not build("latent", "frozen_lake", latent_size=16, members=2, seed=0).config.decoder.copy_observation
    assert build("copy", "frozen_lake", latent_size=16, members=2, seed=0).config.decoder.copy_observation
    edit = build("edit", "frozen_lake", latent_size=16, members=2, seed=0).config.decoder
    assert edit.copy_observation and edit.aligned_copy
    ordinal = build("ordinal", "hidden_number", latent_size=16, members=2, seed=0).config
    assert ordinal.ordinal_numbers and not ordinal.decoder.copy_observation
    assert not build("latent", "hidden_number", latent_size=16, members=2, seed=0).config.ordinal_numbers
    result = bench.run(("frozen_lake",), (8,), (1,), eval_transitions=3, shift=None, batch_size=2, latent_size=16,
                       members=2, models=("latent", "copy"))
    assert [(r.model, r.transitions, r.steps, r.eval_transitions) for r in result.rows] == [
        ("latent", result.rows[0].transitions, 1, result.rows[0].eval_transitions),
        ("copy", result.rows[0].transitions, 1, result.rows[0].eval_transitions),
    ]
    table = bench.format_ablation(result, "copy_observation").splitlines()
    assert [line.split()[:2] for line in table[3:]] == [["frozen_lake", "latent"], ["frozen_lake", "copy"]]


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
    for option in ("--quick", "--sizes", "--steps", "--envs", "--out", "--eval-transitions", "--shift-size",
                   "--ablation"):
        assert option in out


def test_the_cost_benchmark_times_the_default_world_model():
    """``world_model_cost`` builds ``WorldModelConfig``'s defaults: they must be the config group's."""
    import omegaconf

    from benchmarks.world_model_cost import default_model
    from world_model import WorldModelConfig
    from world_model.config import WorldModelOptions

    group = omegaconf.OmegaConf.load(ROOT / "experiments/conf/world_model/default.yaml")
    options = WorldModelOptions(**{k: v for k, v in omegaconf.OmegaConf.to_container(group).items() if k != "defaults"})
    model = default_model("hidden_number")
    assert model.config == WorldModelConfig.from_options(model.tokenizer, options)


class ScriptedActions:
    """Plays the same fixed list of actions in every episode, one per turn."""

    def __init__(self, actions: list[str]) -> None:
        self.actions = actions

    def act(self, views):
        return [self.actions[len(view.turns)] for view in views]


def test_hidden_number_exact_predictive_in_transcript_mode_with_refused_actions():
    # seed 0 hides 7 in 1 .. 10; guess 5 (higher), two refused actions, guess 8 (lower)
    kwargs = {"n": 10, "max_turns": 4, "observation": "transcript"}
    actions = ["guess(5)", "guess(99)", "hello", "guess(8)"]
    t = collect(ScriptedActions(actions), "hidden_number", group_size=1, group_seeds=[0], env_kwargs=kwargs,
                progress=False)[0]
    dists = exact_distributions("hidden_number", kwargs, [t])
    error = "invalid action . call guess(k) with k in 1 .. 10"
    # uniform prior over 1 .. 10: 6 .. 10 are higher than 5, 1 .. 4 lower
    assert dists[0] == pytest.approx({"guess 5 : higher": 0.5, "guess 5 : lower": 0.4, "guess 5 : correct": 0.1})
    assert dists[1] == {f"guess 5 : higher\n{error}": 1.0}  # a refused action's text is certain
    assert dists[2] == {f"guess 5 : higher\n{error}": 1.0}
    # 6 .. 10 remain: 9 and 10 are higher than 8, 6 and 7 lower; the error lines are not kept
    assert dists[3] == pytest.approx({"guess 5 : higher\nguess 8 : higher": 0.4,
                                      "guess 5 : higher\nguess 8 : lower": 0.4,
                                      "guess 5 : higher\nguess 8 : correct": 0.2})
    assert t.turns[3].next_observation == "guess 5 : higher\nguess 8 : lower"
