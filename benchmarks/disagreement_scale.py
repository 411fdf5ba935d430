"""The scale of the world model's disagreement score, pooled by its largest token and by its mean.

    python -m benchmarks.disagreement_scale [--env hidden_number] [--env-kwargs JSON]
        [--episodes 128] [--steps 300] [--seed 0]

Fits the ``model_based`` preset's world model (latent 64, three members, one 32-wide decoder layer)
on random and expert episodes of the env, then samples one imagined step (``WorldModel.step``, as
``DreamEnv`` does) from the true history before every turn of held-out random and expert episodes,
and prints quantiles of the step's disagreement under each pooling (``sum``, the default,
``max``, and ``mean``, the older score) and the share of steps above a few thresholds. Both poolings score the
same sampled words (the generator is reseeded; pooling does not change what is drawn). The presets'
``halt_uncertainty`` and ``reward_penalty`` are set from these figures. Last, each pooling's AUROC
as a score for a wrong greedy one-step prediction (the world-model benchmark's ``auroc``).

``--copy-observation`` gives the decoder the copy path (``world_model.decoder.copy_observation``), and
``--aligned-copy`` with it decoding as an edit of that observation (``world_model.decoder.aligned_copy``).
``--bootstrap`` fits each member on its own resample of every batch (``world_model.bootstrap``).
``--shift``: the members are fitted on random-agent episodes only and scored on held-out expert
episodes, transitions of a different policy than the one the model learned from (with the default,
both kinds are in the fit and in the held-out set).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import torch

from benchmarks.world_model.metrics import auroc
from benchmarks.world_model.scoring import greedy_step, history_states, normalised
from envs import ExpertAgent, RandomAgent, collect
from envs.splits import split_seeds
from world_model import TurnTokenizer, WorldModel, WorldModelConfig
from world_model.disagreement_score import SCORES
from world_model.lightning_module import fit_world_model
from world_model.state import WorldState

# World-model sizes: ``model_based``, the preset's small model (what the loop refits); ``default``, the
# world-model group's default decoder with a 128 latent and three members (the benchmark's ablation size).
SIZES = {
    "model_based": {"latent_size": 64, "num_members": 3,
                    "decoder": {"model_size": 32, "num_layers": 1, "num_heads": 2, "latent_slots": 4}},
    "default": {"latent_size": 128, "num_members": 3, "decoder": {}},
}
QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99)


def episodes(env: str, kwargs: dict, count: int, split: str, seed: int,
             kinds: Sequence[str] = ("random", "expert")) -> list:
    """``count`` episodes on distinct ``split`` tasks (``envs.splits``: train and eval tasks are disjoint),
    split evenly over ``kinds`` (``random``: a uniform random agent; ``expert``: the env's scripted expert)."""
    seeds = split_seeds(env, kwargs, split, seed=seed, count=count)
    agents = {"random": RandomAgent(seed), "expert": ExpertAgent()}
    return [episode for i, kind in enumerate(kinds)
            for episode in collect(agents[kind], env, env_kwargs=kwargs, group_size=1,
                                   group_seeds=seeds[i :: len(kinds)], progress=False)]


def step_scores(model: WorldModel, states: WorldState, actions: Sequence[str], pooling: str, seed: int) -> torch.Tensor:
    """``(R,)`` the disagreement of one sampled step from each of the ``R`` held-out ``states`` after its
    action, pooled by ``pooling``."""
    model.config.disagreement = pooling
    _, predictions = model.step(states, actions, generator=torch.Generator().manual_seed(seed))
    return predictions.uncertainty


def main(argv: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="hidden_number")
    p.add_argument("--env-kwargs", default='{"n": 5, "max_turns": 3, "observation": "transcript"}',
                   help="JSON; the default is the learning_check task the model_based preset runs")
    p.add_argument("--episodes", type=int, default=128, help="training episodes on train tasks (as many again on held-out eval tasks)")
    p.add_argument("--steps", type=int, default=300, help="fit steps (a run's first fit)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bootstrap", action="store_true", help="each member fitted on its own resample of each batch")
    p.add_argument("--size", choices=sorted(SIZES), default="model_based", help="world-model sizes (see SIZES)")
    p.add_argument("--copy-observation", action="store_true",
                   help="the decoder also reads the latest observation (world_model.decoder.copy_observation)")
    p.add_argument("--aligned-copy", action="store_true",
                   help="with --copy-observation: decoding as an edit of it (world_model.decoder.aligned_copy)")
    p.add_argument("--shift", action="store_true",
                   help="fit on random-agent episodes only, score on held-out expert episodes")
    args = p.parse_args(argv)
    kwargs = json.loads(args.env_kwargs)
    tokenizer = TurnTokenizer.for_env(args.env, kwargs)
    sizes = SIZES[args.size]
    preset = {**sizes, "decoder": {**sizes["decoder"], "copy_observation": args.copy_observation,
                                   "aligned_copy": args.aligned_copy}}
    config = WorldModelConfig.for_tokenizer(tokenizer, **preset, bootstrap=args.bootstrap)
    model = WorldModel(config, tokenizer, seed=args.seed)
    train_kinds, held_kinds = (("random",), ("expert",)) if args.shift else (("random", "expert"),) * 2
    train = episodes(args.env, kwargs, args.episodes, "train", args.seed, train_kinds)
    held_out = episodes(args.env, kwargs, args.episodes, "eval", args.seed, held_kinds)
    fit_world_model(train, [], model, max_steps=args.steps, batch_size=16, lr=1e-3, seed=args.seed)
    model.eval()
    states, _ = history_states(model, held_out)  # the state before every held-out turn, encoded once
    actions = [turn.action for t in held_out for turn in t.turns]
    scores = {pooling: step_scores(model, states, actions, pooling, args.seed) for pooling in SCORES}
    setting = f"size {args.size}, copy {args.copy_observation}, aligned {args.aligned_copy}, bootstrap {args.bootstrap}, fitted on {'+'.join(train_kinds)}, scored on {'+'.join(held_kinds)}"
    print(f"{args.env} {kwargs}: {len(scores['max'])} imagined steps from held-out states, {args.steps} fit steps, "
          f"{setting}")
    print("pooling " + " ".join(f"p{round(q * 100):>2}".rjust(8) for q in QUANTILES) + "  share > 0.03, 0.1, 0.3")
    for pooling, u in scores.items():
        qs = torch.quantile(u.double(), torch.tensor(QUANTILES, dtype=torch.double))
        shares = [float((u > t).float().mean()) for t in (0.03, 0.1, 0.3)]
        print(f"{pooling:<7} " + " ".join(f"{float(q):8.4f}" for q in qs) + "  " + " ".join(f"{s:.2f}" for s in shares))
    wanted = normalised(tokenizer, [turn.next_observation for t in held_out for turn in t.turns])
    line = []
    for pooling in SCORES:
        model.config.disagreement = pooling
        _, greedy = greedy_step(model, states, actions)
        wrong = [p != w for p, w in zip(greedy.observations, wanted, strict=True)]
        line.append(f"{pooling} {auroc(greedy.uncertainty.tolist(), wrong):.3f}")
    print(f"AUROC for a wrong greedy step ({sum(wrong)} wrong of {len(wrong)}): " + ", ".join(line))
    return scores


if __name__ == "__main__":
    main()
