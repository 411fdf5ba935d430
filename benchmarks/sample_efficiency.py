"""The headline: real environment steps to a target success, model-based against model-free.

    python -m benchmarks.sample_efficiency --envs hidden_number --seeds 0 1 2 --jobs 2
    python -m benchmarks.sample_efficiency --envs learning_check --env-steps 3000 --seeds 0 1 2
    python -m benchmarks.sample_efficiency --methods grpo mb_grpo_r0.5 mb_grpo_r0.75 mb_grpo_r0.9 --seeds 0
    python -m benchmarks.sample_efficiency --envs textarena --methods grpo gigpo mb_grpo_r0.9 --env-steps 1200 \
        --eval-every-steps 300   # GuessTheNumber-v0, warm-started from random well-formed actions

Every (env, method, seed) is one ``experiments.train`` run in a subprocess (one torch thread each,
``--jobs`` at a time) from the env's ``experiment=`` preset, its behaviour-cloned warm start, and a
budget of real env steps (``--env-steps``). The warm starts are cloned once per (env, seed) and kept
in ``<out>/warm_starts`` for the other methods (``trainer.warm_start.cache_dir``). Success is
evaluated on held-out tasks only, at the preset's marks of real env steps (``trainer.eval_every_steps``,
the same for every method; ``--eval-every-steps`` to change them). The model-free methods run with
``imagination=model_free``; the ``mb_*`` methods run the same learner with imagination at the given
ratio, their world model fitted on real RL steps only (``mb_*_experts``: also on the warm start's
expert episodes, which shows what those add). The model-free controls ``grpo_small_batch``,
``grpo_matched_updates`` and ``grpo_reuse`` are matched to ``REFERENCE``, the model-based method of
the defaults, on each env's preset (``benchmarks/controls.py``). At the end
``experiments.report`` prints, per env, real steps to ``--target`` success (the held rule on the
common mark grid, with a 95% interval over seeds), success after each ``--at`` budget, final success
and wall and CPU time, best first, and writes ``<out>/<env>/sample_efficiency.png`` and ``.md`` (with every
run's ledger of env steps); then the headline line: the best model-based method against the best of
all model-free methods and controls.

A figure, not a timed test: several methods x 3 seeds take hours on two cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.controls import CONTROLS, control_overrides
from experiments.checkpoint import list_checkpoints
from experiments.config import Resolved, register_configs, validate
from experiments.report import write_report
from experiments.reporting import Run, SummaryRow, configurations, load_runs, summary_rows
from experiments.reporting.break_even import break_even_step_cost, break_even_text
from experiments.reporting.intervals import TOO_FEW, interval_text, paired_log_ratio
from experiments.reporting.table import common_marks, run_steps_to_target, steps_lower_bound
from experiments.resume import CHECKPOINTS

CONF = Path(__file__).resolve().parents[1] / "experiments" / "conf"

# The imagination settings shared by every model-based method, whichever world model: gate open from
# the first score, refits every other iteration of 40 steps on batches of 16, fitted on real RL steps
# only (every real step it learns from is on the x-axis).
IMAGINATION = [
    "imagination=dyna", "imagination.gate_threshold=0", "imagination.fit_every=2", "imagination.fit_steps=40",
    "imagination.fit_batch_size=16", "imagination.fit_on_warm_start=false",
]
# The latent world model small enough to refit often on CPU, the env presets' own (conf/world_model/
# small.yaml: three members, one 32-wide decoder layer each; about 0.5 s per step of 32 transcripts on
# one shared core, against 2.3 s for the default 64-wide two-layer decoder).
LATENT_MODEL = ["world_model=small"]
MODEL_BASED = [*IMAGINATION, *LATENT_MODEL]
# The keys the model-based methods set one by one before world_model=small held them (three members, a
# 64-wide latent, the decoder): the run records kept from then (docs/headline) carry them, and they
# stay out of the report's labels as they did.
FORMER_MODEL_KEYS = (
    "world_model.num_members", "world_model.latent_size", "world_model.decoder.model_size",
    "world_model.decoder.num_layers", "world_model.decoder.num_heads", "world_model.decoder.latent_slots",
)
# The LM world model at its default sizes (world_model/lm.yaml: 2-layer 64-wide members, a 4-turn
# window, which covers the whole of a 3-turn learning_check episode). The frozen_lake and sokoban
# presets turn on the latent decoder's copy path, which the LM model does not read (it reads the
# history verbatim): back to the defaults, since a key the chosen kind does not read is refused.
LM_MODEL = ["world_model=lm", "world_model.decoder.copy_observation=false", "world_model.decoder.aligned_copy=false"]
MODEL_BASED_LM = [*IMAGINATION, *LM_MODEL]
METHODS: dict[str, list[str]] = {
    "ppo_turn": ["algo=ppo_turn"],
    "grpo": ["algo=grpo"],
    "gigpo": ["algo=gigpo"],
    "hgpo": ["algo=hgpo"],
    "hgpo_base_group": ["algo=hgpo", "algo.base_group=true"],
    **{f"mb_grpo_r{ratio}": ["algo=grpo", *MODEL_BASED, f"imagination.ratio={ratio}"]
       for ratio in (0.5, 0.75, 0.9, 0.95, 0.98)},
    # The same, with the world model also fitted on the warm start's expert episodes (off the x-axis).
    "mb_grpo_r0.9_experts": ["algo=grpo", *MODEL_BASED, "imagination.ratio=0.9", "imagination.fit_on_warm_start=true"],
    # The same imagination with the LM world model in place of the latent one.
    "mb_grpo_r0.9_lm": ["algo=grpo", *MODEL_BASED_LM, "imagination.ratio=0.9"],
    # Refits after every 100 new real env steps instead of every other iteration.
    **{f"mb_grpo_r{ratio}_refit100": ["algo=grpo", *MODEL_BASED, f"imagination.ratio={ratio}",
                                      "imagination.refit_every_steps=100"] for ratio in (0.9, 0.95, 0.98)},
    **{f"mb_gigpo_r{ratio}": ["algo=gigpo", *MODEL_BASED, f"imagination.ratio={ratio}"] for ratio in (0.75, 0.9)},
    "mb_ppo_turn_r0.75": ["algo=ppo_turn", "critic=latent", *MODEL_BASED, "imagination.ratio=0.75"],
    # Imagined step groups at every real step; the world model is refitted as above, nothing imagined is mixed in.
    "counterfactual_gigpo": ["algo=counterfactual_gigpo", *MODEL_BASED, "imagination.ratio=0"],
    # Its oracle: the same step groups played in the real env; every branch step is on the x-axis.
    "real_branch_gigpo": ["algo=real_branch_gigpo"],
    # The critic-group fused advantage and its EVPO switch, beside ppo_turn with the same latent critic.
    "ppo_turn_latent": ["algo=ppo_turn", "critic=latent"],
    "fused": ["algo=fused", "critic=latent"],
    "fused_evpo": ["algo=fused", "critic=latent", "algo.fused.weighting=evpo"],
}
# Overrides left out of the report's configuration labels: the run budget (the same within a method,
# and set per invocation) and the settings every model-based method of one world model shares; the
# imagination and world-model choices and fit_on_warm_start stay, since methods differ in them.
LABELLED = ("imagination", "imagination.fit_on_warm_start", "world_model")
# ``world_model=small`` is what the former keys set one by one: records of either kind are one
# configuration (``world_model=lm`` stays apart).
REPORT_IGNORE = ("seed", "trainer.iterations", "trainer.max_env_steps",
                 *dict.fromkeys(key for override in (*MODEL_BASED, *MODEL_BASED_LM)
                                if (key := override.split("=")[0]) not in LABELLED),
                 *FORMER_MODEL_KEYS, "world_model=small")
# The model-based method the controls are matched to, and the default list: every model-free method
# and control, and the reference.
REFERENCE = "mb_grpo_r0.9"
DEFAULT_METHODS = ("ppo_turn", "grpo", "gigpo", "hgpo", "hgpo_base_group", *CONTROLS, REFERENCE)
ALL_METHODS = (*METHODS, *CONTROLS)
ENVS = ("hidden_number", "frozen_lake", "lookup", "hidden_number_10")
# Presets that also run but are not in the default list: learning_check is hidden_number over 1 .. 5
# in 3 guesses, small enough that every method reaches 0.8 within a few thousand real steps on CPU;
# textarena is GuessTheNumber-v0 through the TextArena adapter, warm-started from random well-formed
# actions (its preset), as a game brought from elsewhere would be.
OTHER_ENVS = ("learning_check", "sokoban", "minishop", "textarena", "taxi")
# Beside the env folders: every method of an (env, seed) starts from one cloned policy, cloned once.
WARM_STARTS = "warm_starts"


def compose_run(overrides: list[str]) -> Resolved:
    """The validated config of ``python -m experiments.train *overrides``."""
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return validate(compose("train", overrides=overrides))


def method_overrides(env: str, method: str, extra: list[str] = ()) -> list[str]:
    """A method's overrides on the env's preset; a control's are matched to ``REFERENCE`` on that
    preset (with the same ``extra`` overrides)."""
    if method in CONTROLS:
        reference = compose_run([f"experiment={env}", *METHODS[REFERENCE], *extra])
        return control_overrides(reference, method)
    return METHODS[method]


def run_overrides(env: str, method: str, seed: int, args: argparse.Namespace, run_dir: Path) -> list[str]:
    """The Hydra overrides of one run; the run folder is quoted since its name holds ``=`` and ``,``."""
    marks = [f"trainer.eval_every_steps={args.eval_every_steps}"] if args.eval_every_steps else []
    return [
        f"experiment={env}", f"seed={seed}", *method_overrides(env, method, args.overrides),
        f"trainer.max_env_steps={args.env_steps}", f"trainer.iterations={args.iterations}", "trainer.progress=false",
        *marks, f"hydra.run.dir='{run_dir}'",
        f"trainer.warm_start.cache_dir='{args.out / WARM_STARTS}'",
        f"trainer.checkpoint_every={args.checkpoint_every}", *args.overrides,
    ]


def run_one(env: str, method: str, seed: int, args: argparse.Namespace) -> Path:
    """One run in ``<out>/<env>/method=<method>,seed=<seed>``: kept when done; when an earlier sweep
    was stopped during it, resumed from its newest checkpoint (it ends as an uninterrupted run would);
    else started in an empty folder."""
    run_dir = args.out / env / f"method={method},seed={seed}"
    if (run_dir / "done").exists() and not args.rerun:
        print(f"  kept {env}/{method}/seed {seed} (done; --rerun to repeat)", flush=True)
        return run_dir
    checkpoints = [] if args.rerun else list_checkpoints(run_dir / CHECKPOINTS)
    resume = bool(checkpoints)
    if resume:
        command = [sys.executable, "-m", "experiments.train", f"resume='{run_dir}'", "trainer.progress=false"]
        print(f"  resuming {env}/{method}/seed {seed} from {checkpoints[-1].name}", flush=True)
    else:
        command = [sys.executable, "-m", "experiments.train", *run_overrides(env, method, seed, args, run_dir)]
        if run_dir.exists():
            shutil.rmtree(run_dir)  # what a stopped run wrote before its first checkpoint, or a finished run
    env_vars = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log = run_dir.parent / f"method={method},seed={seed}.log"
    with log.open("a" if resume else "w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env_vars)
    print(f"  finished {env}/{method}/seed {seed}: {'ok' if code == 0 else f'FAILED (exit {code}, see {log})'}",
          flush=True)
    return run_dir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sample_efficiency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS + OTHER_ENVS),
                        help="experiment presets to run (experiment=<env>)")
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), choices=sorted(ALL_METHODS),
                        help="methods from the METHODS table (model-free algos, and mb_<algo>_r<ratio> with "
                             f"imagination) and the model-free controls matched to {REFERENCE}: {', '.join(CONTROLS)}")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="run seeds")
    parser.add_argument("--env-steps", type=int, default=40000, help="real env step budget of each run")
    parser.add_argument("--iterations", type=int, default=100000,
                        help="iteration cap of each run (high imagined ratios take many iterations per real step)")
    parser.add_argument("--eval-every-steps", type=int, default=None,
                        help="real env steps between held-out evaluations, the same marks for every method "
                             "(default: the preset's trainer.eval_every_steps)")
    parser.add_argument("--at", nargs="+", type=float, default=[], metavar="STEPS",
                        help="budgets of real env steps: a column of each method's success after each")
    parser.add_argument("--target", type=float, default=0.8, help="success rate whose real-step cost is reported")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one CPU thread each)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/sample_efficiency"), help="output folder")
    parser.add_argument("--rerun", action="store_true",
                        help="repeat runs from the start, also those that finished or were stopped midway")
    parser.add_argument("--checkpoint-every", type=int, default=10,
                        help="iterations between checkpoints; a sweep started again resumes a stopped run from its newest")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run, e.g. trainer.eval_episodes=64")
    return parser


def job_order(envs: list[str], seeds: list[int], methods: list[str]) -> list[tuple[str, str, int]]:
    """(env, method, seed) jobs: first one method per (env, seed), which clone the warm starts side by
    side, each its own, then the other methods seed by seed, which load them (runs that started
    together on one (env, seed) would both clone it)."""
    first = [(env, methods[0], seed) for env in envs for seed in seeds]
    rest = [(env, method, seed) for env in envs for seed in seeds for method in methods[1:]]
    return first + rest


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    jobs = job_order(args.envs, args.seeds, args.methods)
    print(f"{len(jobs)} runs, {args.env_steps} real env steps each, {args.jobs} at a time -> {args.out}", flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(lambda job: run_one(*job, args), jobs))
    for env in args.envs:
        print(f"\n## {env}")
        write_report(args.out / env, args.out / env, args.target, ignore=REPORT_IGNORE, name="sample_efficiency",
                     echo=True, at=args.at, names=method_name)
        print(headline(args.out / env, args.target))


def method_name(run) -> str | None:
    """A benchmark run's method, from its folder name ``method=<method>,seed=<seed>``."""
    fields = dict(part.partition("=")[::2] for part in run.path.name.split(","))
    return fields.get("method")


def is_model_based(method: str) -> bool:
    """Whether a method learns from a world model (its real steps are the ones it was fitted on)."""
    return "imagination=dyna" in METHODS.get(method, [])


def best(rows: list[SummaryRow], model_based: bool) -> SummaryRow | None:
    """The best row (the report's order) among the model-based methods, or among all the others: every
    model-free method and control."""
    chosen = [row for row in rows if is_model_based(row.label) == model_based]
    return chosen[0] if chosen else None


def headline(source: Path | list[Run], target: float) -> str:
    """One line: the best model-based method against the best model-free method or control, real steps
    to ``target`` by the report's rule, their per-seed ratio when both reached it on every seed
    (``paired_ratio_text``), and then the
    break-even cost of a real step (``experiments/reporting/break_even.py``); when the model-based row
    reached it on every seed and no model-free row did, a lower bound on the ratio
    (``steps_lower_bound``, the smallest over the model-free rows). ``source``: an env's folder, or its
    runs already loaded."""
    runs = load_runs(source) if isinstance(source, Path) else source
    configs = configurations(runs, REPORT_IGNORE, names=method_name)
    marks = common_marks(runs)
    rows = summary_rows(configs, target, marks=marks)
    mb, mf = best(rows, True), best(rows, False)
    if mb is None or mf is None:
        return "headline: needs a model-based method and a model-free one"
    text = f"headline: {arm_text(mb)} against {arm_text(mf)} real steps to {target:g}"
    if not (mb.seeds and mb.reached == mb.seeds and mb.steps_mean):
        return text
    if mf.reached == mf.seeds:
        text += ": " + paired_ratio_text(configs[mb.label], configs[mf.label], target, marks)
        if mb.step_seconds_mean is not None and mf.step_seconds_mean is not None:
            text += "; " + wall_clock_text(mb, mf)
        return text
    # No model-free row reached it on every seed: each is bounded below by the marks it still could.
    bounds = [steps_lower_bound(configs[row.label], target, marks) for row in rows if not is_model_based(row.label)]
    bound = min(b for b in bounds if b is not None)
    return (text + f": at least {bound / mb.steps_mean:.1f}x fewer (no model-free method or control held {target:g} "
            "on every seed; a seed that did not is counted at the earliest mark from which it still could)")


def paired_ratio_text(mb_runs: list[Run], mf_runs: list[Run], target: float, marks: float | None) -> str:
    """How many times fewer real steps the model-based runs needed than the model-free ones, seed by seed
    (``intervals.paired_log_ratio`` over the seeds both arms ran and did not fail): the geometric mean of
    the per-seed ratios and its 95% interval, or ``TOO_FEW`` in its place with fewer than two pairs."""
    def by_seed(runs: list[Run]) -> dict[int | None, float | None]:
        return {run.seed: run_steps_to_target(run, target, marks) for run in runs if run.status != "failed"}

    mb, mf = by_seed(mb_runs), by_seed(mf_runs)
    seeds = [seed for seed in mb if seed in mf and mb[seed] and mf[seed]]  # a seed at 0 steps has no ratio
    if not seeds:
        return "no seed of both arms reached it after 0 steps: no paired ratio"
    paired = paired_log_ratio([mb[seed] for seed in seeds], [mf[seed] for seed in seeds])
    if paired.interval is None:
        return f"{paired.ratio:.1f}x fewer ({TOO_FEW}: {paired.pairs} paired seed)"
    return (f"{paired.ratio:.1f}x fewer {interval_text(paired.interval, '{:.1f}')} (geometric mean of the "
            f"per-seed ratios over {paired.pairs} paired seeds, 95% interval)")


def arm_text(row: SummaryRow) -> str:
    """A row's label and real steps to the target, and how many of its seeds are still running: a sweep
    read halfway must not pass for a finished one."""
    running = f" ({row.running} still running)" if row.running else ""
    return f"{row.label} {row.steps_text()}{running}"


def wall_clock_text(mb: SummaryRow, mf: SummaryRow) -> str:
    """When the model-based row also reaches the target first in wall-clock time (the break-even cost of
    a real step), with each row's compute seconds per real step."""
    verdict = break_even_text(break_even_step_cost(mb.steps_mean, mb.step_seconds_mean, mf.steps_mean,
                                                   mf.step_seconds_mean))
    return f"{verdict} (compute per real step {mb.step_seconds_mean:.3f} s against {mf.step_seconds_mean:.3f} s)"


if __name__ == "__main__":
    main()
