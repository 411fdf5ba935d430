"""Cost per turn of valuing a live agent's state: the latent critic against a full-history transformer.

    python -m benchmarks.critic_cost [--turns 1 2 4 ... 64] [--repeats 30] [--quick]

For a history of N turns, each row times the N-th turn's update, the work needed to value the
state after that turn given everything before it:

- latent: ``LatentCritic.step(state, action, result)``, the GRU folding the new turn into the latent
  after N-1 turns (what the critic does for a live agent), value head included;
- full, uncached: a ``TokenCritic`` (tiny Llama decoder, value head on the last position) re-reading
  the whole history's token ids, the first observation and all N turns;
- full, cached: the same decoder given the key/value cache of the first N-1 turns
  (``cache=``, formerly ``past_key_values``; ``use_cache=True``), reading only the new turn's tokens: the fair comparison.

Both critics read the same token rows (``TurnTokenizer``: the observation row, then one
``<res> result <act> action </s>`` row per turn), and every variant tokenises only the new turn's
text. The decoder is sized so that its parameter count is close to the latent critic's (the
latent critic uses the training defaults, ``critic.config.LatentCriticSection``); both counts are
printed. Turns are real ones: RandomAgent episodes of the env, chained one after another into a
history as long as asked. One thread, ``torch.no_grad()``, eval mode; each time is the median of
``--repeats`` runs, in this thread's CPU time by default (``--clock cpu``: on a shared machine,
wall time mostly measures the scheduler; ``--clock wall`` for elapsed time). Prints a table and
writes ``critic_cost.png`` (log-log) into ``--out``. A figure, not a timed test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import DynamicCache

from critic import LatentCritic, LatentCriticConfig, TokenCritic, TokenCriticConfig
from critic.config import LatentCriticSection
from envs.agent import RandomAgent
from envs.collect import collect
from world_model.turn_tokens import TurnTokenizer

DEFAULT_TURNS = (1, 2, 4, 8, 16, 32, 64)
QUICK_TURNS = (1, 2, 4)


@dataclass(frozen=True)
class Row:
    """One history length: median milliseconds for the N-th turn's update, per critic."""

    turns: int
    tokens: int
    """Token ids of the whole history (observation row plus N turn rows)."""
    latent_ms: float
    full_ms: float
    cached_ms: float

    @property
    def full_ratio(self) -> float:
        return self.full_ms / self.latent_ms

    @property
    def cached_ratio(self) -> float:
        return self.cached_ms / self.latent_ms


@dataclass(frozen=True)
class Result:
    rows: list[Row]
    latent_params: int
    transformer_params: int
    env: str
    clock: str


def synthetic_history(env_name: str, turns: int, seed: int = 0) -> tuple[str, list[tuple[str, str]]]:
    """The first observation and ``turns`` (action, result) pairs of RandomAgent episodes, chained."""
    pairs: list[tuple[str, str]] = []
    first = None
    group = 0
    while len(pairs) < turns:
        trajectories = collect(RandomAgent(seed + group), env_name, n_groups=8, group_size=1, seed=seed + group,
                               progress=False)
        for trajectory in trajectories:
            if first is None and trajectory.turns:
                first = trajectory.turns[0].observation
            pairs.extend((t.action, t.next_observation) for t in trajectory.turns)
        group += 8
    assert first is not None
    return first, pairs[:turns]


def count_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}
"""``cpu``: this thread's CPU time, which a busy shared machine does not inflate by descheduling us
(torch runs on the calling thread with one intra-op thread); ``wall``: elapsed time."""


def median_ms(fn, repeats: int, clock: str = "cpu") -> float:
    """Median milliseconds of ``repeats`` calls of ``fn`` after one warm-up call."""
    now = CLOCKS[clock]
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = now()
        fn()
        times.append(now() - start)
    return 1000.0 * statistics.median(times)


def run(
    turns: tuple[int, ...] = DEFAULT_TURNS,
    *,
    env: str = "hidden_number",
    repeats: int = 30,
    hidden_size: int = 64,
    num_layers: int = 1,
    num_heads: int = 4,
    intermediate_size: int = 128,
    seed: int = 0,
    threads: int | None = 1,
    clock: str = "cpu",
) -> Result:
    """Time the three critics at each history length in ``turns``; see the module docstring."""
    if not turns or min(turns) < 1:
        raise ValueError(f"turns must be positive history lengths, got {turns}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            return _run(tuple(sorted(set(turns))), env, repeats, seed, clock,
                        dict(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads,
                             intermediate_size=intermediate_size))
    finally:
        torch.set_num_threads(old_threads)


def _run(turns: tuple[int, ...], env: str, repeats: int, seed: int, clock: str, decoder: dict[str, int]) -> Result:
    tokenizer = TurnTokenizer.for_env(env)
    latent = LatentCritic(LatentCriticConfig.from_section(tokenizer, LatentCriticSection()), tokenizer,
                          seed=seed).eval()
    observation, pairs = synthetic_history(env, max(turns), seed)

    obs_ids, _ = tokenizer.encode_observations([observation])  # (1, T0), no padding: one row
    turn_ids = [tokenizer.encode_turns([a], [r])[0] for a, r in pairs]  # each (1, T)
    total_tokens = obs_ids.shape[1] + sum(t.shape[1] for t in turn_ids)
    full = TokenCritic(TokenCriticConfig(vocab_size=len(tokenizer), max_position_embeddings=max(512, total_tokens),
                                         **decoder), seed=seed).eval()

    rows = [_time_length(n, latent, full, observation, pairs, obs_ids, turn_ids, repeats, clock) for n in turns]
    return Result(rows=rows, latent_params=count_params(latent), transformer_params=count_params(full), env=env,
                  clock=clock)


def _time_length(
    n: int,
    latent: LatentCritic,
    full: TokenCritic,
    observation: str,
    pairs: list[tuple[str, str]],
    obs_ids: torch.Tensor,
    turn_ids: list[torch.Tensor],
    repeats: int,
    clock: str,
) -> Row:
    """One row: each critic's median time for the ``n``-th turn, given the first ``n - 1``."""
    tokenizer, backbone, head = latent.tokenizer, full.backbone, full.head
    action, result = pairs[n - 1]
    # latent: the state after n-1 turns, then time the n-th step
    state = latent.initial_state(observation)
    for a, r in pairs[: n - 1]:
        state, _ = latent.step(state, a, r)
    latent_ms = median_ms(lambda: latent.step(state, action, result), repeats, clock)

    # full history, no cache: re-read every token each turn (only the new turn is tokenised)
    prefix = torch.cat([obs_ids, *turn_ids[: n - 1]], dim=1)  # (1, L_prev)

    def uncached() -> float:
        new, _ = tokenizer.encode_turns([action], [result])  # (1, T)
        ids = torch.cat([prefix, new], dim=1)  # (1, L)
        hidden = backbone(input_ids=ids, use_cache=False).last_hidden_state  # (1, L, H)
        return float(head(hidden[:, -1]).squeeze())

    full_ms = median_ms(uncached, repeats, clock)

    # full history with a KV cache of the first n-1 turns: read only the new turn's tokens
    cache = DynamicCache()
    backbone(input_ids=prefix, cache=cache, use_cache=True)
    past = prefix.shape[1]

    def cached() -> float:
        new, _ = tokenizer.encode_turns([action], [result])  # (1, T)
        positions = torch.arange(past, past + new.shape[1])[None]  # (1, T)
        out = backbone(input_ids=new, position_ids=positions, cache=cache, use_cache=True)
        value = float(head(out.last_hidden_state[:, -1]).squeeze())
        cache.crop(-new.shape[1])  # drop this turn: back to n-1 turns for the next repeat
        return value

    # the cached and uncached decoders agree on the value after n turns
    if abs(cached() - uncached()) > 1e-4:
        raise AssertionError(f"cached and uncached values differ at {n} turns")
    cached_ms = median_ms(cached, repeats, clock)
    tokens = past + turn_ids[n - 1].shape[1]
    return Row(turns=n, tokens=tokens, latent_ms=latent_ms, full_ms=full_ms, cached_ms=cached_ms)


def format_table(result: Result) -> str:
    lines = [
        f"env {result.env}; parameters: latent critic {result.latent_params:,}, "
        f"transformer critic {result.transformer_params:,} "
        f"({result.transformer_params / result.latent_params:.2f}x); median {result.clock} ms for the N-th turn",
        f"{'turns':>5} {'tokens':>6} {'latent ms':>10} {'full ms':>9} {'cached ms':>10} {'full/lat':>9} {'cached/lat':>10}",
    ]
    for r in result.rows:
        lines.append(f"{r.turns:>5} {r.tokens:>6} {r.latent_ms:>10.3f} {r.full_ms:>9.3f} {r.cached_ms:>10.3f} "
                     f"{r.full_ratio:>9.2f} {r.cached_ratio:>10.2f}")
    return "\n".join(lines)


def plot(result: Result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = [r.turns for r in result.rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(turns, [r.latent_ms for r in result.rows], "o-", label=f"latent critic step ({result.latent_params:,} params)")
    ax.plot(turns, [r.full_ms for r in result.rows], "s-",
            label=f"transformer, re-reads history ({result.transformer_params:,} params)")
    ax.plot(turns, [r.cached_ms for r in result.rows], "^-", label="transformer, KV cache (new turn only)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("history length (turns)")
    ax.set_ylabel("ms to value the state after the latest turn")
    ax.set_title(f"Critic cost per turn, {result.env}, 1 thread, median {result.clock} time", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=list(DEFAULT_TURNS), help="history lengths to time")
    parser.add_argument("--repeats", type=int, default=30, help="timed runs per measurement (median reported)")
    parser.add_argument("--env", default="hidden_number", help="env whose RandomAgent turns make the histories")
    parser.add_argument("--hidden-size", type=int, default=64, help="transformer critic width")
    parser.add_argument("--num-layers", type=int, default=1, help="transformer critic decoder blocks")
    parser.add_argument("--num-heads", type=int, default=4, help="transformer critic attention heads")
    parser.add_argument("--intermediate-size", type=int, default=128, help="transformer critic MLP width")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: this thread's CPU time, robust on a shared machine (default); wall: elapsed time")
    parser.add_argument("--out", type=Path, default=Path("benchmarks"), help="folder for critic_cost.png")
    parser.add_argument("--quick", action="store_true", help=f"tiny run: turns {QUICK_TURNS}, 3 repeats")
    args = parser.parse_args(argv)

    turns, repeats = (QUICK_TURNS, 3) if args.quick else (tuple(args.turns), args.repeats)
    result = run(turns, env=args.env, repeats=repeats, hidden_size=args.hidden_size, num_layers=args.num_layers,
                 num_heads=args.num_heads, intermediate_size=args.intermediate_size, seed=args.seed,
                 clock=args.clock)
    print(format_table(result))
    path = args.out / "critic_cost.png"
    plot(result, path)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
