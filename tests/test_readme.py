"""The README and docs/ stay true to the code: every ``python -m MODULE`` they show names a module
that exists and runs as a script, every relative link points to a file, and the README stays short."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# `python -m NAME`, also when the command wraps onto the next line of a paragraph
MODULE = re.compile(r"python\s+-m\s+([A-Za-z_][\w.]*[\w])")
# [text](target) and ![alt](target); the target ends at whitespace or ')'
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
README_MAX_LINES = 250


def modules_in(text: str) -> set[str]:
    return set(MODULE.findall(text))


def relative_links_in(text: str) -> set[str]:
    """Link targets that are files of this repository: no scheme, no bare in-page anchor."""
    targets = {t.split("#", 1)[0] for t in LINK.findall(text)}
    return {t for t in targets if t and not re.match(r"^[a-z][a-z0-9+.-]*:", t)}


def find_spec(module: str):
    """``importlib.util.find_spec`` without importing the parent packages (which would import torch
    and most of the library): the first name is looked up on ``sys.path``, each next one in its
    parent's folders."""
    first, *rest = module.split(".")
    spec = importlib.util.find_spec(first)
    for part in rest:
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
    return spec


def runnable(module: str) -> bool:
    """True when ``python -m module`` would run: a module with a ``__main__`` guard, or a package
    with a ``__main__`` submodule (third-party modules such as ``pytest`` only need to exist)."""
    spec = find_spec(module)
    if spec is None:
        return False
    if spec.submodule_search_locations is not None:
        return find_spec(f"{module}.__main__") is not None
    origin = Path(spec.origin or "")
    if REPO not in origin.parents:
        return True
    return "__name__ == \"__main__\"" in origin.read_text()


def test_the_pattern_finds_wrapped_and_inline_commands():
    text = "run `python -m experiments.train -m experiment=quick` or `python -m\nexperiments.report DIR`."
    assert modules_in(text) == {"experiments.train", "experiments.report"}
    links = relative_links_in("[a](docs/x.md#part) ![b](y.png) [c](https://e.org/z) [d](#top)")
    assert links == {"docs/x.md", "y.png"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_m_module_exists_and_runs_as_a_script(page):
    missing = sorted(m for m in modules_in(page.read_text()) if not runnable(m))
    assert not missing, f"{page.name} names modules that `python -m` cannot run: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_to_a_file(page):
    broken = sorted(t for t in relative_links_in(page.read_text()) if not (page.parent / t).exists())
    assert not broken, f"{page.name} links to files that do not exist: {broken}"


def test_the_pages_name_modules_at_all():
    """Guards the pattern itself: a regex that matched nothing would pass the tests above."""
    assert "experiments.train" in modules_in((REPO / "README.md").read_text())
    assert len(set().union(*(modules_in(p.read_text()) for p in PAGES))) >= 10


def test_the_readme_stays_short():
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}"
