"""LatentCritic: the seam, chat histories, incremental use, seeding, saving and loading, fitting."""

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from critic.base import CriticStates, TurnCritic
from critic.history_text import HistoryText, from_messages, from_trajectory
from critic.latent_critic import LatentCritic, LatentCriticConfig
from envs import collect
from envs.agent import RandomAgent
from envs.chat import chat_record_to_trajectory, trajectory_to_messages
from envs.trajectory import Trajectory
from world_model.turn_tokens import TurnTokenizer

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = TurnTokenizer.for_env("hidden_number")
CONFIG = LatentCriticConfig.for_tokenizer(TOKENIZER, latent_size=16, head_hidden_size=16, embed_size=16,
                                          feature_size=16)


@pytest.fixture(scope="module")
def critic() -> LatentCritic:
    return LatentCritic(CONFIG, TOKENIZER, seed=0).eval()


@pytest.fixture(scope="module")
def trajectories() -> list[Trajectory]:
    # Random guesses: episodes of different lengths, some cut off (truncated) at 3 turns.
    return collect(RandomAgent(seed=1), "hidden_number", group_size=3, n_groups=2, seed=0, max_turns=3,
                   progress=False)


def all_states(trajectories: list[Trajectory]) -> list[tuple[Trajectory, int]]:
    """Every state of every trajectory, k = num_turns (after the last turn) included."""
    return [(t, k) for t in trajectories for k in range(t.num_turns + 1)]


def critic_states(histories: list[tuple[Trajectory, int]]) -> CriticStates:
    ones = torch.ones(len(histories), 1, dtype=torch.long)  # prompt ids: the latent critic ignores them
    return CriticStates(ones, ones, histories)


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_forward_equals_chat_values_equals_incremental_steps(critic, trajectories):
    states = all_states(trajectories)
    assert any(t.truncated for t in trajectories) and any(not t.truncated for t in trajectories)
    with torch.no_grad():
        values = critic(critic_states(states))
    assert values.shape == (len(states),) and values.dtype == torch.float32
    # The same states as chat messages: the first observation, then k (action, tool result) pairs.
    chats = critic.value([trajectory_to_messages(t)[: 1 + 2 * k] for t, k in states])
    assert torch.allclose(values, chats, atol=1e-5)
    # And folded one turn at a time.
    incremental = []
    for trajectory in trajectories:
        state = critic.initial_state(trajectory.turns[0].observation)
        incremental.append(critic.state_value(state))
        for turn in trajectory.turns:
            state, value = critic.step(state, turn.action, turn.next_observation)
            incremental.append(value)
    assert torch.allclose(values, torch.tensor(incremental), atol=1e-5)
    assert values.std() > 0  # the values do depend on the history


def test_a_states_value_does_not_depend_on_its_batch(critic, trajectories):
    states = all_states(trajectories)
    with torch.no_grad():
        together = critic(critic_states(states))
        alone = torch.cat([critic(critic_states([s])) for s in reversed(states)]).flip(0)
    assert torch.allclose(together, alone, atol=1e-5)


def test_forward_ignores_the_prompt_and_needs_histories(critic, trajectories):
    states = all_states(trajectories)[:3]
    other = CriticStates(torch.randint(0, 9, (3, 5)), torch.ones(3, 5, dtype=torch.long), states)
    with torch.no_grad():
        assert torch.equal(critic(other), critic(critic_states(states)))
    with pytest.raises(ValueError, match="reads CriticStates.histories, which is None"):
        critic(CriticStates(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)))


def test_forward_has_gradients_when_enabled(trajectories):
    model = LatentCritic(CONFIG, TOKENIZER, seed=1)
    model(critic_states(all_states(trajectories))).sum().backward()
    assert model.encoder.embed.tokens.weight.grad.abs().sum() > 0
    assert model.encoder.core.weight_hh.grad.abs().sum() > 0  # through the turns folded by the GRU


def test_conforms_to_the_turn_critic_seam(critic):
    assert isinstance(critic, nn.Module) and isinstance(critic, TurnCritic)
    assert list(inspect.signature(LatentCritic.forward).parameters) == ["self", "states"]


def test_a_differing_next_observation_is_part_of_the_history(critic):
    # Imported chats may show a second observation after the tool result; both sources keep it.
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "find the hidden number in 1 .. 16"},
                {"role": "assistant", "content": "guess(8)"}, {"role": "tool", "content": "guess 8 : higher"},
                {"role": "user", "content": "2 turns left"},
                {"role": "assistant", "content": "guess(12)"}, {"role": "tool", "content": "guess 12 : lower"}]
    trajectory = chat_record_to_trajectory({"messages": messages})
    assert from_trajectory(trajectory) == from_messages(messages) == HistoryText(
        "find the hidden number in 1 .. 16", ("guess(8)", "guess(12)"),
        ("guess 8 : higher\n2 turns left", "guess 12 : lower"))
    assert from_trajectory(trajectory, 1) == from_messages(messages[:5])
    with torch.no_grad():
        seam = critic(critic_states([(trajectory, 1), (trajectory, 2)]))
    assert torch.allclose(seam, critic.value([messages[:5], messages]), atol=1e-5)


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([], "no observation message"),
        ([{"role": "assistant", "content": "guess(3)"}], "starts with an action"),
        ([{"role": "user", "content": "o"}, {"role": "assistant", "content": "a"}], "ends with an action"),
        ([{"role": "user", "content": "o"}, {"role": "assistant", "content": "a"},
          {"role": "assistant", "content": "b"}, {"role": "tool", "content": "r"}], "two assistant messages"),
        ([{"role": "user", "content": "o"}, {"role": "robot", "content": "a"}], "role 'robot'"),
        ([{"role": "user", "content": 3}], "string 'content'"),
    ],
)
def test_bad_chat_histories_are_named(critic, messages, error):
    good = [{"role": "user", "content": "find the hidden number"}]
    with pytest.raises(ValueError, match=f"histories\\[1\\]: .*{error}"):
        critic.value([good, messages])


def test_initialisation_depends_on_the_seed_only():
    torch.manual_seed(123)
    first = weights(LatentCritic(CONFIG, TOKENIZER, seed=7))
    torch.rand(1000)  # move the global RNG: the critic must not notice
    before = torch.get_rng_state()
    second = weights(LatentCritic(CONFIG, TOKENIZER, seed=7))
    assert torch.equal(torch.get_rng_state(), before)
    assert same_weights(first, second)
    assert not same_weights(first, weights(LatentCritic(CONFIG, TOKENIZER, seed=8)))


@pytest.mark.slow
def test_save_and_load_round_trip_without_the_training_stack(tmp_path, trajectories):
    model = LatentCritic(CONFIG, TOKENIZER, seed=5)
    model.save_pretrained(tmp_path)
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert {"model.safetensors", "config.json", "tokenizer/tokenizer.json"} <= files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    loaded = LatentCritic.from_pretrained(tmp_path)
    assert loaded.config == CONFIG and not loaded.training
    assert same_weights(weights(loaded), weights(model))
    histories = [trajectory_to_messages(t) for t in trajectories]
    with torch.no_grad():
        assert torch.equal(loaded.value(histories), model.value(histories))
    # A fresh process loads it with neither Hydra nor the training stack, and gets the same values.
    script = (
        "import json, sys\n"
        "from critic.latent_critic import LatentCritic\n"
        f"critic = LatentCritic.from_pretrained({str(tmp_path)!r})\n"
        f"print(json.dumps(critic.value(json.loads({json.dumps(json.dumps(histories))})).tolist()))\n"
        "heavy = [m for m in ('hydra', 'lightning', 'policy', 'experiments') if m in sys.modules]\n"
        "print(json.dumps(heavy))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    values, heavy = (json.loads(line) for line in out.stdout.strip().splitlines()[-2:])
    assert heavy == []
    assert values == pytest.approx(model.value(histories).tolist(), abs=1e-6)  # other threads, other sums


@pytest.fixture()
def saved(tmp_path) -> Path:
    LatentCritic(CONFIG, TOKENIZER, seed=2).save_pretrained(tmp_path)
    return tmp_path


def test_truncated_weights_are_refused_by_name(saved):
    weights_file = saved / "model.safetensors"
    weights_file.write_bytes(weights_file.read_bytes()[:-100])
    with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file"):
        LatentCritic.from_pretrained(saved)


def test_a_pickle_only_folder_is_refused_and_never_unpickled(saved, monkeypatch):
    torch.save(LatentCritic(CONFIG, TOKENIZER).state_dict(), saved / "pytorch_model.bin")
    (saved / "model.safetensors").unlink()

    def no_unpickling(*args, **kwargs):
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", no_unpickling)
    with pytest.raises(FileNotFoundError, match="model.safetensors not found; \\['pytorch_model.bin'\\] are pickle"):
        LatentCritic.from_pretrained(saved)


def test_a_pickle_under_the_safetensors_name_is_not_unpickled(saved, monkeypatch):
    torch.save({"x": torch.ones(2)}, saved / "model.safetensors")
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file"):
        LatentCritic.from_pretrained(saved)


def test_mismatched_or_missing_files_are_named(saved, tmp_path_factory):
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        LatentCritic.from_pretrained(saved / "nowhere")
    # Weights of another shape than config.json says.
    other = LatentCritic(LatentCriticConfig.for_tokenizer(TOKENIZER, latent_size=8), TOKENIZER)
    save_file({k: v.contiguous() for k, v in other.state_dict().items()}, str(saved / "model.safetensors"))
    with pytest.raises(ValueError, match="model.safetensors does not match .*config.json: .*wrong shape"):
        LatentCritic.from_pretrained(saved)
    # A config.json that is not a LatentCriticConfig.
    config = json.loads((saved / "config.json").read_text())
    (saved / "config.json").write_text(json.dumps({**config, "head_hidden": 3}))
    with pytest.raises(ValueError, match="config.json is not a LatentCriticConfig: unknown LatentCriticConfig keys \\['head_hidden'\\]"):
        LatentCritic.from_pretrained(saved)
    (saved / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not a LatentCriticConfig"):
        LatentCritic.from_pretrained(saved)
    (saved / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json not found"):
        LatentCritic.from_pretrained(saved)
    # No tokenizer next to the weights.
    bare = tmp_path_factory.mktemp("bare")
    LatentCritic(CONFIG, TOKENIZER).save_pretrained(bare)
    (bare / "tokenizer" / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer.json not found"):
        LatentCritic.from_pretrained(bare)


def test_config_names_the_bad_field():
    fields = {"latent_size": 16, "embed_size": 16, "feature_size": 16, "vocab_size": 43, "max_observation_words": 21,
              "max_action_words": 8}
    with pytest.raises(ValueError, match="LatentCriticConfig.head_hidden_size must be an integer >= 0"):
        LatentCriticConfig(**fields, head_hidden_size=-1)
    with pytest.raises(ValueError, match="LatentCriticConfig.max_action_words"):
        LatentCriticConfig(**{**fields, "max_action_words": 0})
    with pytest.raises(ValueError, match="LatentCriticConfig.latent_size must be an integer >= 1"):
        LatentCriticConfig.for_tokenizer(TOKENIZER, latent_size=0)
    with pytest.raises(TypeError, match="vocab_size"):  # a size that only the tokenizer gives is required
        LatentCriticConfig(**{k: v for k, v in fields.items() if k != "vocab_size"})
    with pytest.raises(ValueError, match="vocab_size is 99"):
        LatentCritic(LatentCriticConfig(**{**fields, "vocab_size": 99}), TOKENIZER)


def test_a_few_steps_reduce_a_value_regression_loss(trajectories):
    # A tiny fixed set: every state, with its return to go as the target.
    states = all_states(trajectories)
    targets = torch.tensor([sum(turn.reward for turn in t.turns[k:]) + 0.5 * k for t, k in states])
    model = LatentCritic(CONFIG, TOKENIZER, seed=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch = critic_states(states)
    losses = []
    for _ in range(30):
        loss = (model(batch) - targets).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses


def test_the_run_configs_latent_options_are_checked_by_name():
    from critic.config import CRITICS, CriticConfig, LatentCriticSection

    assert "latent" in CRITICS
    config = LatentCriticConfig.from_section(TOKENIZER, CriticConfig(name="latent").latent)
    assert config == LatentCriticConfig.for_tokenizer(TOKENIZER, latent_size=64, head_hidden_size=64, embed_size=32,
                                                      feature_size=64, conv_layers=2)
    for key, value, rule in (("latent_size", 0, ">= 1"), ("conv_layers", -1, ">= 0"),
                             ("head_hidden_size", -1, ">= 0"), ("max_action_words", 0, ">= 1 or null")):
        with pytest.raises(ValueError, match=f"critic.latent.{key} must be an integer {rule}"):
            CriticConfig(name="latent", latent={key: value})
        with pytest.raises(ValueError, match=f"critic.latent.{key} must be an integer {rule}"):
            LatentCriticSection(**{key: value})
