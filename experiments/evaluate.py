"""Play a saved policy on held-out tasks of its env and print how it does.

    python -m experiments.evaluate outputs/2026-12-01/10-00-00_hidden_number_grpo_s0
    python -m experiments.evaluate RUN/checkpoints/iteration_00020 --episodes 500
    python -m experiments.evaluate path/to/hf_model --config RUN/config.yaml --device cuda
    python -m experiments.evaluate DREAM_RUN --env hidden_number --env-kwargs '{"n": 5}'

DIR is a run folder written by ``experiments.train`` (its final ``models/policy/`` is played, or an
older run's ``policy/``) or a policy folder (``RUN/models/policy``, ``RUN/checkpoints/iteration_N``, or
any local Hugging Face model folder with ``--config``). The env, its options, the turn cap and the prompt settings come from the run's
``config.yaml``. Actions are decoded greedily (the most likely token each step) unless ``--sample``.

The episodes' env seeds are held out: they come from the evaluation range of ``envs.splits``, which
no training seed is drawn from (and, for envs with observable tasks, only from tasks training never
draws). They are drawn from ``--seed``'s own stream and exclude the seeds the run itself evaluated on
while training, so this is a fresh check rather than a replay of the curve in metrics.jsonl; with
the same ``--seed`` every run of one env is judged on the same episodes. Prints success rate, mean
return, mean turns, the share of invalid actions and a few transcripts (failures and successes,
alternately); exits 1 with one line when DIR is not a run or policy folder.

``--env`` (with ``--env-kwargs``) plays the policy in another env than the run's, with the prompt
settings the run trained with: a policy trained in a learned model (``reverie/Dream-v0`` through
``env=gym_text``, docs/dream_gym.md) is judged in the real env it imagines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from envs.strict_json import strict_dumps
from envs.trajectory import Trajectory
from experiments.evaluation import (
    Evaluation,
    fresh_eval_seeds,
    play,
    render_transcript,
    summarise,
    training_eval_seeds,
)
from experiments.saved_run import SavedRun, SavedRunError, find_saved_run, load_policy, with_env

DEFAULT_EPISODES = 100
DEFAULT_TRANSCRIPTS = 3


def pick_transcripts(trajectories: Sequence[Trajectory], count: int) -> list[Trajectory]:
    """Up to ``count`` episodes, failures and successes alternately (a failure first), each kind in
    play order; when one kind runs out the other fills the rest."""
    failures = [t for t in trajectories if not t.success]
    successes = [t for t in trajectories if t.success]
    picked: list[Trajectory] = []
    while len(picked) < count and (failures or successes):
        first, second = (failures, successes) if len(picked) % 2 == 0 else (successes, failures)
        picked.append((first or second).pop(0))
    return picked


def format_summary(saved: SavedRun, result: Evaluation, episodes: int, greedy: bool, seed: int) -> str:
    options = ", ".join(f"{k}={v}" for k, v in saved.env_kwargs.items())
    decoding = (
        "greedy"
        if greedy
        else f"sampled (temperature {saved.policy.temperature:g}, top-p {saved.policy.top_p:g})"
    )
    return "\n".join(
        [
            f"policy      {saved.policy_dir}",
            f"env         {saved.env.name}" + (f" ({options})" if options else ""),
            f"episodes    {episodes} held-out (--seed {seed}), {decoding}",
            "",
            f"success rate          {result.success_rate:.3f}",
            f"mean return           {result.episodic_return:.3f}",
            f"mean turns            {result.episode_length:.2f}",
            f"invalid action rate   {result.invalid_action_rate:.3f}  (share of all turns)",
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.evaluate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dir", type=Path, metavar="DIR", help="a run folder, or a policy folder (see above)")
    parser.add_argument(
        "--episodes",
        type=_positive_int,
        default=DEFAULT_EPISODES,
        help=f"held-out episodes to play, one per env seed (default {DEFAULT_EPISODES})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="picks which held-out env seeds are played (and drives sampling with --sample); "
        "the same seed gives the same episodes for every run of one env (default 0)",
    )
    parser.add_argument(
        "--transcripts",
        type=_non_negative_int,
        default=DEFAULT_TRANSCRIPTS,
        help=f"episodes printed turn by turn, failures and successes alternately "
        f"(default {DEFAULT_TRANSCRIPTS})",
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help="sample actions at the run's temperature and top-p instead of greedy decoding",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="a run's config.yaml to take the env and policy settings from (default: the "
        "config.yaml of the run DIR belongs to); needed for a policy folder outside a run",
    )
    add_env_options(parser)
    parser.add_argument(
        "--device", default="cpu", help="torch device the policy runs on, e.g. cuda (default cpu)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="also write the figures and the env seeds played to this JSON file",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def add_env_options(parser: argparse.ArgumentParser) -> None:
    """``--env`` and ``--env-kwargs``: play in another env than the run's."""
    parser.add_argument(
        "--env",
        default=None,
        metavar="NAME",
        help="play in this env instead of the run's (e.g. the real env of a policy trained in a "
        "dream), with the run's prompt settings (default: the run's env)",
    )
    parser.add_argument(
        "--env-kwargs",
        type=_json_object,
        default=None,
        metavar="JSON",
        help='options of --env as a JSON object, e.g. \'{"n": 5, "max_turns": 3}\' (default {})',
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        saved = find_saved_run(args.dir, args.config)
        if args.env_kwargs is not None and args.env is None:
            raise SavedRunError("--env-kwargs needs --env (the env those options are for)")
        played = saved if args.env is None else with_env(saved, args.env, args.env_kwargs)
        # the run's own env builds the prompt: the policy is prompted as it was trained
        policy = load_policy(saved, greedy=not args.sample, seed=args.seed, device=args.device)
        saved = played
    except SavedRunError as error:
        print(f"experiments.evaluate: {error}", file=sys.stderr)
        return 1
    env_name, env_kwargs = saved.env.name, saved.env_kwargs
    seen_in_training = training_eval_seeds(env_name, env_kwargs, saved.seed, saved.eval_episodes)
    seeds = fresh_eval_seeds(env_name, env_kwargs, args.seed, args.episodes, exclude=seen_in_training)
    trajectories = play(
        policy, env_name, env_kwargs, seeds=seeds, max_turns=saved.max_turns, progress=not args.no_progress
    )
    result = summarise(trajectories)
    print(format_summary(saved, result, len(trajectories), not args.sample, args.seed))
    for i, trajectory in enumerate(pick_transcripts(trajectories, args.transcripts), start=1):
        print(f"\n--- transcript {i}: {render_transcript(trajectory)}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            strict_dumps(
                {
                    "policy": str(saved.policy_dir),
                    "env": env_name,
                    "env_kwargs": env_kwargs,
                    "greedy": not args.sample,
                    "seed": args.seed,
                    "episodes": len(trajectories),
                    "env_seeds": seeds,
                    **result.as_metrics("evaluate"),
                },
                indent=2,
            )
        )
    return 0


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error})") from error
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


if __name__ == "__main__":
    sys.exit(main())
