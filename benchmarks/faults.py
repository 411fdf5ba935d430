"""Fault injection: what was tried, what the platform did, and whether the run survived.

    python -m benchmarks.faults [--skip-train]

Each fault is injected at the smallest level that shows the behaviour (a unit-level call, or a tiny
in-process training run on hidden_number), and the outcome is checked, not assumed: a row's
``observed`` column is read back from what the code did (parameters, returned trajectories, the
run's ``faults.log`` and ``metrics.jsonl``, the exception raised). ``ok`` is whether that is the
intended behaviour: surviving where the run should go on, stopping with a clear message where it
should stop. Prints the table; exits non-zero if a row is not ok. The whole script takes about a
minute on two busy cores (``--skip-train`` leaves out the two training runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

CONF = Path(__file__).resolve().parents[1] / "experiments" / "conf"
TINY_RUN = [
    "env=hidden_number",
    "trainer.iterations=3",
    "trainer.groups_per_iteration=2",
    "trainer.group_size=4",
    "trainer.eval_episodes=4",
    "trainer.eval_every=3",
    "trainer.warm_start.max_steps=3",
    "trainer.warm_start.expert_episodes=8",
    "trainer.warm_start.eval_every=3",
    "trainer.warm_start.eval_episodes=4",
    "trainer.progress=false",
    "policy.hidden_size=32",
    "policy.num_layers=1",
    "policy.num_heads=2",
    "policy.intermediate_size=64",
]


@dataclass(frozen=True)
class Row:
    fault: str
    injected: str
    observed: str
    ok: bool


# -- unit-level faults --------------------------------------------------------------------------


def _tiny_learner(max_nonfinite_updates: int = 3):
    from lightning.fabric import Fabric
    from transformers import LlamaConfig, LlamaForCausalLM

    from policy.batch import TokenBatch
    from policy.config import PPOConfig
    from policy.learner import PPOLearner

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=12,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=16,
        )
    )
    learner = PPOLearner(
        Fabric(accelerator="cpu", devices=1),
        model,
        PPOConfig(epochs=1, minibatch_size=2),
        seed=0,
        max_nonfinite_updates=max_nonfinite_updates,
    )
    ids = torch.tensor([[4, 5, 6, 3], [5, 7, 8, 3], [6, 4, 9, 3], [7, 8, 5, 3]])  # (B, L)
    batch = TokenBatch(ids, torch.ones_like(ids), torch.tensor([[0, 0, 1, 1]] * 4, dtype=torch.float))
    return learner, batch


def nonfinite_update() -> Row:
    learner, batch = _tiny_learner()
    advantages = batch.response_mask * torch.tensor([[1.0], [-1.0], [0.5], [2.0]])  # (B, L)
    advantages[0, -1] = math.nan
    before = [p.detach().clone() for p in learner.policy.parameters()]
    stats = learner.update(batch, advantages)
    moved = any(not torch.equal(a, b) for a, b in zip(before, learner.policy.parameters(), strict=True))
    finite = all(bool(torch.isfinite(p).all()) for p in learner.policy.parameters())
    skipped = stats["losses/nonfinite_steps"]
    return Row(
        "NaN loss in one minibatch",
        "NaN advantage on one row (2 minibatches)",
        f"{skipped:.0f} of 2 steps skipped; weights finite, moved by the other step: {moved}",
        skipped == 1 and finite and moved,
    )


def nonfinite_streak() -> Row:
    from policy.learner import NonFiniteUpdateError

    learner, batch = _tiny_learner(max_nonfinite_updates=2)
    nan = torch.full(batch.input_ids.shape, math.nan)
    try:
        for _ in range(3):
            learner.update(batch, nan)
    except NonFiniteUpdateError as error:
        return Row(
            "non-finite updates in a row",
            "3 all-NaN updates, max_nonfinite_updates=2",
            f"stopped at update {learner.num_updates}: {str(error)[:60]}...",
            learner.num_updates == 3,
        )
    return Row(
        "non-finite updates in a row", "3 all-NaN updates, max_nonfinite_updates=2", "not stopped", False
    )


class _RaisingEnv:
    """Wraps a real env; ``step`` raises on the first episode built."""

    built = 0

    def __init__(self, env) -> None:
        self._env, self._broken = env, _RaisingEnv.built == 0
        _RaisingEnv.built += 1

    def __getattr__(self, name):
        return getattr(self._env, name)

    def step(self, action: str):
        if self._broken:
            raise RuntimeError("injected simulator crash")
        return self._env.step(action)


def env_error(stop: bool) -> Row:
    from envs import EnvFailure, ExpertAgent, collect, make

    _RaisingEnv.built = 0
    failures: list[EnvFailure] = []
    label = "raise (on_env_error=None)" if stop else "skip (on_env_error=callback)"
    try:
        trajectories = collect(
            ExpertAgent(),
            lambda: _RaisingEnv(make("hidden_number")),
            group_size=2,
            n_groups=2,
            seed=5,
            progress=False,
            on_env_error=None if stop else failures.append,
        )
    except RuntimeError as error:
        return Row("env raises inside step", label, f"collection stopped: {error}", stop)
    observed = (
        f"{len(trajectories)} of 4 episodes returned (all succeeded: {all(t.success for t in trajectories)}); "
        f"failed: seed {failures[0].trajectory.seed}, turn {failures[0].turn}"
        if failures
        else "no failure seen"
    )
    return Row(
        "env raises inside step",
        label,
        observed,
        not stop and len(trajectories) == 3 and len(failures) == 1 and all(t.success for t in trajectories),
    )


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def pickle_payloads(folder: Path) -> list[Row]:
    """A pickle that would create a file when unpickled, handed in where a model is expected."""
    from critic import LatentCritic, LatentCriticConfig, TokenCritic, TokenCriticConfig
    from policy.config import PolicyConfig
    from policy.model import build_tiny_lm, build_tiny_tokenizer, load_local_pretrained
    from world_model import TurnTokenizer, WorldModel, WorldModelConfig

    rows = []
    policy_dir, critic_dir, latent_dir, wm_dir = (
        folder / name for name in ("policy", "critic", "latent", "wm")
    )
    tokenizer = build_tiny_tokenizer(["a", "b"])
    build_tiny_lm(PolicyConfig(), tokenizer, seed=0).save_pretrained(policy_dir)
    tokenizer.save_pretrained(policy_dir)
    TokenCritic(
        TokenCriticConfig(vocab_size=8, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=8)
    ).save_pretrained(critic_dir)
    turns = TurnTokenizer.for_env("hidden_number")
    LatentCritic(
        LatentCriticConfig.for_tokenizer(turns, latent_size=8, head_hidden_size=8), turns
    ).save_pretrained(latent_dir)
    sizes = {
        "latent_size": 8,
        "num_members": 1,
        "head_hidden": 8,
        "encoder": {"embed_size": 8, "feature_size": 8, "conv_layers": 0},
        "decoder": {"model_size": 8, "num_layers": 1, "num_heads": 2, "latent_slots": 2},
    }
    WorldModel(WorldModelConfig.for_tokenizer(turns, **sizes), turns).save_pretrained(wm_dir)
    for target, weights, loader in (
        ("policy folder", policy_dir / "model.safetensors", lambda: load_local_pretrained(policy_dir)),
        ("token critic", critic_dir / "model.safetensors", lambda: TokenCritic.from_pretrained(critic_dir)),
        ("latent critic", latent_dir / "model.safetensors", lambda: LatentCritic.from_pretrained(latent_dir)),
        ("world model", wm_dir / "model.safetensors", lambda: WorldModel.from_pretrained(wm_dir)),
    ):
        weights.parent.mkdir(parents=True, exist_ok=True)
        weights.unlink(missing_ok=True)
        marker = folder / f"ran-{target.replace(' ', '-')}"
        torch.save({"weight": _Payload(marker)}, weights.with_name("pytorch_model.bin"))
        try:
            loader()
            outcome = "loaded (!)"
        except Exception as error:  # noqa: BLE001 - any refusal will do; the marker is what matters
            outcome = f"refused: {type(error).__name__}"
        rows.append(
            Row(
                "pickle handed in",
                f"payload as pytorch_model.bin in a {target}",
                f"{outcome}; payload ran: {marker.exists()}",
                not marker.exists(),
            )
        )
    return rows


def store_crash_mid_merge(folder: Path) -> Row:
    from envs import TrajectoryStore
    from envs.store import Trajectory

    class Crash(BaseException):
        pass

    store = TrajectoryStore(folder, merge_fanout=2)
    store.append([Trajectory("x", {}, 0, 0, 0)])
    real_replace, calls = os.replace, {"n": 0}

    def crash_at_merge_commit(*args):
        calls["n"] += 1
        if calls["n"] == 2:  # 1: the append's commit, 2: the merge's
            raise Crash
        return real_replace(*args)

    os.replace = crash_at_merge_commit
    try:
        store.append([Trajectory("x", {}, 1, 1, 1)])
    except Crash:
        pass
    finally:
        os.replace = real_replace
    ids = [t.trajectory_id for t in TrajectoryStore(folder).load()]
    return Row(
        "crash mid store merge",
        "killed at the merge's manifest commit",
        f"trajectories after reopening: {ids}",
        ids == [0, 1],
    )


def world_model_blow_up(folder: Path) -> Row:
    """A briefly fitted tiny world model; its weights are multiplied by 1e6, then put back."""
    from envs import ExpertAgent, TrajectoryStore, collect
    from imagination.config import ImaginationConfig
    from imagination.gate import ImaginationGate
    from imagination.refit import refit_and_gate
    from world_model import TurnTokenizer, WorldModel, WorldModelConfig
    from world_model.lightning_module import fit_world_model
    from world_model.metrics import one_step_accuracy

    tokenizer = TurnTokenizer.for_env("hidden_number")
    sizes = {
        "latent_size": 16,
        "num_members": 2,
        "head_hidden": 16,
        "encoder": {"embed_size": 16, "feature_size": 32, "conv_layers": 1},
        "decoder": {"model_size": 32, "num_layers": 1, "num_heads": 2, "latent_slots": 2},
    }
    model = WorldModel(WorldModelConfig.for_tokenizer(tokenizer, **sizes), tokenizer, seed=0)
    train = collect(ExpertAgent(), "hidden_number", group_size=1, n_groups=50, seed=0, progress=False)
    fit_world_model(train, [], model, max_steps=60, batch_size=16, lr=5e-3, seed=0)
    fresh = collect(ExpertAgent(), "hidden_number", group_size=1, n_groups=8, seed=1, progress=False)
    healthy = one_step_accuracy(model, fresh).exact_match
    config = ImaginationConfig(gate_threshold=round(healthy / 2, 3), fit_every=1000)
    gate, lines, states = ImaginationGate(config.gate_threshold), [], []
    store = TrajectoryStore(folder)
    saved = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    for iteration, blown in ((1, False), (2, True), (3, True), (4, False)):
        model.load_state_dict(saved)
        if blown:
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.mul_(1e6)
        refit_and_gate(
            model, gate, store, fresh, config, iteration, first_fit=False, fit_seed=0, log=lines.append
        )
        states.append("open" if gate.is_open else "closed")
    ok = (
        states == ["open", "closed", "closed", "open"]
        and len(lines) == 3
        and "closed at iteration 2" in lines[1]
    )
    return Row(
        "world model blows up",
        "weights x1e6 at iterations 2-3, restored at 4",
        f"gate per iteration: {states}; logged: {len(lines)} lines",
        ok,
    )


# -- faults in a tiny training run --------------------------------------------------------------


@contextlib.contextmanager
def _injected(nan_updates: set[int] | Callable[[int], bool], raise_env: bool) -> Iterator[None]:
    """Inside: the learner's updates numbered in ``nan_updates`` get NaN advantages, and (if
    ``raise_env``) the first env of the first training collection raises in ``step``."""
    import experiments.real_collection as collection_module
    from envs import make
    from policy.learner import PPOLearner

    real_update, real_collect = PPOLearner.update, collection_module.collect
    poisoned = nan_updates if callable(nan_updates) else nan_updates.__contains__

    def update(self, batch, advantages, **kwargs):
        if poisoned(self.num_updates):
            advantages = torch.full_like(advantages, math.nan)
        return real_update(self, batch, advantages, **kwargs)

    def collect(agent, env_name, *, env_kwargs=None, **kwargs):
        factory = (lambda: _RaisingEnv(make(env_name, **(env_kwargs or {})))) if raise_env else env_name
        return real_collect(agent, factory, env_kwargs=env_kwargs, **kwargs)

    _RaisingEnv.built = 0
    PPOLearner.update, collection_module.collect = update, collect
    try:
        yield
    finally:
        PPOLearner.update, collection_module.collect = real_update, real_collect


def _train(overrides: list[str], run_dir: Path) -> dict:
    from hydra import compose, initialize_config_dir

    import experiments.train as train_module
    from experiments.config import validate

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="train", overrides=TINY_RUN + overrides)
    run_dir.mkdir(parents=True, exist_ok=True)
    return train_module.train(validate(cfg), run_dir)


def training_run_survives(folder: Path) -> Row:
    with _injected({1}, raise_env=True):
        summary = _train([], folder)
    faults = (folder / "faults.log").read_text().splitlines()
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    skipped = {r["iteration"]: r.get("losses/nonfinite_steps") for r in records if r.get("iteration")}
    ok = (
        summary["iterations"] == 3
        and len(faults) == 2
        and faults[0].startswith("faults/env_error")
        and "iteration 1" in faults[0]
        and "seed" in faults[0]
        and "iteration 2" in faults[1]
        and skipped.get(2, 0) > 0
        and skipped.get(3) == 0
    )
    return Row(
        "tiny training run",
        "env raises at iteration 1; NaN advantages at iteration 2",
        f"ran {summary['iterations']} of 3 iterations; faults.log: {len(faults)} lines; "
        f"skipped steps per iteration {skipped}",
        ok,
    )


def training_run_stops(folder: Path) -> Row:
    from policy.learner import NonFiniteUpdateError

    try:
        with _injected(lambda n: n >= 1, raise_env=False):
            _train(["trainer.max_nonfinite_updates=1"], folder)
    except NonFiniteUpdateError as error:
        faults = (folder / "faults.log").read_text().splitlines()
        return Row(
            "tiny training run",
            "NaN advantages from iteration 2 on, max_nonfinite_updates=1",
            f"stopped after {len(faults)} logged skip(s): {str(error)[:50]}...",
            len(faults) == 1,
        )
    return Row(
        "tiny training run",
        "NaN advantages from iteration 2 on, max_nonfinite_updates=1",
        "not stopped",
        False,
    )


def format_table(rows: list[Row]) -> str:
    widths = [max(len(getattr(r, name)) for r in rows) for name in ("fault", "injected")]
    lines = [f"{'fault':<{widths[0]}}  {'injected':<{widths[1]}}  ok   observed"]
    for r in rows:
        lines.append(
            f"{r.fault:<{widths[0]}}  {r.injected:<{widths[1]}}  {'yes' if r.ok else 'NO ':<4} {r.observed}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-train", action="store_true", help="leave out the two tiny training runs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        checks: list[tuple[str, Callable[[], Row | list[Row]]]] = [
            ("NaN loss", nonfinite_update),
            ("NaN streak", nonfinite_streak),
            ("env error, skip", lambda: env_error(stop=False)),
            ("env error, raise", lambda: env_error(stop=True)),
            ("pickles", lambda: pickle_payloads(root / "pickles")),
            ("store crash", lambda: store_crash_mid_merge(root / "store")),
            ("world model blow-up", lambda: world_model_blow_up(root / "wm-store")),
        ]
        if not args.skip_train:
            checks += [
                ("training survives", lambda: training_run_survives(root / "run-survives")),
                ("training stops", lambda: training_run_stops(root / "run-stops")),
            ]
        for name, check in checks:
            print(f"... {name}", file=sys.stderr, flush=True)
            try:
                result = check()
            except Exception:  # noqa: BLE001 - a check that crashes is a row that failed
                result = Row(
                    name, "(the check itself crashed)", traceback.format_exc().splitlines()[-1], False
                )
            rows += result if isinstance(result, list) else [result]
        shutil.rmtree(root, ignore_errors=True)
    print(format_table(rows))
    if not all(r.ok for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
