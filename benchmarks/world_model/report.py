"""Text output: one table per env (columns by the env's kind) and when each target was first met."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.world_model.data import ENVS, KINDS_WITH_SHIFT, Kind
from benchmarks.world_model.run import Result, Row

# (metric key, header, width, decimals); decimals 0 prints an integer count.
_NLL = [("nll_text", "nll_text", 8, 3)]
_ACC = [("match", "match", 6, 3), ("reward", "rew", 5, 3), ("done", "done", 5, 3), ("reward_tf", "rew_tf", 6, 3),
        ("done_tf", "done_tf", 7, 3)]
_UNC = [("wrong", "wrong", 5, 0), ("auroc", "auroc", 5, 2), ("auroc_mean", "auroc_mean", 10, 2),
        ("unc_p50", "u_p50", 6, 3), ("unc_p90", "u_p90", 6, 3)]
COLUMNS: dict[Kind, list[tuple[str, str, int, int]]] = {
    "bayes": _NLL + [("nll_answer", "nll_ans", 7, 3), ("nll_exact", "nll_bayes", 9, 3), ("ratio", "ratio", 6, 3)]
    + _ACC,
    "slippery": _NLL + [("nll_exact", "nll_exact", 9, 3), ("ratio", "ratio", 6, 3)] + _ACC,
    "deterministic": _ACC + [(f"open_loop_{k}", f"ol@{k}", 5, 3) for k in range(1, 6)] + _UNC,
    "shop": _NLL + _ACC + [("revisits", "revisits", 8, 0), ("revisit_match", "rv_match", 8, 3)] + _UNC,
}


def _num(value: float, width: int, digits: int) -> str:
    if math.isnan(value):
        return f"{'-':>{width}}"
    return f"{int(value):>{width}d}" if digits == 0 else f"{value:>{width}.{digits}f}"


def header(env: str) -> str:
    kind = ENVS[env].kind
    cols = " ".join(f"{h:>{w}}" for _, h, w, _ in COLUMNS[kind])
    return (f"\n== {env} ({kind}) ==\n{'model':<6} {'data':<9} {'train':>6} {'steps':>6} {'fit_s':>7} {'cpu_s':>7}"
            f" {'s/step':>6} {'img/s':>7} {'eval':>5} {cols}")


def format_row(r: Row) -> str:
    cols = " ".join(_num(r.get(key), w, d) for key, _, w, d in COLUMNS[ENVS[r.env].kind])
    data = "rand>exp" if r.shift else "mixed"
    return (f"{r.model:<6} {data:<9} {r.transitions:>6d} {r.steps:>6d} {r.fit_s:>7.1f} {r.fit_cpu_s:>7.1f}"
            f" {r.fit_s_per_step:>6.3f} {_num(r.get('imagined_steps_per_s'), 7, 1)} {r.eval_transitions:>5d} {cols}")


def format_table(result: Result) -> str:
    lines: list[str] = []
    for env in dict.fromkeys(r.env for r in result.rows):
        lines += [header(env), *(format_row(r) for r in result.rows if r.env == env)]
    return "\n".join(lines)


def format_costs(result: Result) -> str:
    """One line per env: CPU seconds per fit step and per batched imagined step."""
    from benchmarks.world_model.run import IMAGINE_ROWS

    return "\n".join(
        f"cost {env}: fit {fit:.3f} CPU s/step, imagined step {imagine:.3f} CPU s for {IMAGINE_ROWS} rows "
        f"({imagine / IMAGINE_ROWS:.4f} s per imagined turn)"
        for env, (fit, imagine) in result.cost.items()
    )


CPU_BUDGET_S = 3600.0
"""Each target is asked of one fit of at most an hour of one CPU thread."""


@dataclass(frozen=True)
class Target:
    name: str
    key: str
    kinds: tuple[Kind, ...]
    compare: Callable[[float, float], bool]
    threshold: float
    shift: bool = False
    """Read from the random-only fit scored on expert episodes instead of the learning curve."""
    max_transitions: int | None = None
    """The most real training transitions the target allows (None: any)."""

    def describe(self) -> str:
        sign = ">=" if self.compare is operator.ge else "<="
        budget = f" by {self.max_transitions} tr." if self.max_transitions else ""
        return f"{self.name} {sign} {self.threshold:g}{budget}"


TARGETS = (
    Target("one-step exact match", "match", ("deterministic",), operator.ge, 0.99, max_transitions=5000),
    Target("open-loop exact match k=5", "open_loop_5", ("deterministic",), operator.ge, 0.95, max_transitions=5000),
    Target("reward accuracy", "reward", ("deterministic",), operator.ge, 1.0, max_transitions=5000),
    Target("done accuracy", "done", ("deterministic",), operator.ge, 1.0, max_transitions=5000),
    Target("NLL ratio model/exact", "ratio", ("bayes",), operator.le, 1.05, max_transitions=3000),
    Target("NLL ratio model/exact", "ratio", ("slippery",), operator.le, 1.10),
    Target("revisited-page exact match", "revisit_match", ("shop",), operator.ge, 0.99),
    Target("AUROC disagreement vs wrong", "auroc", KINDS_WITH_SHIFT, operator.ge, 0.85),
    Target("AUROC under policy shift", "auroc", KINDS_WITH_SHIFT, operator.ge, 0.85, shift=True),
)


def target_line(target: Target, rows: list[Row]) -> str:
    """``met at N transitions (fit C CPU s)`` for the smallest training size that meets it, with a note
    when that size or its fit's CPU time is over the target's budget; ``not met (best X at N)`` otherwise."""
    for row in sorted(rows, key=lambda r: r.transitions):
        value = row.get(target.key)
        if math.isnan(value) or not target.compare(value, target.threshold):
            continue
        over = []
        if target.max_transitions is not None and row.transitions > target.max_transitions:
            over.append(f"over the {target.max_transitions} transitions allowed")
        if row.fit_cpu_s > CPU_BUDGET_S:
            over.append("over 1 CPU-hour")
        return f"met at {row.transitions} transitions (fit {row.fit_cpu_s:.0f} CPU s{''.join(', ' + o for o in over)})"
    known = [(v, r.transitions) for r in rows if not math.isnan(v := r.get(target.key))]
    if not known:
        return "not met (no value: -)"
    best = (max if target.compare is operator.ge else min)(known)
    return f"not met (best {best[0]:.3f} at {best[1]})"


def format_targets(result: Result) -> str:
    lines = ["", "== targets =="]
    for env in dict.fromkeys(r.env for r in result.rows):
        for target in TARGETS:
            if ENVS[env].kind not in target.kinds:
                continue
            for model in dict.fromkeys(r.model for r in result.rows):
                rows = [r for r in result.rows if r.env == env and r.shift == target.shift and r.model == model]
                if rows:
                    lines.append(f"{env:<21} {model:<6} {target.describe():<36} {target_line(target, rows)}")
    return "\n".join(lines)


_ABLATION = [("match", "match", 6, 3), ("open_loop_5", "ol@5", 5, 3), ("reward", "rew", 5, 3), ("done", "done", 5, 3),
             ("nll_text", "nll_text", 8, 3), ("nll_exact", "nll_exact", 9, 3), ("auroc", "auroc", 5, 2)]


def format_ablation(result: Result, name: str, off: str = "latent", on: str = "copy") -> str:
    """One row per (env, model) of the learning-curve fits: the ablation's ``off`` and ``on`` models."""
    cols = " ".join(f"{h:>{w}}" for _, h, w, _ in _ABLATION)
    lines = ["", f"== ablation: {name} ({off} = off, {on} = on) ==",
             f"{'env':<21} {'model':<7} {'train':>6} {'steps':>6} {'s/step':>6} {'cpu/st':>6} {cols}"]
    for r in result.rows:
        if r.shift:
            continue
        values = " ".join(_num(r.get(key), w, d) for key, _, w, d in _ABLATION)
        cpu = r.fit_cpu_s / r.steps if r.steps else math.nan
        lines.append(f"{r.env:<21} {r.model:<7} {r.transitions:>6d} {r.steps:>6d} {r.fit_s_per_step:>6.3f} "
                     f"{cpu:>6.3f} {values}")
    return "\n".join(lines)


NOTE = """\
nll_*: nats per held-out transition. nll_text: model NLL of the whole next-observation text (its words
and </s>; the ensemble's per-token mixture, as WorldModel.step samples); nll_ans: the answer word only,
given the true prefix; nll_bayes / nll_exact: NLL of the env's exact next-observation distribution;
ratio = nll_text / nll_exact (1 is optimal). match: greedy next observation exactly right; rew / done:
reward and done flag right (read after folding in the model's own greedy observation); rew_tf /
done_tf: the same heads read after folding in the real observation instead. ol@k: open loop, the k-th observation right after k imagined steps on the
logged actions. wrong: greedy one-step predictions that were wrong; auroc: step's disagreement (the model's score,
by default the sum over its tokens) as a score for them ('-' without both right and wrong ones);
auroc_mean: the same with the mean per token (the older score); u_p50 / u_p90: median and 90th
percentile of the step's disagreement. revisits / rv_match: next observations the
episode had already shown, and the greedy exact match on those. data: mixed = random and expert
episodes; rand>exp = fitted on random-agent episodes only, scored on expert episodes. model: latent
(history latent), copy (the latent model whose decoder also reads the observation acted in,
world_model.decoder.copy_observation), edit (copy with world_model.decoder.aligned_copy),
ordinal (latent with world_model.ordinal_numbers) or lm (causal LMs over the text history); s/step: fit wall seconds per optimiser step;
img/s: imagined (sampled) steps per wall second over the held-out states, in batches of 64."""
