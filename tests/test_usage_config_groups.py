"""docs/usage.md's table of config groups names every option each group has in experiments/conf/,
and its table of named experiments every experiment preset: adding a YAML file without a row fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "experiments" / "conf"
USAGE = REPO / "docs" / "usage.md"
CODE = re.compile(r"`([^`]+)`")


def group_options() -> dict[str, set[str]]:
    """Each config group folder of experiments/conf and its options (YAML file names)."""
    return {folder.name: {path.stem for path in folder.glob("*.yaml")}
            for folder in sorted(CONF.iterdir()) if folder.is_dir() and any(folder.glob("*.yaml"))}


def table_rows(text: str, header: str) -> dict[str, str]:
    """The rows of the Markdown table whose header line starts with ``header``: first cell's code
    names (each one a key) -> the rest of the row."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        first, rest = line.strip("|").split("|", 1)
        for name in CODE.findall(first):
            rows[name] = rest
    return rows


def test_the_groups_are_found():
    groups = group_options()
    assert {"env", "algo", "experiment", "imagination"} <= set(groups)
    assert {"textarena", "gym_text"} <= groups["env"]


@pytest.mark.parametrize("group", sorted(set(group_options()) - {"experiment"}))
def test_every_option_of_a_group_is_in_the_usage_table(group):
    rows = table_rows(USAGE.read_text(encoding="utf-8"), "| group | options |")
    assert group in rows, f"docs/usage.md: no row for config group {group!r}"
    named = set(CODE.findall(rows[group].split("|")[0]))
    missing = group_options()[group] - named
    assert not missing, f"docs/usage.md: the {group!r} row lacks {sorted(missing)}"


def test_every_experiment_preset_is_in_the_named_experiments_table():
    rows = table_rows(USAGE.read_text(encoding="utf-8"), "| name | what it runs |")
    missing = group_options()["experiment"] - set(rows)
    assert not missing, f"docs/usage.md: the named experiments table lacks {sorted(missing)}"
