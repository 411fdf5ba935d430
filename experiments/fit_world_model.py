"""Fit a world model on real episodes of the scripted expert and a random agent.

    python -m experiments.fit_world_model env=sokoban data.episodes=2000 fit.steps=3000

Read top to bottom: draw env seeds of the *training* split (``envs.splits``) for the training and
the validation episodes from two independent streams, and check that no env seed is in both;
collect one episode per seed (``data.expert_fraction`` of them by ``ExpertAgent``, the rest by
``RandomAgent``); store them in ``trajectories/train`` and ``trajectories/val`` (``TrajectoryStore``);
score the fresh model on the validation episodes, fit it with Lightning
(``world_model.lightning_module.fit_world_model``), score it again. Everything lands in Hydra's run
directory: ``config.yaml`` (resolved), ``tensorboard/``, ``checkpoints/last.ckpt``, the model
(``models/world_model/``, ``save_pretrained``: safetensors, config.json and the tokenizer, with
``fitted_on.json``: what it was fitted on, ``experiments/fitted_on.py``; ``world_model.init=DIR`` starts
from a saved model instead of fresh weights),
``summary.json`` with the held-out losses before and after the fit, and a ``done`` or ``failed`` marker.
"""

from __future__ import annotations

import time
from pathlib import Path

import hydra
from omegaconf import DictConfig

from envs import ExpertAgent, RandomAgent, Trajectory, TrajectoryStore, collect, count_env_steps, make
from envs.seeding import derive_seed
from envs.splits import split_seeds
from envs.strict_json import strict_dumps
from experiments.fit_config import ResolvedFit, register_fit_configs, validate_fit
from experiments.fitted_on import Source, write_fitted_on
from experiments.init_models import fitted_on_record, model_tokenizers, start_from_saved
from experiments.markers import run_job
from experiments.run_layout import model_dir
from experiments.world_model_builder import build_world_model
from world_model.fitting import fit_any

register_fit_configs()


def episode_counts(run: ResolvedFit) -> tuple[int, int]:
    """Training and validation episodes (one per env seed); validation gets at least one if asked."""
    episodes = run.data.episodes
    val = 0 if run.data.val_fraction == 0 else max(1, round(episodes * run.data.val_fraction))
    if episodes - val < 1:
        raise ValueError(f"data.episodes={episodes} leaves no training episode with data.val_fraction="
                         f"{run.data.val_fraction}")
    return episodes - val, val


def collect_split(run: ResolvedFit, part: str, seeds: list[int], next_ids: dict[str, int]) -> list[Trajectory]:
    """One episode per seed: the first ``expert_fraction`` by the expert, the rest by a random agent."""
    data_seed = run.seed if run.data.seed is None else run.data.seed
    n_expert = round(len(seeds) * run.data.expert_fraction)
    agents = [(ExpertAgent(), seeds[:n_expert]), (RandomAgent(derive_seed(data_seed, "wm-random", part)), seeds[n_expert:])]
    out: list[Trajectory] = []
    for agent, group_seeds in agents:
        if not group_seeds:
            continue
        trajectories = collect(agent, run.env.name, env_kwargs=dict(run.env.kwargs), group_size=1,
                               group_seeds=group_seeds, max_turns=run.data.max_turns,
                               first_group_id=next_ids["group"], first_trajectory_id=next_ids["trajectory"],
                               progress=run.fit.progress)
        next_ids["group"] += len(group_seeds)
        next_ids["trajectory"] += len(trajectories)
        out.extend(trajectories)
    return out


def fit_source(run: ResolvedFit, run_dir: Path, train: list[Trajectory], seeds: list[int]) -> Source:
    """What the model was fitted on (the training episodes; the validation ones only score it): the
    scripted expert's steps (the first ``expert_fraction`` of the seeds) apart from the random agent's."""
    expert_seeds = set(seeds[:round(len(seeds) * run.data.expert_fraction)])
    expert = count_env_steps([t for t in train if t.seed in expert_seeds])
    return Source(f"experiments.fit_world_model {run_dir} (scripted expert and random agent, expert_fraction "
                  f"{run.data.expert_fraction}, seed {run.seed})", count_env_steps(train) - expert, expert)


def fit(run: ResolvedFit, run_dir: Path) -> dict:
    start = time.monotonic()
    env_kwargs = dict(run.env.kwargs)
    env = make(run.env.name, **env_kwargs)  # a bad env option fails here, before any work
    model = build_world_model(run.world_model, run.env.name, env_kwargs, env.vocabulary(),
                              seed=derive_seed(run.seed, "world-model-init"))
    imported = None  # world_model.init: start from a saved model's weights
    if run.world_model.init is not None:
        imported = start_from_saved(model, run.world_model.init, "world_model", run.env.name, env_kwargs,
                                    model_tokenizers(model))

    # 1. Env seeds of the training split only (evaluation tasks stay unseen), held out by seed.
    data_seed = run.seed if run.data.seed is None else run.data.seed
    n_train, n_val = episode_counts(run)
    train_seeds = split_seeds(run.env.name, env_kwargs, "train", seed=derive_seed(data_seed, "wm-data", "train"),
                              count=n_train)
    val_seeds = split_seeds(run.env.name, env_kwargs, "train", seed=derive_seed(data_seed, "wm-data", "val"),
                            count=n_val)
    shared = sorted(set(train_seeds) & set(val_seeds))
    if shared:
        raise RuntimeError(f"env seeds drawn for both training and validation: {shared[:10]}")

    # 2. Collect and store real episodes.
    next_ids = {"group": 0, "trajectory": 0}
    train = collect_split(run, "train", train_seeds, next_ids)
    val = collect_split(run, "val", val_seeds, next_ids)
    TrajectoryStore(run_dir / "trajectories" / "train").append(train)
    TrajectoryStore(run_dir / "trajectories" / "val").append(val)
    collect_s = time.monotonic() - start

    # 3. Fit, scoring held-out episodes before and after.
    metrics = fit_any(train, val, model, **run.fit.keywords(), seed=derive_seed(run.seed, "wm-shuffle"), log_dir=run_dir)
    model.save_pretrained(model_dir(run_dir, "world_model"))
    write_fitted_on(model_dir(run_dir, "world_model"), fitted_on_record(
        imported, run.env.name, env_kwargs, model_tokenizers(model), fit_source(run, run_dir, train, train_seeds)))

    def parts(prefix: str) -> dict[str, float]:
        return {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith(prefix + "/")}

    summary = {
        "env": run.env.name, "env_kwargs": env_kwargs, "seed": run.seed,
        "episodes": {"train": len(train), "val": len(val)},
        "env_steps": {"train": count_env_steps(train), "val": count_env_steps(val)},
        "expert_fraction": run.data.expert_fraction,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "steps": metrics["steps"], "epochs": metrics["epochs"],
        "val_before": parts("val_before"), "val_after": parts("val_after"), "train_after": parts("train_after"),
        "collect_s": collect_s, "fit_s": metrics["fit_s"], "wall_s": time.monotonic() - start,
    }
    if imported is not None:  # world_model.init: where from, and the weights' hash as loaded
        summary["imported"] = imported.as_record()
    (run_dir / "summary.json").write_text(strict_dumps(summary, indent=2))
    return summary


@hydra.main(config_path="conf", config_name="fit_world_model", version_base=None)
def main(cfg: DictConfig) -> None:
    run_job(cfg, validate_fit, fit)


if __name__ == "__main__":
    main()
