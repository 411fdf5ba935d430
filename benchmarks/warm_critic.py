"""A critic saved by an earlier run against a fresh one: how well each predicts returns in a new run's
first iterations.

    python -m benchmarks.warm_critic [--earlier-iterations 20] [--iterations 5] [--seeds 1 2 3]
                                     [--critic latent] [--out outputs/warm_critic]

First an earlier run (``algo=ppo_turn``, ``critic=--critic``, ``experiment=hidden_number``, seed 0,
``--earlier-iterations`` iterations) saves its critic. Then, per seed of ``--seeds``, two runs of
``--iterations`` iterations that differ only in the critic they start with: ``fresh`` (initialised
from the seed, as every run does) and ``warm`` (``critic.init=<the earlier run>``). Both arms of a
seed share the warm start (cloned once, ``trainer.warm_start.cache_dir``), so they play the same
first iteration and then differ only through the critic.

Figure: ``losses/explained_variance`` per iteration, the share of the variance of that iteration's
value targets that the critic explained *before* its update on them (the learner reads the old
values), so iteration 1 is the saved critic as it was loaded. Printed: per iteration the mean over
seeds of each arm and of the paired difference, the mean over the iterations with the paired
difference's standard error over seeds, then every seed's values. The runs go into ``--out``
(one folder each, ``summary.json`` with its ledger: the warm runs show the earlier run's critic
steps as ``imported_critic_real_steps``). Runs in this process, on one thread.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from experiments.config import validate
from experiments.train import train

CONF = Path(__file__).resolve().parents[1] / "experiments" / "conf"
EV = "losses/explained_variance"


def overrides(critic: str, seed: int, iterations: int, out: Path) -> list[str]:
    """One run of the comparison: the preset with a critic, quiet, with small evaluations (they train nothing)."""
    return ["experiment=hidden_number", "algo=ppo_turn", f"critic={critic}", f"seed={seed}",
            f"trainer.iterations={iterations}", "trainer.progress=false", "trainer.eval_episodes=16",
            f"trainer.eval_every={iterations}", "trainer.eval_every_steps=null",
            f"trainer.warm_start.cache_dir={out / 'warm_starts'}"]


def run(args: list[str], run_dir: Path) -> list[dict]:
    """``python -m experiments.train *args`` into ``run_dir``, in this process; its metrics rows."""
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="train", overrides=args)
    run_dir.mkdir(parents=True, exist_ok=True)
    train(validate(cfg), run_dir)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def explained_variances(rows: list[dict]) -> list[float]:
    """The critic's explained variance of each iteration, in order (iteration 0 is the start's evaluation)."""
    return [row[EV] for row in rows if row.get("iteration", 0) >= 1 and EV in row]


def mean_line(values: dict[str, dict[int, list[float]]], seeds: Sequence[int]) -> str:
    """Each arm's explained variance averaged over the iterations, then over seeds; and the paired
    difference's mean with its standard error over seeds (one value per seed: its iterations' mean)."""
    per_seed = {arm: [statistics.mean(values[arm][s]) for s in seeds] for arm in ("fresh", "warm")}
    diff = [w - f for w, f in zip(per_seed["warm"], per_seed["fresh"], strict=True)]
    se = statistics.stdev(diff) / math.sqrt(len(diff)) if len(diff) > 1 else float("nan")
    return (f"mean over the iterations: fresh {statistics.mean(per_seed['fresh']):.3f}, warm "
            f"{statistics.mean(per_seed['warm']):.3f}, warm - fresh {statistics.mean(diff):+.3f} "
            f"(standard error over {len(diff)} seeds {se:.3f})")


def main(argv: Sequence[str] | None = None) -> dict[str, dict[int, list[float]]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--earlier-iterations", type=int, default=20, help="iterations of the run that saves the critic")
    parser.add_argument("--iterations", type=int, default=5, help="iterations of each compared run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds of the compared runs")
    parser.add_argument("--critic", default="latent", choices=("latent", "token"))
    parser.add_argument("--out", type=Path, default=Path("outputs/warm_critic"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    out = args.out.resolve()
    start = time.monotonic()
    earlier = out / "earlier"
    run(overrides(args.critic, 0, args.earlier_iterations, out), earlier)
    print(f"earlier run: {args.earlier_iterations} iterations, critic saved in {earlier / 'models' / 'critic'} "
          f"({time.monotonic() - start:.0f} s)")
    values: dict[str, dict[int, list[float]]] = {"fresh": {}, "warm": {}}
    for seed in args.seeds:
        base = overrides(args.critic, seed, args.iterations, out)
        values["fresh"][seed] = explained_variances(run(base, out / f"fresh_seed{seed}"))
        values["warm"][seed] = explained_variances(run([*base, f"critic.init={earlier}"], out / f"warm_seed{seed}"))
    print(f"critic={args.critic}, hidden_number, {len(args.seeds)} seeds; explained variance of each iteration's "
          f"value targets before the critic's update ({time.monotonic() - start:.0f} s in all)")
    print(f"{'iteration':>9}{'fresh':>9}{'warm':>9}{'warm - fresh':>14}")
    for i in range(args.iterations):
        fresh = [values["fresh"][s][i] for s in args.seeds]
        warm = [values["warm"][s][i] for s in args.seeds]
        diff = [w - f for w, f in zip(warm, fresh, strict=True)]
        print(f"{i + 1:>9}{statistics.mean(fresh):>9.3f}{statistics.mean(warm):>9.3f}{statistics.mean(diff):>+14.3f}")
    print(mean_line(values, args.seeds))
    for arm in ("fresh", "warm"):
        for seed in args.seeds:
            print(f"{arm} seed {seed}: " + " ".join(f"{v:.3f}" for v in values[arm][seed]))
    return values


if __name__ == "__main__":
    main()
