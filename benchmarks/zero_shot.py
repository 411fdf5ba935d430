"""Zero-shot SmolLM2-135M-Instruct: held-out success and invalid-action rate on every built-in env and
two TextArena games, under each way of prompting it.

    python -m benchmarks.zero_shot [--episodes 8] [--max-turns 4] [--prompts fixed env few-shot]

Prompts: ``fixed``, the one system message every env had before (``policy.render.SYSTEM_PROMPT``);
``env``, the env's own (``policy.chat_preamble.env_system_prompt``: its format line and an example);
``few-shot``, the env's own plus one scripted-expert episode on a training task as earlier turns (envs
with an expert only). Episodes are held-out tasks, sampled as training samples them (temperature 1,
the smollm2 preset's token budgets). Prints a markdown table, the prompts used and the peak memory.
Minutes on one CPU thread; the model is read from the de-quantised cache (written on first use).
"""

from __future__ import annotations

import argparse
import resource
import time

from tqdm.auto import tqdm

from envs.registry import ENVIRONMENTS, capabilities
from envs.seeding import derive_seed
from envs.splits import split_seeds
from experiments.evaluation import evaluate
from policy.chat_preamble import chat_preamble
from policy.config import PolicyConfig
from policy.lm_policy import LMPolicy
from policy.model import load_pretrained
from policy.render import SYSTEM_PROMPT

TEXTARENA_GAMES = ("GuessTheNumber-v0", "TowerOfHanoi-v0")  # single-player, no data to download
CASES = [(name, {}) for name in ENVIRONMENTS] + [("textarena", {"game": game}) for game in TEXTARENA_GAMES]
PROMPTS = ("fixed", "env", "few-shot")


def case_label(env_name: str, env_kwargs: dict) -> str:
    return env_kwargs.get("game", env_name)


def preamble(prompt: str, env_name: str, env_kwargs: dict, seed: int, max_turns: int) -> dict | None:
    """The policy's system message and prior turns for ``prompt``; None when the env cannot offer it."""
    if prompt == "fixed":
        return {"system_prompt": SYSTEM_PROMPT, "prior": []}
    if prompt == "few-shot" and not capabilities(env_name, **env_kwargs).expert:
        return None
    return chat_preamble(env_name, env_kwargs, system_prompt=None, few_shot=int(prompt == "few-shot"),
                         seed=derive_seed(seed, "few-shot"), max_turns=max_turns)


def measure(model, tokenizer, cfg: PolicyConfig, args, env_name: str, env_kwargs: dict, prompt: str) -> dict | None:
    """Success and invalid-action rate of ``args.episodes`` held-out episodes (None: prompt not offered)."""
    keywords = preamble(prompt, env_name, env_kwargs, args.seed, args.max_turns)
    if keywords is None:
        return None
    policy = LMPolicy(model, tokenizer, cfg, seed=derive_seed(args.seed, "zero-shot-sampling"), **keywords).eval()
    seeds = split_seeds(env_name, env_kwargs, "eval", seed=derive_seed(args.seed, "eval"), count=args.episodes)
    start = time.perf_counter()
    result = evaluate(policy, env_name, env_kwargs, seeds=seeds, max_turns=args.max_turns)
    return {"success": result.success_rate, "invalid": result.invalid_action_rate, "turns": result.episode_length,
            "seconds": time.perf_counter() - start, "system": keywords["system_prompt"],
            "prior_turns": len(keywords["prior"]) // 2}


def markdown_table(rows: list[tuple[str, str, dict | None]]) -> str:
    lines = ["| env | prompt | success | invalid-action rate | mean turns | seconds |", "|---|---|---|---|---|---|"]
    for label, prompt, m in rows:
        if m is None:
            lines.append(f"| {label} | {prompt} | n/a (no expert) | | | |")
        else:
            lines.append(f"| {label} | {prompt} | {m['success']:.2f} | {m['invalid']:.2f} | {m['turns']:.1f} | "
                         f"{m['seconds']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=8, help="held-out episodes per env and prompt")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--prompts", nargs="+", choices=PROMPTS, default=list(PROMPTS))
    parser.add_argument("--model", default="smollm2", help="policy.pretrained: a packaged name, folder or .gguf")
    parser.add_argument("--max-prompt-tokens", type=int, default=1024, help="room for a few-shot episode")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model, tokenizer = load_pretrained(args.model)
    model.eval()
    cfg = PolicyConfig(pretrained=args.model, max_prompt_tokens=args.max_prompt_tokens)
    rows, systems = [], {}
    jobs = [(env_name, env_kwargs, prompt) for env_name, env_kwargs in CASES for prompt in args.prompts]
    for env_name, env_kwargs, prompt in tqdm(jobs, desc="zero-shot"):
        m = measure(model, tokenizer, cfg, args, env_name, env_kwargs, prompt)
        rows.append((case_label(env_name, env_kwargs), prompt, m))
        tqdm.write(markdown_table(rows[-1:]).splitlines()[-1])  # each row as it is measured
        if m is not None and prompt != "fixed":
            systems[case_label(env_name, env_kwargs)] = m["system"]
    print(f"\n{args.model}: {args.episodes} held-out episodes per row, at most {args.max_turns} turns, "
          f"temperature {cfg.temperature}, seed {args.seed}\n")
    print(markdown_table(rows))
    print(f"\nfixed system message: {SYSTEM_PROMPT}")
    for label, system in systems.items():
        print(f"\nenv system message, {label}:\n{system}")
    print(f"\npeak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
