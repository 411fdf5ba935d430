"""experiments.reuse_critic: the lookahead choice rule on fakes, and a tiny end-to-end run in a subprocess."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from envs import make
from envs.agent import AgentView
from experiments import reuse_critic as reuse
from world_model import WorldState

REPO = Path(__file__).resolve().parents[2]


class FixedProposer:
    def __init__(self, candidates):
        self.candidates = candidates

    def propose(self, views):
        return [list(c) for c in self.candidates]


class FakeWorldModel:
    """Imagines ``good`` after the view's good action, ``bad`` otherwise; reward and done as given per action."""

    def __init__(self, good, reward=None, done=None):
        self.good, self.reward, self.done = good, reward or {}, done or {}
        self.observed = []

    def initial_state(self, observations):
        return WorldState(torch.zeros(len(observations), 1), tuple(observations))

    def observe(self, states, actions, observations):
        self.observed.append(list(actions))
        return WorldState(states.latent + 1, tuple(observations))

    def step(self, states, actions, *, generator, greedy=False):
        rows = states.latent[:, 0].long().tolist()  # the view index, planted in the latent below
        observations = ["good" if a == self.good[r] else "bad" for r, a in zip(rows, actions, strict=True)]
        predictions = SimpleNamespace(
            observations=observations,
            reward=torch.tensor([self.reward.get(a, 0.0) for a in actions]),
            done_probability=torch.tensor([self.done.get(a, 0.0) for a in actions]),
        )
        return states, predictions


class FakeCritic:
    def __init__(self, sign):
        self.sign = sign

    def value(self, histories):
        return torch.tensor([self.sign * (1.0 if h[-1]["content"] == "good" else 0.0) for h in histories])


def views(n):
    env = make("hidden_number")
    return [AgentView(env=env, turns=[], observation=env.reset(i)) for i in range(n)]


@pytest.fixture
def indexed_states(monkeypatch):
    # Plant each view's index in its latent, so the fake world model knows which view a row belongs to.
    monkeypatch.setattr(reuse, "world_states",
                        lambda wm, vs: WorldState(torch.arange(len(vs)).float()[:, None], tuple("x" for _ in vs)))


def test_the_candidate_the_critic_values_highest_is_chosen(indexed_states):
    candidates = [["guess(1)", "guess(3)", "guess(5)"], ["guess(2)", "guess(4)", "guess(6)"]]
    wm = FakeWorldModel(good=["guess(3)", "guess(6)"])
    agent = reuse.LookaheadAgent(FixedProposer(candidates), wm, FakeCritic(+1.0), gamma=0.9, samples=2)
    assert agent.act(views(2)) == ["guess(3)", "guess(6)"]
    assert torch.allclose(agent.scores(views(2), candidates), torch.tensor([[0.0, 0.9, 0.0], [0.0, 0.0, 0.9]]))
    # The sign flipped: the good outcome is now the worst, and ties go to the earliest candidate.
    flipped = reuse.LookaheadAgent(FixedProposer(candidates), wm, FakeCritic(-1.0), gamma=0.9, samples=2)
    assert flipped.act(views(2)) == ["guess(1)", "guess(2)"]
    # The baseline plays the first proposal whatever the models say.
    assert reuse.FirstCandidateAgent(FixedProposer(candidates)).act(views(2)) == ["guess(1)", "guess(2)"]


def test_reward_and_done_enter_the_score(indexed_states):
    candidates = [["guess(1)", "guess(3)", "guess(5)"]]
    # guess(1): reward 0.5 and surely done (its good-looking next state is worth nothing);
    # guess(3): no reward, leads to the good state (V = 1): 0.9 * 1 = 0.9 wins over 0.5.
    wm = FakeWorldModel(good=["guess(1)"], reward={"guess(1)": 0.5}, done={"guess(1)": 1.0})
    agent = reuse.LookaheadAgent(FixedProposer(candidates), wm, FakeCritic(+1.0), gamma=0.9, samples=1)
    assert torch.allclose(agent.scores(views(1), candidates), torch.tensor([[0.5, 0.0, 0.0]]))
    wm.good = ["guess(3)"]
    assert agent.act(views(1)) == ["guess(3)"]
    # gamma 0 ranks by the predicted reward alone.
    greedy = reuse.LookaheadAgent(FixedProposer(candidates), wm, FakeCritic(+1.0), gamma=0.0, samples=1)
    assert greedy.act(views(1)) == ["guess(1)"]


def test_lookahead_scores_by_hand():
    # r 0.5, p_done 0.5, V 1, gamma 0.9: 0.5 + 0.9 * 0.5 * 1 = 0.95; second sample 0 + 0.9 * 1 * 0 = 0.
    scores = reuse.lookahead_scores(torch.tensor([[[0.5, 0.0]]]), torch.tensor([[[0.5, 0.0]]]),
                                    torch.tensor([[[1.0, 0.0]]]), 0.9)
    assert torch.allclose(scores, torch.tensor([[0.475]]))
    assert reuse.choose(torch.tensor([[0.1, 0.3, 0.3], [2.0, -1.0, 0.0]])) == [1, 0]


def test_world_states_fold_the_real_history():
    env = make("hidden_number")
    obs = env.reset(0)
    first = AgentView(env=env, turns=[], observation=obs)
    from envs.trajectory import Turn

    turn = Turn(observation=obs, action="guess(8)", next_observation="guess 8 : higher", reward=0.0, done=False,
                valid=True, anchor_observation=obs)
    second = AgentView(env=env, turns=[turn], observation="guess 8 : higher")
    wm = FakeWorldModel(good=[])
    state = reuse.world_states(wm, [second, first, second])
    assert state.latent[:, 0].tolist() == [1.0, 0.0, 1.0]  # one observe for the views with one turn
    assert wm.observed == [["guess(8)", "guess(8)"]]
    assert reuse.messages(second) == [
        {"role": "user", "content": obs},
        {"role": "assistant", "content": "guess(8)"},
        {"role": "tool", "content": "guess 8 : higher"},
    ]


@pytest.mark.slow
def test_tiny_fit_save_load_and_evaluate_end_to_end(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = tmp_path / "models"
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.reuse_critic", "--fit", "--out", str(out), "--train-episodes", "9", "--critic-episodes", "6",
         "--wm-steps", "2", "--critic-steps", "2", "--episodes", "4", "--candidates", "2", "--samples", "2",
         "--latent-size", "16", "--members", "2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("config.json", "model.safetensors"):
        assert (out / "models" / "critic" / name).is_file() and (out / "models" / "world_model" / name).is_file()
    lines = proc.stdout.splitlines()
    assert any(line.startswith("first ") for line in lines) and any(line.startswith("lookahead ") for line in lines)
    assert "lookahead - first:" in proc.stdout

    # The saved folders load back through the public API alone (no --fit).
    scores = reuse.main(["--critic", str(out / "models" / "critic"), "--world-model", str(out / "models" / "world_model"),
                         "--episodes", "3", "--candidates", "2", "--samples", "1"])
    assert [s.agent for s in scores] == ["first", "lookahead"] and all(len(s.successes) == 3 for s in scores)
