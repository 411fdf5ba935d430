"""Figures: the learning curves, and a reliability diagram of the largest fits' outcome probabilities."""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.world_model.metrics import calibration_error, reliability
from benchmarks.world_model.run import Result


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def plot_curves(result: Result, path: Path) -> None:
    """Left: NLL ratio model / exact (1 is optimal); right: greedy one-step exact match."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for env, model in dict.fromkeys((r.env, r.model) for r in result.rows):
        rows = [r for r in result.rows if r.env == env and r.model == model and not r.shift]
        x, label = [r.transitions for r in rows], env if model == "latent" else f"{env} ({model})"
        right.plot(x, [r.get("match") for r in rows], marker="o", label=label)
        if not all(math.isnan(r.get("ratio")) for r in rows):
            left.plot(x, [r.get("ratio") for r in rows], marker="o", label=label)
    left.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    left.axhline(1.02, color="grey", linestyle=":", linewidth=1, label="target 1.02")
    left.set(xscale="log", xlabel="training transitions", ylabel="NLL model / exact", title="stochastic envs")
    right.set(xscale="log", xlabel="training transitions", ylabel="greedy exact match", ylim=(0, 1.05),
              title="one-step next observation")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    _save(fig, path)
    plt.close(fig)


def plot_calibration(result: Result, path: Path, bins: int = 10) -> bool:
    """Reliability diagram per env with exact distributions; False (nothing written) when there is none."""
    if not result.calibration:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect")
    for env, (probs, hits) in result.calibration.items():
        table = reliability(probs, hits, bins)
        ece = calibration_error(probs, hits, bins)
        ax.plot([p for p, _, _ in table], [f for _, f, _ in table], marker="o", label=f"{env} (ECE {ece:.3f})")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="model probability of the outcome class",
           ylabel="observed frequency", title="calibration at the largest training size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)
    plt.close(fig)
    return True
