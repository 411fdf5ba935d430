"""When the trajectory store merges shards: a tiered (log-structured) merge plan, as a pure function.

Each shard counts the appends it holds (1 for a fresh append). Its *level* is
``floor(log_fanout(appends))``. Shards are merged only as a tail of the list (the newest ones), so
append order is kept. The rule: for the smallest level ``l`` at which the run of shards at the tail
with level ``<= l`` holds at least ``fanout`` shards of level exactly ``l``, merge that run into one
shard; repeat until no run qualifies. Merges that cascade in one append touch one tail, so they are done as a single rewrite.

Why this rule. It behaves like a counter in base ``fanout``: after ``n`` appends there are at most
``(fanout - 1)`` shards per level, about ``(fanout - 1) * log_fanout(n)`` in all, so opening the
store costs O(log n) shard opens on top of reading the data. A row is rewritten only when its shard
moves up a level, at most ``log_fanout(n)`` times, so appends stay cheap on average. A store written
before merging existed (many level-0 shards) is folded into one shard by its next append.
"""

from __future__ import annotations

from collections.abc import Sequence


def level(appends: int, fanout: int) -> int:
    """``floor(log_fanout(appends))`` in exact integer arithmetic."""
    if appends < 1 or fanout < 2:
        raise ValueError(f"need appends >= 1 and fanout >= 2, got {appends} and {fanout}")
    result, size = 0, fanout
    while size <= appends:
        result, size = result + 1, size * fanout
    return result


def merge_start(appends: Sequence[int], fanout: int) -> int:
    """Index from which the shards (given by their append counts, oldest first) merge into one.

    ``len(appends)`` means no merge is due.
    """
    counts = list(appends)
    start = len(counts)
    while True:
        tail = _qualifying_tail(counts, fanout)
        if tail == 0:
            return start
        start = min(start, len(counts) - tail)
        counts = counts[: len(counts) - tail] + [sum(counts[len(counts) - tail :])]


def _qualifying_tail(counts: list[int], fanout: int) -> int:
    """Length of the tail run to merge now (0: none): the first level whose tail run reaches ``fanout``."""
    levels = [level(c, fanout) for c in counts]
    for threshold in sorted(set(levels)):
        run = at_threshold = 0
        for lv in reversed(levels):
            if lv > threshold:
                break
            run, at_threshold = run + 1, at_threshold + (lv == threshold)
        if at_threshold >= fanout:
            return run
    return 0
