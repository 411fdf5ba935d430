"""What the throughput and compile-payoff benchmarks share: their settings, the preset's warm-started
policy, the bare KV-cache sampling loop they time against, and small timers. Both import it; neither
imports the other's module for these.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from envs import Trajectory, collect, make
from envs.seeding import derive_seed, seed_global_rngs
from envs.splits import split_seeds
from envs.token_positions import position_ids_for
from policy.encode import left_pad
from policy.warm_start import behaviour_clone, expert_trajectories

CONF = Path(__file__).resolve().parents[1] / "experiments" / "conf"


@dataclass(frozen=True)
class Settings:
    experiment: str = "quick"
    threads: tuple[int, ...] = (1, 2)
    repeats: int = 3
    clone_steps: int = 60
    """Behaviour-cloning steps of the warm start (the preset stops cloning at about 0.5 success)."""
    groups: int | None = None
    """Groups per collection; None: the preset's ``groups_per_iteration``."""
    fit_steps: int = 40
    """World-model fit steps on the expert episodes before imagining; 0 leaves it untrained."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {self.repeats}")
        if not self.threads or min(self.threads) < 1:
            raise ValueError(f"--threads must be >= 1, got {self.threads}")
        if self.groups is not None and self.groups < 1:
            raise ValueError(f"--groups must be >= 1, got {self.groups}")


def compose_run(experiment: str, seed: int):
    """The resolved training config of ``experiment=...`` as ``experiments.train`` would see it."""
    from hydra import compose, initialize_config_dir

    from experiments.config import register_configs, validate

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="train", overrides=[f"experiment={experiment}", f"seed={seed}"])
    return validate(cfg)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@contextmanager
def num_threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def bare_sample(
    model: torch.nn.Module,
    prompts: list[list[int]],
    *,
    pad: int,
    eos: int,
    max_tokens: int,
    temperature: float,
    generator: torch.Generator,
    cache_key: str = "past_key_values",
) -> int:
    """The minimal KV-cache sampling loop: prefill, then one token per row per step until all rows hit EOS.

    Returns the decode steps taken. Nothing is tokenised or decoded; finished rows keep decoding.
    ``cache_key``: the name of the model's cache argument (``past_key_values``, ``cache`` in newer
    transformers), looked up once by the caller.
    """
    input_ids, mask = left_pad(prompts, pad)  # (B, P)
    positions = position_ids_for(mask)  # (B, P)
    out = model(
        input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1
    )
    cache, logits = out[cache_key], out.logits[:, -1]  # logits (B, V)
    finished = torch.zeros(len(prompts), dtype=torch.bool)
    next_position = positions[:, -1:] + 1  # (B, 1)
    for step in range(max_tokens):
        token = torch.multinomial(F.softmax(logits / temperature, dim=-1), 1, generator=generator)  # (B, 1)
        finished |= token[:, 0] == eos
        if bool(finished.all()) or step == max_tokens - 1:
            return step + 1
        mask = torch.cat([mask, mask.new_ones((len(prompts), 1))], dim=1)  # (B, P+step+1)
        out = model(
            input_ids=token,
            attention_mask=mask,
            position_ids=next_position,
            use_cache=True,
            logits_to_keep=1,
            **{cache_key: cache},
        )
        cache, logits = out[cache_key], out.logits[:, -1]
        next_position = next_position + 1
    return max_tokens


def prompts_by_turn(trajectories: Sequence[Trajectory]) -> list[list[list[int]]]:
    """The prompt ids of every sampled turn, one list per turn index: what each ``act`` call of a
    lock-step collection (all episodes starting together) was given."""
    batches: list[list[list[int]]] = []
    for trajectory in trajectories:
        for t, turn in enumerate(trajectory.turns):
            if len(batches) <= t:
                batches.append([])
            batches[t].append(list(turn.sample.prompt_ids))
    return batches


def stderr_progress() -> Callable[[str], None]:
    """Progress lines on stderr with the seconds since the benchmark started."""
    start = time.perf_counter()
    return lambda text: print(f"[{time.perf_counter() - start:6.1f} s] {text}", file=sys.stderr, flush=True)


def warm_started(settings: Settings, progress: Callable[[str], None]):
    """``(run config, env, policy, expert episodes)``: the preset's policy after a short behaviour clone,
    built with the training loop's own builder; torch is left on one thread."""
    run_cfg = compose_run(settings.experiment, settings.seed)
    trainer, env_kwargs, env_name, seed = (
        run_cfg.trainer,
        dict(run_cfg.env.kwargs),
        run_cfg.env.name,
        run_cfg.seed,
    )
    env = make(env_name, **env_kwargs)
    seed_global_rngs(derive_seed(seed, "global"))
    torch.set_num_threads(1)

    from experiments.build import build_policy  # the training loop's own builder

    policy = build_policy(run_cfg, env.vocabulary())
    experts = expert_trajectories(
        env_name,
        seeds=split_seeds(env_name, env_kwargs, "train", seed=seed, count=64),
        env_kwargs=env_kwargs,
        max_turns=trainer.max_turns,
    )
    progress(f"warm start: {settings.clone_steps} behaviour-cloning steps on {len(experts)} expert episodes")
    behaviour_clone(
        policy,
        experts,
        lr=trainer.warm_start.lr,
        batch_size=trainer.warm_start.batch_size,
        max_steps=settings.clone_steps,
        seed=derive_seed(seed, "clone"),
        progress=False,
    )
    return run_cfg, env, policy, experts


def iteration_seeds(run_cfg, groups: int, iteration: int) -> list[int]:
    """The env seeds of training iteration ``iteration``'s ``groups`` groups, as the training loop draws them."""
    env_kwargs = dict(run_cfg.env.kwargs)
    seed = derive_seed(run_cfg.seed, "train", iteration, 0)
    return split_seeds(run_cfg.env.name, env_kwargs, "train", seed=seed, count=groups)


def collect_groups(run_cfg, policy, group_seeds: Sequence[int]) -> list[Trajectory]:
    """One lock-step collection of the preset's groups from ``group_seeds`` (no progress bar)."""
    trainer = run_cfg.trainer
    return collect(
        policy,
        run_cfg.env.name,
        env_kwargs=dict(run_cfg.env.kwargs),
        group_size=trainer.group_size,
        max_turns=trainer.max_turns,
        group_seeds=group_seeds,
        progress=False,
    )
