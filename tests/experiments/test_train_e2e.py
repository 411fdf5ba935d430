"""End-to-end smoke runs of ``python -m experiments.train`` in a subprocess, with tiny budgets.

Most of each run's wall time is importing torch / transformers / lightning (~5-15 s on shared
cores); the training itself (warm start, 2 iterations, evaluations) takes a few seconds. So the
four algorithms without a dedicated test share one Hydra multirun process, and the two runs of
the reproducibility test run side by side.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "env=hidden_number",
    "trainer.iterations=2",
    "trainer.groups_per_iteration=2",
    "trainer.group_size=4",
    "trainer.eval_episodes=8",
    "trainer.eval_every=1",
    "trainer.warm_start.max_steps=5",
    "trainer.warm_start.expert_episodes=16",
    "trainer.warm_start.eval_every=5",
    "trainer.warm_start.eval_episodes=8",
    "trainer.progress=false",
    "policy.hidden_size=32",
    "policy.num_layers=1",
    "policy.num_heads=2",
    "policy.intermediate_size=64",
]
EPISODES_PER_ITERATION = 2 * 4  # groups_per_iteration * group_size
HIDDEN_NUMBER_MAX_TURNS = 6  # the env's default turn cap
TIMING_KEYS = ("charts/elapsed_s",)  # plus every time/* key
TIMEOUT_S = 600


def start_train(*overrides: str, hash_seed: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("HYDRA_FULL_ERROR", None)
    env.pop("PYTHONHASHSEED", None)
    if hash_seed is not None:  # different string-hash seeds expose any set/dict-order dependence
        env["PYTHONHASHSEED"] = hash_seed
    return subprocess.Popen([sys.executable, "-m", "experiments.train", *overrides], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_train(*overrides: str, **kwargs) -> subprocess.CompletedProcess:
    return finish(start_train(*overrides, **kwargs))


def assert_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\n--- stderr tail ---\n{result.stderr[-4000:]}"


def read_records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def check_run_dir(run_dir: Path, algo: str) -> list[dict]:
    """The artefacts every finished run leaves, and the shape of its metrics. Returns the records."""
    assert (run_dir / "done").is_file() and not (run_dir / "failed").exists()
    cfg = OmegaConf.load(run_dir / "config.yaml")
    assert cfg.algo.name == algo and cfg.env.name == "hidden_number" and cfg.seed == 0
    assert cfg.trainer.iterations == 2 and cfg.policy.hidden_size == 32 and cfg.policy.num_layers == 1

    records = read_records(run_dir)
    assert [r["iteration"] for r in records] == [0, 1, 2]
    steps = [r["charts/real_env_steps"] for r in records]
    assert steps[0] == 0
    for before, after in zip(steps, steps[1:], strict=False):
        # every iteration runs 8 episodes of 1 .. 6 turns each
        assert EPISODES_PER_ITERATION <= after - before <= EPISODES_PER_ITERATION * HIDDEN_NUMBER_MAX_TURNS
    for record in records:
        assert 0.0 <= record["eval/success_rate"] <= 1.0  # eval_every=1: evaluated at every iteration
    for record in records[1:]:
        for key in ("losses/policy_loss", "losses/entropy", "losses/approx_kl", "losses/grad_norm"):
            assert finite(record.get(key)), (key, record)
        assert 0.0 <= record["charts/success_rate"] <= 1.0
        if algo in ("ppo_turn", "ppo_token", "sppo"):
            assert finite(record.get("losses/value_loss")), record
        else:
            assert "losses/value_loss" not in record  # no critic is built for group baselines

    done = json.loads((run_dir / "done").read_text())
    assert done["algo"] == algo and done["iterations"] == 2 and done["real_env_steps"] == steps[-1]

    events = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)
    policy_dir = run_dir / "models" / "policy"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (policy_dir / name).is_file(), name
    assert json.loads((policy_dir / "config.json").read_text())["hidden_size"] == 32
    check_store(run_dir, steps[-1])
    return records


def check_store(run_dir: Path, real_env_steps: int) -> None:
    """Every real rollout of the run is in its store, with its iteration and policy version."""
    from envs.store import TrajectoryStore

    stored = TrajectoryStore(run_dir / "trajectories").load()
    assert sum(t.num_turns for t in stored) == real_env_steps
    assert len({t.trajectory_id for t in stored}) == len(stored)  # ids unique across the run
    assert {t.iteration for t in stored} == {1, 2}
    assert {t.policy_version for t in stored if t.iteration == 1} == {0}
    assert {t.policy_version for t in stored if t.iteration == 2} == {1}
    assert all(t.source == "real" for t in stored)


def check_tensorboard(run_dir: Path, records: list[dict]) -> None:
    """The event file holds the scalars of metrics.jsonl, against real env steps."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    for tag in ("losses/policy_loss", "eval/success_rate"):
        logged = [(e.step, e.value) for e in acc.Scalars(tag)]
        expected = [(r["charts/real_env_steps"], r[tag]) for r in records if tag in r]
        assert [s for s, _ in logged] == [s for s, _ in expected], tag
        assert all(v == pytest.approx(x, rel=1e-6, abs=1e-7) for (_, v), (_, x) in zip(logged, expected, strict=True))


def parameter_change(run_dir: Path) -> tuple[float, float]:
    """(||saved - init||, ||init - init of another seed||) over the policy's parameters.

    The initial weights are rebuilt as the run built them: the env's tokenizer, ``build_tiny_lm`` with
    the run's policy config and ``derive_seed(seed, "policy-init")``. Five cloning steps and two PPO
    updates keep the saved weights much closer to that init than a differently seeded init is (about
    0.15 of the distance here), so a wrong reconstruction could not pass as "changed".
    """
    from envs.registry import make
    from envs.seeding import derive_seed
    from policy.config import PolicyConfig
    from policy.model import build_tiny_lm, build_tiny_tokenizer

    cfg = OmegaConf.load(run_dir / "config.yaml")
    tokenizer = build_tiny_tokenizer(make(cfg.env.name, **cfg.env.kwargs).vocabulary())
    policy_cfg = PolicyConfig(**OmegaConf.to_container(cfg.policy, resolve=True))
    init_seed = derive_seed(cfg.seed, "policy-init")
    init = build_tiny_lm(policy_cfg, tokenizer, seed=init_seed).state_dict()
    other = build_tiny_lm(policy_cfg, tokenizer, seed=init_seed + 1).state_dict()
    saved = load_file(str(run_dir / "models" / "policy" / "model.safetensors"))
    assert saved and set(saved) <= set(init), sorted(set(saved) - set(init))
    moved = spread = 0.0
    for name, tensor in saved.items():
        assert tensor.shape == init[name].shape, name
        moved += (tensor.double() - init[name].double()).pow(2).sum().item()
        spread += (other[name].double() - init[name].double()).pow(2).sum().item()
    return math.sqrt(moved), math.sqrt(spread)


CASES = {
    # warm start on: behaviour cloning, then RL (rewards are often all equal here, so GiGPO's
    # advantages, and its gradients, may be exactly 0)
    "gigpo": [],
    # warm start off: any change of the weights comes from the PPO updates alone
    "ppo_turn": ["trainer.warm_start.enabled=false"],
}


@pytest.mark.parametrize("algo", list(CASES))
def test_train_run_end_to_end(tmp_path, algo):
    run_dir = tmp_path / "run"
    assert_ok(run_train(*TINY, f"algo={algo}", *CASES[algo], f"hydra.run.dir={run_dir}"))
    records = check_run_dir(run_dir, algo)
    check_tensorboard(run_dir, records)
    moved, spread = parameter_change(run_dir)
    print(f"{algo}: moved {moved:.4g}, spread {spread:.4g}")
    assert moved > 0.0, "the saved policy equals its initialisation"
    assert moved < 0.5 * spread, (moved, spread)  # it is the run's own init that moved
    if algo == "ppo_turn":  # the trained critic is saved next to the policy, reloadable on its own
        from critic import TokenCritic

        assert isinstance(TokenCritic.from_pretrained(run_dir / "models" / "critic"), TokenCritic)
    if algo == "ppo_turn":  # a critic's advantages are non-zero even when every reward is 0
        assert all(r["losses/grad_norm"] > 0 for r in records[1:])
    # Expert demonstrations are counted apart from the RL x-axis: 16 episodes of 1 .. 6 turns, or none.
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["real_env_steps"] == records[-1]["charts/real_env_steps"]
    if "trainer.warm_start.enabled=false" in CASES[algo]:
        assert summary["warm_start_env_steps"] == 0
    else:
        assert 16 <= summary["warm_start_env_steps"] <= 16 * HIDDEN_NUMBER_MAX_TURNS


def test_other_algorithms_run_in_one_sweep(tmp_path):
    algos = ["ppo_token", "sppo", "grpo", "drgrpo", "hgpo"]
    sweep = tmp_path / "sweep"
    result = run_train("-m", *TINY, f"algo={','.join(algos)}", f"hydra.sweep.dir={sweep}",
                       "hydra.sweep.subdir=${algo.name}")
    assert_ok(result)
    for algo in algos:
        check_run_dir(sweep / algo, algo)


def strip_timing(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/") and k not in TIMING_KEYS} for r in records]


def test_same_seed_gives_identical_metrics_and_weights(tmp_path):
    # ppo_turn with the warm start on exercises cloning, the seeded value model and the critic path;
    # the two processes get different string-hash seeds.
    dirs = [tmp_path / "a", tmp_path / "b"]
    procs = [start_train(*TINY, "algo=ppo_turn", f"hydra.run.dir={d}", hash_seed=h)
             for d, h in zip(dirs, ("1", "2"), strict=True)]
    for proc in procs:
        assert_ok(finish(proc))
    a, b = (strip_timing(read_records(d)) for d in dirs)
    assert len(a) == 3 and a == b
    assert any(k.startswith("time/") for k in read_records(dirs[0])[1])  # the keys left out do exist
    # The comparison has substance: values that depend on every weight and rollout.
    assert all(r["losses/value_loss"] > 0 and r["losses/entropy"] > 0 for r in a[1:])
    wa, wb = (load_file(str(d / "models" / "policy" / "model.safetensors")) for d in dirs)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_training_never_sees_an_evaluation_task(tmp_path):
    # frozen_lake draws a random map per seed: every map the run trained on (warm start included,
    # whose demonstrations are not stored) must lie in the training split, on a training seed.
    from envs import make
    from envs.splits import TRAIN_SEEDS, task_split
    from envs.store import TrajectoryStore

    run_dir = tmp_path / "run"
    tiny = [o for o in TINY if not o.startswith("env=")]
    assert_ok(run_train(*tiny, "env=frozen_lake", "algo=grpo", "trainer.warm_start.enabled=false",
                        f"hydra.run.dir={run_dir}"))
    stored = TrajectoryStore(run_dir / "trajectories").load()
    assert len({t.seed for t in stored}) == 2 * 2  # two groups per iteration, two iterations
    for trajectory in stored:
        env = make("frozen_lake", **trajectory.env_kwargs)
        env.reset(trajectory.seed)
        assert trajectory.seed in TRAIN_SEEDS and task_split(env) == "train"


def test_evaluating_more_often_does_not_change_training(tmp_path):
    # Evaluation samples from its own generator: the training metrics and final weights of a run
    # evaluated every iteration equal those of a run evaluated only at its end.
    dirs = [tmp_path / "every", tmp_path / "end"]
    procs = [start_train(*TINY, "algo=grpo", "trainer.iterations=3", f"trainer.eval_every={every}",
                         f"hydra.run.dir={d}") for d, every in zip(dirs, (1, 5), strict=True)]
    for proc in procs:
        assert_ok(finish(proc))
    every, end = ([{k: v for k, v in r.items() if not k.startswith("eval/")} for r in strip_timing(read_records(d))]
                  for d in dirs)
    assert len(every) == 4 and every == end
    assert sum("eval/success_rate" in r for r in read_records(dirs[0])) == 4
    assert sum("eval/success_rate" in r for r in read_records(dirs[1])) == 2
    wa, wb = (load_file(str(d / "models" / "policy" / "model.safetensors")) for d in dirs)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("algo.gama=1", ["gama"]),  # typo'd key: Hydra's message names it
        ("algo.gamma=2", ["algo.gamma"]),  # out of range: __post_init__ names the key
        # unknown env option: named, and the valid ones listed (HiddenNumberEnv's keyword options)
        ("+env.kwargs.N=3", ["['N']", "valid options: n, max_turns, noise, observation"]),
    ],
    ids=["typo", "out_of_range", "env_option"],
)
def test_bad_config_fails_at_start(tmp_path, override, expected):
    run_dir = tmp_path / "run"
    result = run_train(*TINY, "algo=gigpo", override, f"hydra.run.dir={run_dir}")
    assert result.returncode != 0
    last_lines = "\n".join(result.stderr.strip().splitlines()[-8:])  # the error, not a traceback's echo
    for text in expected:
        assert text in last_lines, (text, result.stderr[-3000:])
    assert not (run_dir / "done").exists() and not (run_dir / "metrics.jsonl").exists()
    if override.startswith("+env"):  # the run had started (config written), so it leaves a failed marker
        assert (run_dir / "config.yaml").is_file() and (run_dir / "failed").is_file()
    else:  # rejected before any work
        assert not (run_dir / "config.yaml").exists()


def test_ppo_turn_with_the_latent_critic(tmp_path):
    # critic=latent: the world model's history encoder with a value head values the states. A 3-turn
    # cap truncates episodes, so the bootstrap also values states after the last turn (k == num_turns).
    run_dir = tmp_path / "run"
    assert_ok(run_train(*TINY, "algo=ppo_turn", "critic=latent", "trainer.max_turns=3", f"hydra.run.dir={run_dir}"))
    records = check_run_dir(run_dir, "ppo_turn")
    assert OmegaConf.load(run_dir / "config.yaml").critic.name == "latent"
    assert any(r["charts/truncated_rate"] > 0 for r in records[1:])
    for record in records[1:]:
        assert finite(record["losses/value_loss"]) and record["losses/value_grad_norm"] > 0, record
    from critic import LatentCritic

    saved = LatentCritic.from_pretrained(run_dir / "models" / "critic")  # reusable outside the run
    history = [{"role": "user", "content": "guess a number"}]
    assert saved.value([history]).shape == (1,)
