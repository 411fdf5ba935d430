"""The mutation score per module from ``mutmut results --all true`` (read from a file or stdin), and
the surviving mutants: ``python scripts/mutation_report.py mutants/results.txt``.

A mutant that timed out counts as killed: the tests noticed it (it looped or slowed past the limit).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*(?P<name>[\w.ǁ]+)__mutmut_\d+: (?P<status>.+)$")
CAUGHT = {"killed", "timeout", "segfault", "caught by type check"}


def module_of(name: str) -> str:
    """``policy.losses.x_aggregate`` -> ``policy.losses`` (methods: ``...xǁClassǁmethod``)."""
    return re.split(r"\.x_|\.xǁ", name, maxsplit=1)[0]


def main(lines: list[str]) -> int:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    survivors: list[str] = []
    for line in lines:
        match = LINE.match(line)
        if not match:
            continue
        status = match["status"].strip()
        counts[module_of(match["name"])][status] += 1
        if status not in CAUGHT:
            survivors.append(f"{line.strip()}")
    print(f"{'module':45} {'mutants':>8} {'caught':>8} {'score':>7}")
    total = caught = 0
    for module in sorted(counts):
        n, k = sum(counts[module].values()), sum(v for s, v in counts[module].items() if s in CAUGHT)
        total, caught = total + n, caught + k
        print(f"{module:45} {n:>8} {k:>8} {k / n:>7.1%}")
    print(f"{'all':45} {total:>8} {caught:>8} {caught / max(total, 1):>7.1%}")
    print(f"\n{len(survivors)} not caught (`mutmut show NAME` prints the change):")
    for line in survivors:
        print("  " + line)
    return 0


if __name__ == "__main__":
    source = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
    sys.exit(main(source.read().splitlines()))
