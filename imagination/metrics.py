"""The ``imagination/*`` figures: how much was imagined, and how far imagination drifts from reality."""

from __future__ import annotations

from collections.abc import Sequence

from envs.collect import count_env_steps
from envs.trajectory import Trajectory
from imagination.bias import imagined_minus_real_return, start_return_gap
from imagination.gate import ImaginationGate
from imagination.imagine import ImaginedGroups


def imagination_metrics(
    imagined: ImaginedGroups, real_kept: Sequence[Trajectory], real_collected: Sequence[Trajectory],
    imagined_groups_total: int, groups_total: int, gate: ImaginationGate,
) -> dict[str, float]:
    """The ``imagination/*`` figures of one iteration (NaN where nothing was imagined): ``real_kept``
    are the real episodes of the update, ``real_collected`` every real episode collected this iteration."""
    nan = float("nan")
    episodes = imagined.trajectories
    in_update = len(episodes) + len(real_kept)
    return {
        "imagination/gate_open": float(gate.is_open),
        "imagination/imagined_groups": float(len(imagined.groups)),
        "imagination/ratio": len(episodes) / in_update if in_update else nan,
        "imagination/ratio_cumulative": imagined_groups_total / groups_total if groups_total else nan,
        "imagination/return_gap": imagined_minus_real_return(imagined.branches, imagined.groups),
        "imagination/start_return_gap": start_return_gap(imagined.branches, imagined.groups, real_collected),
        "imagination/imagined_return": sum(t.episode_return for t in episodes) / len(episodes) if episodes else nan,
        "imagination/imagined_success": sum(t.success for t in episodes) / len(episodes) if episodes else nan,
        "imagination/halted_share": imagined.halted_share,
        "imagination/truncated_share": sum(t.truncated for t in episodes) / len(episodes) if episodes else nan,
        "charts/imagined_env_steps": float(count_env_steps(episodes, source="imagined")),
    }


def imagination_summary(history: list[dict[str, float]]) -> dict[str, float]:
    """Run-level bias figures: the last cumulative ratio, mean gap, halting and world-model error."""

    def mean(key: str) -> float:
        values = [h[key] for h in history if key in h and h[key] == h[key]]  # NaN != NaN: skipped
        return sum(values) / len(values) if values else float("nan")

    ratios = [h["imagination/ratio_cumulative"] for h in history if "imagination/ratio_cumulative" in h]
    opened = [h["iteration"] for h in history if h.get("imagination/gate_open") == 1.0]
    return {
        "effective_ratio": ratios[-1] if ratios else float("nan"),
        "return_gap": mean("imagination/return_gap"),
        "start_return_gap": mean("imagination/start_return_gap"),
        "halted_share": mean("imagination/halted_share"),
        "gate_open_share": mean("imagination/gate_open"),
        "gate_first_open_iteration": opened[0] if opened else -1,
        "wm_one_step_exact_match_last": next((h["wm/one_step_exact_match"] for h in reversed(history)
                                              if "wm/one_step_exact_match" in h), float("nan")),
        "imagined_env_steps": sum(h.get("charts/imagined_env_steps", 0.0) for h in history),
    }


def format_imagination_summary(figures: dict[str, float]) -> str:
    return "imagination: " + ", ".join(
        f"{key} {value:.3f}" if isinstance(value, float) else f"{key} {value}" for key, value in figures.items()
    )
