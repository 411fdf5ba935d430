"""``python -m benchmarks.world_model``: options, the streamed tables, targets and figures."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.world_model.data import ENVS
from benchmarks.world_model.models import MODELS
from benchmarks.world_model.plots import plot_calibration, plot_curves
from benchmarks.world_model.report import (
    NOTE,
    format_ablation,
    format_costs,
    format_row,
    format_table,
    format_targets,
    header,
)
from benchmarks.world_model.run import (
    DEFAULT_ENVS,
    DEFAULT_SIZES,
    DEFAULT_STEPS,
    Result,
    Row,
    run,
)
from experiments.world_model_source import lm_pretrained_folder
from world_model.lm import LMOptions

ABLATIONS = {"copy_observation": ["latent", "copy"], "aligned_copy": ["copy", "edit"],
             "ordinal_numbers": ["latent", "ordinal"]}
"""Per ablation, the models (off, on) it fits side by side."""
QUICK = {"sizes": [30, 60], "steps": [2], "eval_transitions": 30, "shift_size": 30, "shift_steps": 2,
         "batch_size": 8, "latent_size": 32, "members": 2}
FULL = {"eval_transitions": 500, "shift_size": 1000, "shift_steps": 600, "batch_size": 32, "latent_size": 128,
        "members": 5}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.world_model",
                                description="Learning curves of the world model on held-out transitions, "
                                "against exact answers where known.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS), choices=sorted(ENVS), help="envs to benchmark")
    p.add_argument("--sizes", nargs="+", type=int, default=None,
                   help=f"real training transitions per fit, the curve's x (default {list(DEFAULT_SIZES)})")
    p.add_argument("--steps", nargs="+", type=int, default=None,
                   help=f"optimiser steps per fit, one per size or one for all (default {list(DEFAULT_STEPS)} "
                   "for the default sizes, else 300 each)")
    p.add_argument("--eval-transitions", type=int, default=None,
                   help=f"held-out transitions (eval-split seeds) per env (default {FULL['eval_transitions']})")
    p.add_argument("--shift-size", type=int, default=None,
                   help=f"transitions of the random-only fit scored on expert episodes (default {FULL['shift_size']}; 0: skip)")
    p.add_argument("--shift-steps", type=int, default=None,
                   help=f"optimiser steps of that fit (default {FULL['shift_steps']})")
    p.add_argument("--batch-size", type=int, default=None, help=f"trajectories per batch (default {FULL['batch_size']})")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
    p.add_argument("--latent-size", type=int, default=None, help=f"latent size (default {FULL['latent_size']})")
    p.add_argument("--members", type=int, default=None, help=f"ensemble members (default {FULL['members']})")
    p.add_argument("--models", nargs="+", default=["latent"], choices=list(MODELS),
                   help="world models to fit and score on the same data, row by row (copy: the latent model "
                   "with world_model.decoder.copy_observation; edit: copy with world_model.decoder.aligned_copy; "
                   "ordinal: latent with world_model.ordinal_numbers)")
    p.add_argument("--ablation", choices=sorted(ABLATIONS), default=None,
                   help="fit the latent model with the option off and on (same data, budget and seed) and print "
                   "one row each in an ablation table; replaces --models")
    p.add_argument("--lm-history-turns", type=int, default=4, help="lm: turns of history in the prompt")
    p.add_argument("--lm-hidden-size", type=int, default=64, help="lm: width of each member")
    p.add_argument("--lm-layers", type=int, default=2, help="lm: decoder blocks per member")
    p.add_argument("--lm-pretrained", default=None,
                   help="lm: start from a pretrained model (world_model.lm.pretrained: a Hugging Face folder, a "
                   ".gguf file or smollm2) instead of tiny members; --lm-hidden-size/--lm-layers then stay unset")
    p.add_argument("--lm-lora-rank", type=int, default=0,
                   help="lm with --lm-pretrained: K LoRA adapters of this rank on one frozen base (0: K full copies)")
    p.add_argument("--bootstrap", action="store_true",
                   help="train each member of either model on its own resample of every batch (world_model.bootstrap)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data split draw, the agents and the fits")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {QUICK} unless given explicitly; no quality claims")
    p.add_argument("--out", type=Path, default=Path("outputs/benchmarks"),
                   help="folder for world_model.png and world_model_calibration.png")
    return p


def lm_options(args: argparse.Namespace) -> LMOptions:
    """The LM's options from the ``--lm-*`` flags; a pretrained source is resolved to a local folder first
    (a GGUF file or ``smollm2`` through the de-quantised cache), failing in one line naming the key."""
    pretrained = None if args.lm_pretrained is None else lm_pretrained_folder(args.lm_pretrained)
    return LMOptions(history_turns=args.lm_history_turns, hidden_size=args.lm_hidden_size,
                     intermediate_size=2 * args.lm_hidden_size, num_layers=args.lm_layers, pretrained=pretrained,
                     lora_rank=args.lm_lora_rank)


def main(argv: Sequence[str] | None = None) -> Result:
    args = parser().parse_args(argv)
    if args.ablation is not None:
        args.models = ABLATIONS[args.ablation]
    base = QUICK if args.quick else FULL
    opt = {k: (getattr(args, k) if getattr(args, k, None) is not None else v) for k, v in {**FULL, **base}.items()
           if k not in ("sizes", "steps")}
    sizes = list(args.sizes or base.get("sizes", DEFAULT_SIZES))
    steps = list(args.steps or base.get("steps") or
                 (DEFAULT_STEPS if sizes == list(DEFAULT_SIZES) else [300]))
    if len(steps) == 1:
        steps = steps * len(sizes)
    shift = (opt["shift_size"], opt["shift_steps"]) if opt["shift_size"] > 0 else None
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no per-fit GPU/TPU banner
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    print(f"models {args.models}, envs {args.envs}, sizes {sizes}, steps per fit {steps}, shift fit {shift}, {opt}, "
          f"bootstrap {args.bootstrap}", flush=True)
    current: list[str] = []

    def log(row: Row) -> None:
        if row.env not in current:
            current.append(row.env)
            print(header(row.env), flush=True)
        print(format_row(row), flush=True)

    result = run(args.envs, sizes, steps, eval_transitions=opt["eval_transitions"], shift=shift,
                 batch_size=opt["batch_size"], lr=args.lr, latent_size=opt["latent_size"], members=opt["members"],
                 bootstrap=args.bootstrap, seed=args.seed, log=log, progress=True, models=args.models,
                 lm_options=lm_options(args))
    print("\n" + format_table(result))
    print(format_costs(result))
    print(format_targets(result))
    if args.ablation is not None:
        print(format_ablation(result, args.ablation, *ABLATIONS[args.ablation]))
    print(NOTE)
    plot_curves(result, args.out / "world_model.png")
    print(f"wrote {args.out / 'world_model.png'}")
    if plot_calibration(result, args.out / "world_model_calibration.png"):
        print(f"wrote {args.out / 'world_model_calibration.png'}")
    return result
