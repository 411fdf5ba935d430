"""Cost of one imagined step against the history length, latent against LM world model.

    python -m benchmarks.world_model.window_cost

Untrained models (3 members) on hidden_number, 16 rows: ``initial_state``, ``observe`` of the given
number of turns, then three greedy ``step`` calls timed in this process's CPU seconds (steadier than
wall time on a shared machine). The LM model is measured with a window covering every turn and with a
window of 2; the latent model has no window.
"""

from __future__ import annotations

import time

import torch

from world_model import TurnTokenizer, WorldModel, WorldModelConfig
from world_model.lm import LMOptions, LMWorldModel, LMWorldModelConfig

FIRST = "find the hidden number in 1 .. 16 . call guess(k)"


def steps_per_cpu_second(model, turns: int, rows: int = 16, repeats: int = 3) -> float:
    state = model.initial_state([FIRST] * rows)
    for i in range(turns):
        state = model.observe(state, [f"guess({i + 1})"] * rows, [f"guess {i + 1} : higher"] * rows)
    generator = torch.Generator().manual_seed(0)
    model.step(state, ["guess(9)"] * rows, generator=generator)  # warm-up
    start = time.process_time()
    for _ in range(repeats):
        model.step(state, ["guess(9)"] * rows, generator=generator, greedy=True)
    return repeats * rows / max(time.process_time() - start, 1e-9)


def main() -> None:
    tk = TurnTokenizer.for_env("hidden_number", {})
    latent = WorldModel(WorldModelConfig.for_tokenizer(tk, latent_size=128, num_members=3), tk).eval()

    def lm(window: int) -> LMWorldModel:
        config = LMWorldModelConfig(LMOptions(history_turns=window), tk.limits.observation, tk.limits.action,
                                    len(tk), num_members=3)
        return LMWorldModel(config, tk).eval()

    print("turns | latent | lm (window = turns) | lm (window = 2)   [imagined steps per CPU second]")
    for turns in (0, 4, 8, 16):
        figures = [steps_per_cpu_second(m, turns) for m in (latent, lm(max(turns, 1)), lm(2))]
        print(f"{turns:>5} | " + " | ".join(f"{f:.0f}" for f in figures), flush=True)


if __name__ == "__main__":
    main()
