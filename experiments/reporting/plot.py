"""The report figure: held-out success against real env steps, one line per configuration (the mean
over seeds on the common grid of ``curves.mean_curve``, a band of plus or minus one standard deviation),
plus panels for the world model's one-step exact match and the imagined-minus-real return gaps when
any run logged them. Each env gets its own row of panels, titled with the env (a configuration's
runs are of one env, ``runs.configurations``); each row has its legend to the right, outside the
axes, and is as tall as its legend needs, so that legends of two rows never overlap."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from experiments.reporting.curves import MeanCurve, mean_curve
from experiments.reporting.runs import UNKNOWN_ENV, Run

PANELS = (
    # (series name, or None for eval success; title; y label)
    (None, "held-out success", "eval success rate"),
    ("wm/one_step_exact_match", "world model: one-step exact match", "exact match on new real turns"),
    ("imagination/return_gap", "imagined minus recorded real return", "return gap (includes policy lag)"),
    ("imagination/start_return_gap", "imagined minus real return, same policy", "return gap from task starts"),
)
GAPS = ("imagination/return_gap", "imagination/start_return_gap")  # panels with a line at 0
RATES = (None, "wm/one_step_exact_match")  # panels on a fixed 0..1 scale
LEGEND_WIDTH = 44  # characters per legend line before a label wraps at a comma
LEGEND_ROWS = 12  # legend entries per column
LEGEND_LINE_IN = 0.2  # inches a legend line at font size 8 takes, spacing included
MARKERS_UP_TO = 40  # grid points up to which a line gets a dot per point


def plot_report(configs: Mapping[str, Sequence[Run]], path: str | Path, target: float | None = None,
                order: Sequence[str] | None = None, max_steps: float | None = None,
                only: Sequence[str | None] | None = None, thresholds: Sequence[float] = ()) -> Path:
    """Draw the figure to ``path`` (PNG) and return it. ``order`` (labels, e.g. the table's best-first
    order) sets line colours and legend order; failed runs are left out of the lines. ``max_steps``
    ends the x-axis there, so that one long run does not squeeze the others into a corner. ``only``:
    the panels to draw, by series name (None: held-out success), when not all that were logged.
    ``thresholds``: success levels shaded as a band from the lowest to the highest on the success
    panel, a thin line at each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    labels = list(order) if order is not None else list(configs)
    counted = {label: [r for r in configs[label] if r.status != "failed"] for label in labels}
    panels = figure_panels(counted, only)
    env_of = {label: _env(configs[label]) or UNKNOWN_ENV for label in labels}
    envs = sorted(set(env_of.values()))
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    colour = {label: palette(i % palette.N) for i, label in enumerate(labels)}

    legends = []
    heights = [max(3.4, LEGEND_LINE_IN * _legend_lines([lb for lb in labels if env_of[lb] == env])) for env in envs]
    fig, axes = plt.subplots(len(envs), len(panels), figsize=(4.6 * len(panels), sum(heights)),
                             squeeze=False, sharex="row", gridspec_kw={"height_ratios": heights})
    for row, env in enumerate(envs):
        row_labels = [label for label in labels if env_of[label] == env]
        for col, (series, title, ylabel) in enumerate(panels):
            ax = axes[row][col]
            for label, curve in panel_curves({label: counted[label] for label in row_labels}, series).items():
                seeds = f"{curve.seeds} seed{'s' if curve.seeds != 1 else ''}"
                bounds = (0.0, 1.0) if series in RATES else None
                _draw(ax, curve, colour[label], f"{_wrap(label)} ({seeds})", bounds)
            if series in RATES:
                ax.set_ylim(-0.02, 1.02)
            if series is None and thresholds:
                low, high, band = threshold_band(thresholds)
                ax.axhspan(low, high, color="0.5", alpha=0.1, linewidth=0, label=band)
                for level in thresholds:
                    ax.axhline(level, color="0.6", linewidth=0.6)
            if series is None and target is not None:
                ax.axhline(target, color="0.4", linestyle=":", linewidth=1, label=f"target {target:g}")
            elif series in GAPS:
                ax.axhline(0.0, color="0.6", linewidth=0.8)
            ax.set_title(f"{env}: {title}", fontsize=10)
            if max_steps is not None:  # steps start at 0; the usual 2% margin on the left
                ax.set_xlim(-0.02 * max_steps, max_steps)
            ax.set_xlabel("real env steps")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        handles, names = axes[row][0].get_legend_handles_labels()
        if any(len(counted[label]) > 1 for label in row_labels):
            handles.append(Patch(color="0.5", alpha=0.3, linewidth=0))
            names.append("band: ± 1 std over seeds")
        if handles:
            legend = axes[row][-1].legend(handles, names, loc="upper left", bbox_to_anchor=(1.03, 1.0), fontsize=8,
                                          frameon=False, borderaxespad=0.0,
                                          ncol=math.ceil(len(handles) / LEGEND_ROWS))
            legend.set_in_layout(False)  # the axes keep their size; savefig's tight box takes the legend in
            legends.append(legend)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight", bbox_extra_artists=legends)
    plt.close(fig)
    return path


def threshold_band(thresholds: Sequence[float]) -> tuple[float, float, str]:
    """The success band the thresholds span, lowest to highest, and its legend entry."""
    return min(thresholds), max(thresholds), f"thresholds {', '.join(f'{t:g}' for t in sorted(thresholds))}"


def panel_series(configs: Mapping[str, Sequence[Run]]) -> list[str | None]:
    """The panels the figure gets: None (held-out success) always, then each extra series that some
    run that did not fail logged."""
    runs = [r for group in configs.values() for r in group if r.status != "failed"]
    return [series for series, _, _ in PANELS if series is None or any(series in r.series for r in runs)]


def figure_panels(configs: Mapping[str, Sequence[Run]], only: Sequence[str | None] | None = None) -> list[tuple]:
    """The ``PANELS`` entries the figure draws: those of ``panel_series``, cut to ``only`` when given."""
    shown = panel_series(configs)
    return [panel for panel in PANELS if panel[0] in shown and (only is None or panel[0] in only)]


def panel_curves(configs: Mapping[str, Sequence[Run]], series: str | None) -> dict[str, MeanCurve]:
    """What one panel draws: per configuration, the mean over its runs that did not fail of ``series``
    (None: held-out success), on ``mean_curve``'s common grid. Runs that did not log the series are
    left out of the mean (so its seed count may be smaller); configurations where none did are
    left out."""
    curves = {}
    for label, runs in configs.items():
        counted = [r for r in runs if r.status != "failed"]
        curve = mean_curve([r.curve if series is None else r.series.get(series, []) for r in counted])
        if curve.steps:
            curves[label] = curve
    return curves


def _draw(ax, curve, colour, label: str, bounds: tuple[float, float] | None = None) -> None:
    """The mean as a step function (the hold of ``mean_curve``), with a dot at each grid point when
    there are few, so the last value shows; the band is mean plus or minus one standard deviation,
    clipped to ``bounds``."""
    few = len(curve.steps) <= MARKERS_UP_TO
    ax.plot(curve.steps, curve.mean, color=colour, linewidth=1.6, drawstyle="steps-post", label=label,
            marker="o" if few else None, markersize=3)
    if curve.seeds > 1:
        low = [m - (s or 0.0) for m, s in zip(curve.mean, curve.std, strict=True)]
        high = [m + (s or 0.0) for m, s in zip(curve.mean, curve.std, strict=True)]
        if bounds is not None:
            low = [max(v, bounds[0]) for v in low]
            high = [min(v, bounds[1]) for v in high]
        ax.fill_between(curve.steps, low, high, color=colour, alpha=0.18, linewidth=0, step="post")


def _env(runs: Sequence[Run]) -> str | None:
    envs = {r.env for r in runs}
    return envs.pop() if len(envs) == 1 else None


def _legend_lines(labels: Sequence[str]) -> int:
    """Lines the legend of a row with ``labels`` takes in its tallest column (plus target and band)."""
    lines = [_wrap(label).count("\n") + 1 for label in labels] + [1, 1]
    columns = math.ceil(len(lines) / LEGEND_ROWS)
    return max(sum(lines[i::columns]) for i in range(columns))


def _wrap(label: str) -> str:
    """Break a long ``k=v,k=v`` label into lines at commas."""
    lines, line = [], ""
    for part in label.split(","):
        candidate = f"{line},{part}" if line else part
        if line and len(candidate) > LEGEND_WIDTH:
            lines.append(line + ",")
            line = part
        else:
            line = candidate
    return "\n".join([*lines, line])
