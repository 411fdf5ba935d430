"""``reverie/Dream-v0``: a saved world model as a gymnasium env (``imagination.gym_dream``).

Most tests use a tiny untrained model saved to a folder (its text is noise, which is enough for
the API, seeding and info); the tests marked slow fit one on real episodes first, or run a
subprocess.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import random
import re
import subprocess
import sys

import pytest
import tomllib

from envs import ExpertAgent, collect
from envs.registry import make
from envs.splits import TRAIN_SEEDS, is_eval_task
from envs.store import TrajectoryStore
from imagination.branching import branchable_turns
from tests.world_model.conftest import Clumsy
from world_model import TurnTokenizer, WorldModel, WorldModelConfig
from world_model.lightning_module import fit_world_model

from .conftest import tiny_model

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from imagination import gym_dream  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
# What the real hidden_number env answers any malformed action with (n = 16), and the same text as
# the word tokenizer renders it: one space between pieces, "(k)" and ".." split.
HN_ERROR = "invalid action . call guess(k) with k in 1 .. 16"
HN_ERROR_RENDERED = "invalid action . call guess ( k ) with k in 1 . . 16"
MALFORMED = ["please guess(3)", "hello", "é", "guess(", "hello " * 40]


def saved(model, folder: pathlib.Path) -> str:
    model.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """env name -> folder of a tiny untrained world model saved for it."""
    root = tmp_path_factory.mktemp("dream_models")
    return {name: saved(tiny_model(name), root / name) for name in ("hidden_number", "frozen_lake")}


def dream(folder: str, env: str = "hidden_number", **kwargs):
    return gymnasium.make(f"imagination.gym_dream:{gym_dream.ENV_ID}", world_model=folder, env=env, **kwargs)


def episode(env, seed: int, actions: list[str]) -> list[tuple]:
    """The reset observation, then (observation, reward, terminated, truncated) per action until the end."""
    observation, info = env.reset(seed=seed)
    steps: list[tuple] = [(observation, info["env_seed"])]
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        steps.append((observation, reward, terminated, truncated))
        if terminated or truncated:
            break
    return steps


# --- the gymnasium API ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hidden_number", "frozen_lake"])
def test_check_env_passes(folders, name):
    check_env(dream(folders[name], name).unwrapped)


@pytest.mark.parametrize("name", ["hidden_number", "frozen_lake"])
def test_real_texts_lie_in_the_observation_space(folders, name):
    """A reset shows the real env's text: the space must hold every real observation, not only the
    model's (here: the real env's answers to random play over several seeds)."""
    space = dream(folders[name], name).observation_space
    real = make(name)
    rng = random.Random(0)
    for seed in range(8):
        texts = [real.reset(seed)]
        for _ in range(real.max_turns):
            result = real.step(real.random_action(rng))
            texts.append(result.observation)
            if result.done:
                break
        assert all(space.contains(text) for text in texts), [t for t in texts if not space.contains(t)]


# --- seeding -----------------------------------------------------------------------------------------
def test_the_same_seed_gives_the_same_episode(folders):
    env = dream(folders["hidden_number"])
    actions = ["guess(8)", "guess(4)", "guess(12)", "guess(2)"]
    first = episode(env, 7, actions)
    episode(env, 99, actions)  # something else in between
    assert episode(env, 7, actions) == first
    assert episode(dream(folders["hidden_number"]), 7, actions) == first  # a fresh env too


def test_different_seeds_give_different_episodes(folders):
    env = dream(folders["hidden_number"])
    actions = ["guess(8)", "guess(4)", "guess(12)"]
    episodes = [episode(env, seed, actions) for seed in range(5)]
    # hidden_number's first observation is the same for every task: the sampled answers must differ
    assert len({tuple(steps[1:]) for steps in episodes}) == 5
    assert len({steps[0][1] for steps in episodes}) == 5  # and the drawn env seeds


def test_resets_draw_training_tasks_only(folders):
    """The drawn env seed is in the training range and, where the env has tasks, its task is not
    held out (frozen_lake's random maps: sha256 of the map in the lowest 20% is an eval task)."""
    env = dream(folders["frozen_lake"], "frozen_lake", env_kwargs={"size": 3})
    real = make("frozen_lake", size=3)
    for seed in range(30):
        observation, info = env.reset(seed=seed)
        assert info["env_seed"] in TRAIN_SEEDS
        assert real.reset(info["env_seed"]) == observation
        assert not is_eval_task(real.task_key())


def test_an_env_seed_option_starts_from_that_real_seed(folders):
    env = dream(folders["frozen_lake"], "frozen_lake", env_kwargs={"size": 3})
    observation, info = env.reset(seed=0, options={"env_seed": 2**31 + 5})
    assert observation == make("frozen_lake", size=3).reset(2**31 + 5) and info["env_seed"] == 2**31 + 5
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(seed=0, options={"seed": 3})


def test_a_sync_vector_env_seeds_its_envs_seed_plus_index(folders):
    """gymnasium's rule for ``make_vec(...).reset(seed=s)``: env i is reset with seed ``s + i``."""
    vector = gymnasium.make_vec(f"imagination.gym_dream:{gym_dream.ENV_ID}", num_envs=2, vectorization_mode="sync",
                                world_model=folders["hidden_number"], env="hidden_number")  # fmt: skip
    observations, _ = vector.reset(seed=10)
    answers, rewards, *_ = vector.step(("guess(8)", "guess(8)"))
    assert answers[0] != answers[1]  # one intro, one action: only the seeds tell the two apart
    for i in range(2):
        single = dream(folders["hidden_number"])
        assert single.reset(seed=10 + i)[0] == observations[i]
        observation, reward, *_ = single.step("guess(8)")
        assert (observation, reward) == (answers[i], rewards[i])


# --- actions and info --------------------------------------------------------------------------------
@pytest.mark.parametrize("action", MALFORMED)
def test_a_malformed_action_is_answered_not_raised(folders, action):
    env = dream(folders["hidden_number"])
    env.reset(seed=0)
    real = make("hidden_number")
    real.reset(0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert info["valid"] is False is real.step(action).info["valid"]
    assert env.observation_space.contains(observation)
    assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool)


def test_a_non_text_action_raises_a_type_error(folders):
    env = dream(folders["hidden_number"])
    env.reset(seed=0)
    with pytest.raises(TypeError, match="text"):
        env.step(3)


def test_info_carries_the_disagreement_and_the_halt(folders, patch_steps):
    """The model's step is fixed to a disagreement of 0.75 (float32 0.75 is exact)."""
    cases = {  # halt_uncertainty, max_turns -> (truncated, halted, would_halt, terminated)
        (0.5, 6): (True, True, True, False),
        (0.9, 6): (False, False, False, False),
        (0.5, 1): (False, False, True, True),  # the turn budget ends it done; it would still halt
        (None, 6): (False, False, False, False),
    }
    for (threshold, max_turns), expected in cases.items():
        env = dream(folders["hidden_number"], env_kwargs={"max_turns": max_turns}, halt_uncertainty=threshold)
        patch_steps(env.unwrapped.model, uncertainty=0.75)
        env.reset(seed=0)
        _, _, terminated, truncated, info = env.step("guess(8)")
        assert info["uncertainty"] == 0.75
        assert (truncated, info["halted"], info["would_halt"], terminated) == expected, (threshold, max_turns)


def test_reward_and_done_follow_the_text_rule_not_the_heads(folders, patch_steps):
    """hidden_number's rule, by hand: reward 1 and the end iff the last line is ``guess k : correct``;
    the heads say reward 0.25 and done every turn, and must be ignored."""
    env = dream(folders["hidden_number"], env_kwargs={"max_turns": 20})
    patch_steps(env.unwrapped.model, reward=0.25, done=True)
    for seed in range(3):
        env.reset(seed=seed)
        observation, reward, terminated, _, info = env.step("guess(8)")
        correct = re.fullmatch(r"guess \d+ : correct", observation.split("\n")[-1]) is not None
        assert (reward, terminated) == (float(correct), correct) and info["model_reward"] == 0.25


def test_an_env_without_a_rule_reads_the_heads(folders, patch_steps, model_outcomes):
    env = dream(folders["hidden_number"])
    patch_steps(env.unwrapped.model, reward=0.25, done=True)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("guess(8)")
    assert (reward, terminated, truncated, info["outcome_from"]) == (0.25, True, False, "model")


# --- starts from a store -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store_and_episodes(tmp_path_factory):
    episodes = collect(ExpertAgent(), "hidden_number", group_size=1, n_groups=4, seed=0, progress=False)
    store = TrajectoryStore(tmp_path_factory.mktemp("store"))
    store.append(episodes)
    return store, episodes


def test_store_starts_are_recorded_real_states(folders, store_and_episodes):
    store, episodes = store_and_episodes
    by_id = {t.trajectory_id: t for t in episodes}
    env = dream(folders["hidden_number"], store=store.path)
    starts = set()
    for seed in range(40):
        observation, info = env.reset(seed=seed)
        recorded = by_id[info["trajectory_id"]]
        k = info["start_turn"]
        assert k in [0, *branchable_turns(recorded)]
        assert observation == (recorded.turns[k - 1].next_observation if k else recorded.turns[0].observation)
        starts.add((recorded.trajectory_id, k))
    assert len({t for t, _ in starts}) == 4 and len({k for _, k in starts}) > 1


def test_check_env_passes_with_starts_from_a_store(folders, store_and_episodes):
    store, _ = store_and_episodes
    check_env(dream(folders["hidden_number"], store=store.path).unwrapped)


def test_a_trajectory_option_starts_after_that_turn(folders, store_and_episodes):
    store, episodes = store_and_episodes
    recorded = next(t for t in episodes if t.num_turns >= 3)
    env = dream(folders["hidden_number"], store=store)
    observation, info = env.reset(seed=0, options={"trajectory_id": recorded.trajectory_id, "turn": 2})
    assert observation == recorded.turns[1].next_observation
    assert (info["trajectory_id"], info["start_turn"]) == (recorded.trajectory_id, 2)


# --- registration ------------------------------------------------------------------------------------
def declared_entry_points() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project.get("entry-points", {}).get("gymnasium.envs", {})


def test_the_declared_entry_point_registers_the_env():
    """As gymnasium's plugin loader (before 1.0) does: load each ``gymnasium.envs`` entry point and
    call it inside the namespace named by the entry point."""
    declared = declared_entry_points()
    assert declared == {"reverie": "imagination.gym_dream:register_envs"}
    registry = gymnasium.envs.registration.registry
    saved_spec = registry.pop(gym_dream.ENV_ID)
    try:
        for name, value in declared.items():
            register = importlib.metadata.EntryPoint(name, value, "gymnasium.envs").load()
            with gymnasium.envs.registration.namespace(name):
                register()
        assert registry[gym_dream.ENV_ID].entry_point == "imagination.gym_dream:DreamGymEnv"
    finally:
        registry[gym_dream.ENV_ID] = saved_spec


SUBPROCESS = """
import sys
import gymnasium
assert not {{"envs", "world_model", "imagination"}} & {{m.split(".")[0] for m in sys.modules}}
env = gymnasium.make({env_id!r}, world_model={folder!r}, env="hidden_number")
observation, info = env.reset(seed=3)
print(type(env.unwrapped).__name__, observation)
"""


def run_without_reverie_import(env_id: str, folder: str) -> subprocess.CompletedProcess:
    code = SUBPROCESS.format(env_id=env_id, folder=folder)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=300)


@pytest.mark.slow
def test_gymnasium_make_imports_the_module_itself(folders):
    """gymnasium 1.x: ``module:env_id`` makes gymnasium import the registering module."""
    done = run_without_reverie_import(f"imagination.gym_dream:{gym_dream.ENV_ID}", folders["hidden_number"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("DreamGymEnv find the hidden number in 1 .. 16")


@pytest.mark.slow
def test_gymnasium_make_finds_the_env_through_the_installed_entry_point(folders):
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="gymnasium.envs")}
    if installed.get("reverie") != "imagination.gym_dream:register_envs":
        pytest.skip(
            "the installed reverie distribution declares no gymnasium.envs entry point: it was installed "
            "from a checkout without it (pip install -e . from this one adds it)"
        )
    if not hasattr(gymnasium.envs.registration, "load_plugin_envs"):
        pytest.skip(f"gymnasium {gymnasium.__version__} loads no plugin entry points (removed in 1.0)")
    done = run_without_reverie_import(gym_dream.ENV_ID, folders["hidden_number"])
    assert done.returncode == 0, done.stderr


# --- a fitted model ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted_folder(tmp_path_factory, hn_trajectories_with_errors):
    sizes = {
        "latent_size": 16,
        "num_members": 2,
        "encoder": {"embed_size": 16, "feature_size": 32, "conv_layers": 1},
        "decoder": {"model_size": 32, "num_layers": 1, "num_heads": 2, "latent_slots": 2},
        "head_hidden": 16,
    }
    tokenizer = TurnTokenizer.for_env("hidden_number")
    model = WorldModel(WorldModelConfig.for_tokenizer(tokenizer, **sizes), tokenizer, seed=0)
    fit_world_model(hn_trajectories_with_errors, [], model, max_steps=60, batch_size=16, lr=5e-3, seed=0,
                    score_train=False)  # fmt: skip
    return saved(model, tmp_path_factory.mktemp("fitted") / "world_model")


@pytest.fixture(scope="module")
def hn_trajectories_with_errors():
    """Random guesses with a malformed action 30% of the time, so the model sees the error text."""
    return collect(Clumsy(0), "hidden_number", group_size=1, n_groups=40, seed=0, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("action", [a for a in MALFORMED if a != "guess("])  # too near a guess for 60 steps
def test_a_fitted_model_answers_a_malformed_action_with_the_env_error(fitted_folder, action):
    real = make("hidden_number")
    real.reset(0)
    assert real.step(action).observation == HN_ERROR
    env = dream(fitted_folder, greedy=True)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation == HN_ERROR_RENDERED
    assert (reward, terminated, truncated, info["valid"]) == (0.0, False, False, False)


# --- the docs' example -----------------------------------------------------------------------------------
def test_the_docs_loop_runs_in_the_dream_and_the_real_env(folders, capsys):
    """The one python block of docs/dream_gym.md, with a tiny saved model as its world model."""
    page = (ROOT / "docs" / "dream_gym.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) == 1
    line = 'WORLD_MODEL = "outputs/models/world_model"  # a saved world model\'s folder'
    assert line in blocks[0]
    exec(blocks[0].replace(line, f"WORLD_MODEL = {folders['hidden_number']!r}"), {"__name__": "doc_example"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("dream: return ") and printed[1].startswith("real: return ")
    # the bisecting agent finds the number in the real env within its 6 turns: return 1
    assert printed[1].startswith("real: return 1.0, ")


@pytest.mark.slow
def test_the_library_imports_without_gymnasium():
    """gymnasium is an optional extra: with it made unimportable, every package still imports."""
    code = (
        "import sys\n"
        "sys.modules['gymnasium'] = None  # import gymnasium now raises ImportError\n"
        "import envs, world_model, critic, policy, imagination, experiments\n"
        "print('ok')\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


# --- through Reverie's own gymnasium adapter (env=gym_text) ---------------------------------------
def adapter_kwargs(folder: str, **extra) -> dict:
    """``env.kwargs`` of ``env=gym_text`` pointed at the dream (docs/dream_gym.md)."""
    return {"entry_point": "gymnasium:make",
            "kwargs": {"id": f"imagination.gym_dream:{gym_dream.ENV_ID}", "world_model": folder,
                       "env": "hidden_number", **extra}}


def test_the_gym_text_adapter_plays_the_dream_as_gymnasium_make_does(folders):
    actions = ["guess(8)", "guess(4)", "hello", "guess(2)", "guess(1)", "guess(3)"]
    direct = episode(dream(folders["hidden_number"]), 5, actions)
    adapter = make("gym_text", **adapter_kwargs(folders["hidden_number"]))
    through = [adapter.reset(5)]
    for action in actions[:len(direct) - 1]:
        result = adapter.step(action)
        through.append((result.observation, result.reward))
    assert through == [direct[0][0], *((obs, reward) for obs, reward, _, _ in direct[1:])]
    assert result.done or result.info["truncated"]  # the dream's episode end is the adapter's


def test_a_dream_option_the_adapter_cannot_pass_is_refused_naming_the_key(folders):
    with pytest.raises(ValueError, match=r"^env.kwargs.kwargs: gymnasium:make refused .*unexpected keyword argument 'horizn'"):
        make("gym_text", **adapter_kwargs(folders["hidden_number"], horizn=3))
