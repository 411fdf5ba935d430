"""Env steps per second for each environment, with a random agent and with the scripted expert.

    python -m benchmarks.envs [--episodes 200]

Prints a table (steps/s, success rate, mean turns) and writes ``env_speed.png`` beside the
working directory's ``benchmarks/`` folder. A figure, not a timed test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from envs.agent import ExpertAgent, RandomAgent
from envs.collect import collect
from envs.registry import ENVIRONMENTS
from experiments.evaluation import summarise


def measure(agent, env_name: str, episodes: int, seed: int) -> dict[str, float]:
    start = time.perf_counter()
    trajectories = collect(agent, env_name, n_groups=episodes, group_size=1, seed=seed, progress=False)
    elapsed = time.perf_counter() - start
    result = summarise(trajectories)
    return {
        "steps_per_s": result.env_steps / elapsed,
        "success": result.success_rate,
        "mean_turns": result.episode_length,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks"))
    args = parser.parse_args()

    rows = []
    for env_name in ENVIRONMENTS:
        for agent_name, agent in (("random", RandomAgent(args.seed)), ("expert", ExpertAgent())):
            rows.append((env_name, agent_name, measure(agent, env_name, args.episodes, args.seed)))

    print(f"{'env':<14} {'agent':<7} {'steps/s':>10} {'success':>8} {'turns':>6}")
    for env_name, agent_name, m in rows:
        print(f"{env_name:<14} {agent_name:<7} {m['steps_per_s']:>10.0f} {m['success']:>8.3f} {m['mean_turns']:>6.2f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{e}\n{a}" for e, a, _ in rows]
    ax.bar(labels, [m["steps_per_s"] for _, _, m in rows], color=["#999" if a == "random" else "#369" for _, a, _ in rows])
    ax.set_yscale("log")
    ax.set_ylabel("env steps / s (log)")
    ax.set_title(f"Environment speed, {args.episodes} episodes per bar")
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "env_speed.png", dpi=120)
    print(f"plot: {args.out / 'env_speed.png'}")


if __name__ == "__main__":
    main()
