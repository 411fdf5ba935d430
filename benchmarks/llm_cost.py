"""What SmolLM2-135M-Instruct with LoRA costs on CPU: collection, the update, one iteration's memory.

    python -m benchmarks.llm_cost [--rows 8] [--new-tokens 12] [--repeats 2] [--episodes 64] [--minibatch-size N]
        [--micro-batch-size N] [--memory-limit-gb 6] [--skip-compare] [--skip-update] [--skip-iteration]

1. Collection: tokens per second of Reverie's sampling path (``LMPolicy.generate``, what collection calls)
   against Hugging Face ``model.generate`` on the same ``--rows`` rows of one group's first prompt
   (hidden_number, the env's own system message), ``--new-tokens`` at most, temperature 1
   (``benchmarks.llm_sampling_cost``).
2. The LoRA update: tokens per second of ``PPOLearner.update`` on those sampled rows (one minibatch, one
   optimizer step per update; ``benchmarks.llm_update_cost``) and, when ``trl`` is installed
   (``pip install -e '.[bench]'``), of TRL's GRPOTrainer loss on the same rows and LoRA, with both losses
   at the same weights compared (``benchmarks.llm_trl_update``). ``--skip-update`` leaves this part out.
3. One default-size iteration (``--episodes`` = groups_per_iteration x group_size, 64 by default) of
   ``policy=smollm2 algo=grpo`` on hidden_number, run by ``experiments.train`` in a child process: its
   peak resident memory and wall time (``benchmarks.llm_iteration_memory``). ``--minibatch-size`` sets
   ``algo.ppo.minibatch_size`` (64 by default), ``--micro-batch-size`` ``algo.ppo.micro_batch_size`` (rows
   per forward and backward pass; none by default); the child is killed once it passes ``--memory-limit-gb``.

Tokens per second are per CPU second of this process (one thread: ``OMP_NUM_THREADS=1``), robust to a
shared machine; wall seconds are printed beside them. The model is read from the de-quantised cache.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource

from benchmarks.llm_iteration_memory import current_rss_bytes, maxrss_bytes, one_iteration
from benchmarks.llm_sampling_cost import Timed, compare_sampling, group_prompt
from benchmarks.llm_trl_update import trl_missing, trl_updates
from benchmarks.llm_update_cost import reverie_updates, update_rows
from policy.chat_preamble import run_preamble
from policy.config import LoRAConfig, PolicyConfig
from policy.lm_policy import LMPolicy
from policy.lora import add_lora
from policy.model import load_pretrained

ENV, ENV_KWARGS = "hidden_number", {"n": 16, "observation": "transcript"}  # experiments/conf/env/hidden_number.yaml
GROUP_SIZE = 8  # trainer.group_size's default
GIB = 1024**3


def smollm2_policy(new_tokens: int, seed: int) -> LMPolicy:
    """The ``policy=smollm2`` preset's policy (LoRA rank 8, alpha 16, scored logits), as the trainer builds it."""
    cfg = PolicyConfig(pretrained="smollm2", scored_logits=True, max_action_tokens=new_tokens,
                       lora=LoRAConfig(rank=8, alpha=16.0))
    model, tokenizer = load_pretrained(cfg.pretrained, cfg.model_cache_dir)
    adapters = add_lora(model, cfg.lora, seed=seed)
    preamble = run_preamble(ENV, ENV_KWARGS, cfg, run_seed=seed, max_turns=None)
    return LMPolicy(adapters.base_model.model, tokenizer, cfg, seed=seed, adapters=adapters, **preamble)


def peak_gib() -> float:
    """This process's peak resident memory (since the last ``reset_peak``), GiB: Linux's VmHWM, else ru_maxrss."""
    peak = current_rss_bytes(os.getpid(), field="VmHWM")
    return (peak if peak is not None else maxrss_bytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)) / GIB


def reset_peak() -> None:
    """Start this process's peak memory afresh (Linux: ``5`` to ``/proc/self/clear_refs``), so each part
    reports its own; elsewhere the peaks stay cumulative."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def rate_line(name: str, timed: Timed) -> str:
    return (f"  {name:<28} {timed.tokens:>6} tokens  {timed.cpu_s:8.2f} CPU s  {timed.per_cpu_second:9.1f} tok/CPU s"
            f"  ({timed.wall_s:.2f} wall s, {timed.per_wall_second:.1f} tok/wall s)")


def ratio_line(label: str, ours: Timed, theirs: Timed) -> str:
    return f"  {label}: {ours.per_cpu_second / theirs.per_cpu_second:.2f}x (per CPU second; target >= 1.5x)"


def sampling_part(policy: LMPolicy, prompt: str, args) -> dict:
    print(f"1. Collection: {args.rows} rows of one prompt ({len(policy.tokenizer(prompt).input_ids)} tokens), "
          f"at most {args.new_tokens} new tokens, temperature 1, {args.repeats} repeats")
    result = compare_sampling(policy, prompt, args.rows, args.seed, args.repeats)
    print(rate_line("Reverie LMPolicy.generate", result["reverie"]))
    print(rate_line("HF model.generate", result["hf"]))
    print(ratio_line("Reverie / HF", result["reverie"], result["hf"]))
    print(f"  peak RSS of this process (load and sampling): {peak_gib():.2f} GiB")
    return result


def update_part(policy: LMPolicy, generation, args) -> None:
    data = update_rows(generation, policy.pad_token_id, policy.tokenizer.eos_token_id, args.seed)
    print(f"2. LoRA update: {len(data.actions)} rows, {data.tokens} tokens ({int(data.batch.response_mask.sum())} "
          f"action tokens), one optimizer step per update, {args.repeats} updates")
    missing = trl_missing()
    trl = None
    gc.collect()
    if missing is None:
        reset_peak()
        trl = trl_updates(policy.adapters, policy.tokenizer, data, pad=policy.pad_token_id,
                          max_new_tokens=args.new_tokens, lr=args.lr, repeats=args.repeats)
        gc.collect()
        print(f"  peak RSS of this process during TRL's updates: {peak_gib():.2f} GiB")
    reset_peak()
    loss, ours = reverie_updates(policy.model, data, lr=args.lr, repeats=args.repeats, scored_logits=True)
    print(rate_line("Reverie PPOLearner.update", ours))
    print(f"  peak RSS of this process during Reverie's updates: {peak_gib():.2f} GiB")
    if trl is None:
        print(f"  TRL: {missing}")
        return
    print(rate_line("TRL GRPOTrainer loss", trl[1]))
    print(ratio_line("Reverie / TRL", ours, trl[1]))
    gap = abs(loss - trl[0])
    print(f"  first-update loss: Reverie {loss:.8f}, TRL {trl[0]:.8f}, |difference| {gap:.2e} "
          f"({'agree' if gap <= 1e-5 else 'DIFFER'} to 1e-5)")


def iteration_part(args) -> None:
    group_size = min(GROUP_SIZE, args.episodes)
    groups = max(1, args.episodes // group_size)
    minibatch = "64 (the default)" if args.minibatch_size is None else args.minibatch_size
    micro = "no" if args.micro_batch_size is None else f"{args.micro_batch_size}-row"
    print(f"3. One iteration in a child process: {groups} groups x {group_size} episodes, minibatch {minibatch} rows, {micro} micro-batches "
          f"(policy=smollm2 algo=grpo env=hidden_number, no warm start, 1 evaluation episode before and after; "
          f"killed above {args.memory_limit_gb} GiB)")
    run = one_iteration(groups, group_size, minibatch_size=args.minibatch_size, micro_batch_size=args.micro_batch_size,
                        limit_bytes=int(args.memory_limit_gb * GIB), timeout_s=args.iteration_timeout)
    if run.stopped:
        print(f"  STOPPED: resident memory passed {args.memory_limit_gb} GiB after {run.wall_s:.0f} s "
              f"(peak seen {run.peak_rss_bytes / GIB:.2f} GiB; target < 4 GB)")
    elif run.returncode != 0:
        print(f"  the run failed (exit status {run.returncode}):\n{run.output_tail}")
    else:
        print(f"  peak RSS {run.peak_rss_bytes / GIB:.2f} GiB (target < 4 GB), wall {run.wall_s:.0f} s")


def compare_parts(args) -> None:
    """Parts 1 and 2, in this process (which the child run of part 3 does not count)."""
    policy = smollm2_policy(args.new_tokens, args.seed)
    prompt = group_prompt(policy, ENV, ENV_KWARGS, args.seed)
    result = sampling_part(policy, prompt, args)
    if not args.skip_update:
        update_part(policy, result["generation"], args)
    del policy, result
    gc.collect()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=GROUP_SIZE, help="rows sampled (one group), and trained on")
    parser.add_argument("--new-tokens", type=int, default=12, help="new tokens at most (smollm2's max_action_tokens)")
    parser.add_argument("--repeats", type=int, default=2, help="sampling runs and updates timed per path")
    parser.add_argument("--episodes", type=int, default=64, help="episodes of the measured iteration (8 per group)")
    parser.add_argument("--minibatch-size", type=int, default=None, help="algo.ppo.minibatch_size of the iteration")
    parser.add_argument("--micro-batch-size", type=int, default=None,
                        help="algo.ppo.micro_batch_size of the iteration (rows per forward and backward pass)")
    parser.add_argument("--memory-limit-gb", type=float, default=6.0, help="GiB at which the iteration is killed")
    parser.add_argument("--iteration-timeout", type=float, default=None, help="seconds before the child is stopped")
    parser.add_argument("--skip-compare", action="store_true", help="skip parts 1 and 2")
    parser.add_argument("--skip-update", action="store_true", help="skip part 2 (the update comparison)")
    parser.add_argument("--skip-iteration", action="store_true", help="skip part 3")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if not args.skip_compare:
        compare_parts(args)
    if not args.skip_iteration:
        iteration_part(args)


if __name__ == "__main__":
    main()
