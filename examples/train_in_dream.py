"""Train Reverie's policy only in a learned world model, as a third-party gymnasium trainer would, then
judge it in the real env on held-out tasks.

    python examples/train_in_dream.py                      # hidden_number n=5 in 3 turns, a few CPU minutes
    python examples/train_in_dream.py --out outputs/dream_long --iterations 120 --lr 3e-4

Four commands, each printed before it runs (docs/dream_gym.md, "Training Reverie's policy in the dream"):

1. ``experiments.fit_world_model`` collects a few hundred real steps (half the episodes by the scripted
   expert, half by a random agent) and fits a small world model on them: the only real steps that
   training learns from.
2. The random agent's episodes of that data, as chat transcripts with messages only (a user's SFT
   data), teach the policy the action format (``trainer.warm_start.transcripts``): no new env step,
   and no strategy (the expert's episodes are left out).
3. ``experiments.train env=gym_text`` with the adapter pointed at ``reverie/Dream-v0``: every
   episode of RL, and the trainer's own evaluations, are imagined by the world model. The trainer
   counts them as its env's steps (its ledger's ``real_env_steps``); they are dream steps. The same
   command with ``trainer.iterations=1 algo.ppo.lr=0`` keeps the warm-started policy as it enters
   RL: the "before" policy (the warm start is cloned once and cached for both).
4. ``experiments.evaluate --env hidden_number`` plays both saved policies in the real env on
   held-out seeds, greedy and sampled (steps that judge, never train).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DREAM_ID = "imagination.gym_dream:reverie/Dream-v0"  # the module before the colon registers the env
ENV = "hidden_number"
ENV_KWARGS = {"n": 5, "max_turns": 3}  # binary search wins every game; a random guesser about half
DECODINGS = ("greedy", "sampled")  # the most likely action; the policy's own sampling, as it trains
BUDGETS = {
    # fit: real episodes and model updates; rl: iterations x groups x group size in the dream
    "default": {
        "episodes": 300, "fit_steps": 1500, "world_model": ["world_model=small"],
        "iterations": 40, "groups": 4, "group_size": 8, "clone_steps": 150, "dream_eval": 32, "real_eval": 200,
        "policy": [], "progress": "true",
    },
    "tiny": {  # the end-to-end test's: seconds, nothing learned
        "episodes": 16, "fit_steps": 6,
        "world_model": ["world_model.latent_size=32", "world_model.num_members=2", "world_model.head_hidden=16",
                        "world_model.encoder.embed_size=16", "world_model.encoder.feature_size=32",
                        "world_model.encoder.conv_layers=1", "world_model.decoder.model_size=16",
                        "world_model.decoder.num_layers=1", "world_model.decoder.num_heads=2",
                        "world_model.decoder.latent_slots=4"],
        "iterations": 2, "groups": 2, "group_size": 4, "clone_steps": 5, "dream_eval": 4, "real_eval": 4,
        "policy": ["policy.hidden_size=32", "policy.num_layers=1", "policy.num_heads=2",
                   "policy.intermediate_size=64"], "progress": "false",
    },
}


def fit_command(out: Path, budget: dict, seed: int) -> list[str]:
    """Step 1: real expert and random episodes, and a world model fitted on them."""
    env = [f"env={ENV}", f"env.kwargs.n={ENV_KWARGS['n']}", f"+env.kwargs.max_turns={ENV_KWARGS['max_turns']}"]
    return ["-m", "experiments.fit_world_model", *env, *budget["world_model"], f"data.episodes={budget['episodes']}",
            f"fit.steps={budget['fit_steps']}", f"fit.progress={budget['progress']}", f"seed={seed}", f"hydra.run.dir={out / 'fit'}"]


def dream_env_overrides(world_model: Path) -> list[str]:
    """``env=gym_text`` pointed at ``reverie/Dream-v0``: ``gymnasium.make(id, world_model=..., env=...,
    env_kwargs=...)`` builds the env the trainer plays."""
    kwargs = [f"+env.kwargs.kwargs.env_kwargs.{k}={v}" for k, v in ENV_KWARGS.items()]
    return ["env=gym_text", "env.kwargs.entry_point=gymnasium:make", f"+env.kwargs.kwargs.id={DREAM_ID}",
            f"+env.kwargs.kwargs.world_model={world_model}", f"+env.kwargs.kwargs.env={ENV}", *kwargs]


def train_command(out: Path, run: str, budget: dict, seed: int, transcripts: Path, iterations: int,
                  *extra: str) -> list[str]:
    """Step 3: GRPO in the dream, warm-started on the format transcripts."""
    b = budget
    return ["-m", "experiments.train", "experiment=gym_text", *dream_env_overrides(out / "fit" / "models" / "world_model"),
            "algo=grpo", "imagination=model_free", f"seed={seed}",
            f"trainer.warm_start.transcripts={transcripts}",
            "trainer.warm_start.target_success=1.0",  # clone every step: the dream's success check is lenient
            f"trainer.warm_start.max_steps={b['clone_steps']}", f"trainer.warm_start.eval_episodes={b['dream_eval']}",
            f"trainer.warm_start.cache_dir={out / 'warm_start_cache'}",
            f"trainer.iterations={iterations}", f"trainer.groups_per_iteration={b['groups']}",
            f"trainer.group_size={b['group_size']}", f"trainer.eval_episodes={b['dream_eval']}",
            f"trainer.progress={b['progress']}", *b["policy"], *extra, f"hydra.run.dir={out / run}"]


def evaluate_command(out: Path, run: str, episodes: int, seed: int, decoding: str) -> list[str]:
    """Step 4: the run's saved policy in the real env, on held-out seeds, ``greedy`` or ``sampled``."""
    return ["-m", "experiments.evaluate", str(out / run), "--env", ENV, "--env-kwargs", json.dumps(ENV_KWARGS),
            "--episodes", str(episodes), "--seed", str(seed), "--transcripts", "0",
            *(["--sample"] if decoding == "sampled" else []), "--json", str(out / f"real_{run}_{decoding}.json")]


def write_format_transcripts(fit_dir: Path, path: Path) -> int:
    """The random agent's training episodes of the fit (the second half of the ids: the expert plays the
    first ``data.expert_fraction``, 0.5), messages only; returns their turn count."""
    sys.path.insert(0, str(REPO))
    from envs import TrajectoryStore
    from envs.chat import trajectory_to_messages

    episodes = sorted(TrajectoryStore(fit_dir / "trajectories" / "train").load(), key=lambda t: t.trajectory_id)
    random_agent = episodes[round(len(episodes) * 0.5):]
    path.write_text("".join(json.dumps({"messages": trajectory_to_messages(t)}) + "\n" for t in random_agent))
    return sum(t.num_turns for t in random_agent)


def run(args: list[str]) -> None:
    print(f"\n$ python {shlex.join(args)}", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, *args], cwd=REPO, env=env, check=True)


def report(out: Path) -> dict:
    """The figures of the four steps, read back from what each command wrote."""
    fit = json.loads((out / "fit" / "summary.json").read_text())
    dream = json.loads((out / "dream_run" / "summary.json").read_text())
    real = {(run, decoding): json.loads((out / f"real_{run}_{decoding}.json").read_text())
            for run in ("before_rl", "dream_run") for decoding in DECODINGS}

    def before_after(decoding: str, key: str) -> tuple[float, float]:
        return real["before_rl", decoding][f"evaluate/{key}"], real["dream_run", decoding][f"evaluate/{key}"]

    return {
        "real_steps_fit": fit["env_steps"]["train"] + fit["env_steps"]["val"],
        "fit_episodes": fit["episodes"]["train"] + fit["episodes"]["val"],
        "dream_steps_rl": dream["ledger"]["real_env_steps"],
        "dream_steps_checks": dream["ledger"]["warm_start_check_steps"] or 0,
        "dream_steps_eval": dream["ledger"]["eval_env_steps"],
        "dream_success": (dream["initial_success"], dream["final_success"]),
        **{f"real_success_{d}": before_after(d, "success_rate") for d in DECODINGS},
        **{f"real_invalid_{d}": before_after(d, "invalid_action_rate") for d in DECODINGS},
        "real_eval_episodes": real["dream_run", "greedy"]["episodes"],
        "real_eval_steps": round(sum(r["episodes"] * r["evaluate/episode_length"] for r in real.values())),
    }


def print_report(figures: dict, clone_turns: int) -> None:
    f = figures
    print("\n== trained in reverie/Dream-v0 only, judged in the real env ==")
    print(f"real env steps that training learned from   {f['real_steps_fit']}  ({f['fit_episodes']} episodes, "
          f"half expert half random, for the world model fit; {clone_turns} of them, the random agent's, "
          "are the format transcripts)")
    print(f"dream steps of RL                            {f['dream_steps_rl']}  (the trainer's real_env_steps: its env is the dream)")
    print(f"dream steps of checks and evaluations        {f['dream_steps_checks'] + f['dream_steps_eval']}")
    print(f"real env steps that judged, never trained    {f['real_eval_steps']}  ({f['real_eval_episodes']} held-out "
          "episodes per policy and decoding)")
    print(f"success in the dream (its held-out evals)    before RL {f['dream_success'][0]:.3f}  after {f['dream_success'][1]:.3f}")
    for d in DECODINGS:
        success, invalid = f[f"real_success_{d}"], f[f"real_invalid_{d}"]
        print(f"success in the real env, {d:<8}            before RL {success[0]:.3f}  after {success[1]:.3f}")
        print(f"invalid actions in the real env, {d:<8}    before RL {invalid[0]:.3f}  after {invalid[1]:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "train_in_dream", help="folder of the four steps")
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="default", help="tiny: the test's, seconds")
    parser.add_argument("--iterations", type=int, default=None, help="RL iterations in the dream (default: the budget's)")
    parser.add_argument("--lr", type=float, default=None, help="the policy's RL learning rate (default: the preset's, 1e-4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fit, the run and the held-out draw")
    args = parser.parse_args(argv)
    budget = dict(BUDGETS[args.budget], **({"iterations": args.iterations} if args.iterations else {}))
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    print("[1/4] real episodes and a world model fitted on them", flush=True)
    run(fit_command(out, budget, args.seed))
    print("\n[2/4] format transcripts from the fit's random-agent episodes (no new env step)", flush=True)
    clone_turns = write_format_transcripts(out / "fit", out / "format_transcripts.jsonl")
    print(f"{clone_turns} turns in {out / 'format_transcripts.jsonl'}")
    print("\n[3/4] the warm-started policy kept as it enters RL (lr 0), then GRPO in the dream", flush=True)
    transcripts = out / "format_transcripts.jsonl"
    run(train_command(out, "before_rl", budget, args.seed, transcripts, 1, "algo.ppo.lr=0"))
    lr = [] if args.lr is None else [f"algo.ppo.lr={args.lr}"]
    run(train_command(out, "dream_run", budget, args.seed, transcripts, budget["iterations"], *lr))
    print("\n[4/4] both policies in the real env, held-out seeds", flush=True)
    for name in ("before_rl", "dream_run"):
        for decoding in DECODINGS:
            run(evaluate_command(out, name, budget["real_eval"], args.seed, decoding))
    figures = report(out)
    print_report(figures, clone_turns)
    (out / "report.json").write_text(json.dumps({**figures, "format_transcript_turns": clone_turns}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
