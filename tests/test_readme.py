"""The README and docs/ stay true to the code: every ``python -m MODULE`` they show names a module
that exists and runs as a script, every relative link points to a file, and the README stays short.

Every word of an inline code span (outside fenced blocks) is also checked, without importing code:

- a path (it starts with a top-level folder or file of the repository, or ends in .py/.md/.yaml)
  must exist: from the repository root, or, when it does not start at a top-level name
  (`train.py`, `algo/grpo.yaml`), as the tail of some file's path; `file.py::name` also needs the
  name defined in that file. Skipped: placeholders and globs (`<run>/config.yaml`, `{name}`, `$OUT`,
  `*`, `...`, `envs/my_env.py`, `experiments/conf/GROUP/`), logged metric names
  (`imagination/return_gap`) and the few files a run writes (``WRITTEN_AT_RUN_TIME``);
- a dotted name that starts with a library package is code when its first two parts are a module
  (`world_model.kinds`) or a later part has a capital (`policy.algorithms.GROUP_ESTIMATORS`): the
  longest prefix that is a module must exist, a remaining name must be defined at its top level
  (def, class, assignment, import, read from the AST), a second one must be an attribute of a
  class defined there. Other dotted names (`world_model.name`) are config keys and are left alone,
  and so is a code-looking one that is a key path of the training config (`policy.lora.rank`).
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import functools
import importlib
import importlib.machinery
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

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
    and most of the library): the first name is looked up in this repository, then on ``sys.path``,
    each next one in its parent's folders."""
    first, *rest = module.split(".")
    spec = importlib.machinery.PathFinder.find_spec(first, [str(REPO)]) or importlib.util.find_spec(first)
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


# ---- backticked paths and dotted names -------------------------------------------------------

LIBRARY = ("envs", "world_model", "critic", "policy", "imagination", "experiments", "benchmarks")
# the top-level folders and files of the repository: not hidden, not ignored (outputs/, *.egg-info)
IGNORED = [line.strip().strip("/") for line in (REPO / ".gitignore").read_text().splitlines()
           if line.strip() and not line.startswith(("#", "!"))]
TOP_LEVEL = tuple(sorted(
    p.name for p in REPO.iterdir()
    if not p.name.startswith(".") and not any(fnmatch.fnmatch(p.name, pattern) for pattern in IGNORED)
))
PATH_SUFFIXES = (".py", ".md", ".yaml")
# a placeholder (`<run>/...`, `{name}`, `$OUT`), a glob (`*`, `?`, `[...]`), an elision, an example
# name (`envs/my_env.py`) or a path part in capitals (`experiments/conf/GROUP/`)
PLACEHOLDER = re.compile(r"[<>{}*?\[\]$]|\.\.\.|…|(^|[/_])my_|(^|/)[A-Z_]+(/|$)")
FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def backticked_words(text: str) -> set[str]:
    """Each word of each inline code span outside fenced blocks; a word ends at whitespace, '=',
    ',' or ';', and loses surrounding quotes, brackets and a trailing ':' or '.'."""
    words = set()
    for span in SPAN.findall(FENCE.sub("", text)):
        for word in re.split(r"[\s=,;]+", span):
            word = word.strip("\"'()").rstrip(":.")
            if word:
                words.add(word)
    return words


def looks_like_a_path(word: str) -> bool:
    """A repository path: it starts with a top-level folder or file of the repository, or it ends
    in .py, .md or .yaml."""
    first = word.split("/", 1)[0]
    return first in TOP_LEVEL or word.endswith(PATH_SUFFIXES)


# files that a run, a report or a benchmark writes; the pages name them, the repository has none
WRITTEN_AT_RUN_TIME = frozenset({"report.md", "benchmarks/critic_cost.png", "benchmarks/baselines/",
                                 ".hydra/overrides.original.yaml"})  # a budget extension keeps the original command


@functools.cache
def repo_files() -> tuple[str, ...]:
    """Every file under the top-level names, as '/relative/path', outside caches."""
    found = []
    for top in TOP_LEVEL:
        for path in [REPO / top, *(REPO / top).rglob("*")]:
            if path.is_file() and "__pycache__" not in path.parts:
                found.append("/" + path.relative_to(REPO).as_posix())
    return tuple(found)


def path_exists(word: str) -> bool:
    """A path from the repository root exists; a path that does not start at a top-level name (a
    bare `train.py`, a config `algo/grpo.yaml`) exists when some file of the repository ends in it."""
    word = re.sub(r"(::.*|:\d+)$", "", word)
    if word in WRITTEN_AT_RUN_TIME or word in metric_keys():
        return True
    if word.split("/", 1)[0] in TOP_LEVEL:
        return (REPO / word).exists()
    return any(f.endswith("/" + word.rstrip("/")) for f in repo_files())


@functools.cache
def metric_keys() -> frozenset[str]:
    """Logged metric names such as `imagination/return_gap`: quoted strings with a '/' in the
    library's Python files (a metric reads like a path but is none)."""
    keys = set()
    for package in LIBRARY:
        for path in (REPO / package).rglob("*.py"):
            keys |= set(re.findall(r"[\"']([a-z_]+/[\w/]+)[\"']", path.read_text()))
    return frozenset(keys)


def top_level_names(tree: ast.Module) -> dict[str, ast.AST]:
    """Names a module binds at its top level (def, class, assignment, import), each with its node."""
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def class_attributes(node: ast.ClassDef) -> set[str]:
    """Methods, fields and class attributes a class body defines."""
    return set(top_level_names(ast.Module(body=node.body, type_ignores=[])))


def is_module_reference(word: str) -> bool:
    """A dotted name that starts with a library package refers to code when its first two parts are
    a module (`world_model.kinds...`) or when a later part starts with a capital (a class or a
    constant: `policy.algorithms.GROUP_ESTIMATORS`); otherwise (`world_model.name`,
    `policy.lora.rank`) it is a lower_snake_case config key and is left alone."""
    parts = word.split(".")
    if parts[0] not in LIBRARY or len(parts) < 2:
        return False
    return find_spec(".".join(parts[:2])) is not None or any(p[0].isupper() for p in parts[1:])


def unresolved(word: str) -> str | None:
    """Why a module reference does not resolve, or None when it does: the longest prefix that is a
    module must exist, one remaining name must be defined at that module's top level, and a second
    one must be an attribute of a class defined there."""
    parts = word.split(".")
    cut = max(n for n in range(1, len(parts) + 1) if find_spec(".".join(parts[:n])) is not None)
    module = ".".join(parts[:cut])
    return undefined(Path(find_spec(module).origin), parts[cut:], module)


def undefined(source: Path, names: list[str], label: str) -> str | None:
    """Why ``names`` (a top-level name, then maybe an attribute of that class) are not defined in the
    Python file ``source``, or None when they are."""
    if not names:
        return None
    if len(names) > 2:
        return f"{'.'.join(names)} is more than a name and an attribute in {label}"
    defined = top_level_names(ast.parse(source.read_text()))
    if names[0] not in defined:
        return f"{label} defines no {names[0]}"
    owner = defined[names[0]]
    if len(names) == 2 and (not isinstance(owner, ast.ClassDef) or names[1] not in class_attributes(owner)):
        return f"{label}.{names[0]} is not a class with an attribute {names[1]}"
    return None


def unresolved_path(word: str) -> str | None:
    """Why a path does not exist, or None when it does; `file.py::name` (or `::Class.attribute`, a
    call's parentheses allowed) also needs the name defined in that file."""
    if not path_exists(word):
        return "no such file"
    path, _, name = word.partition("::")
    if not name or not path.endswith(".py") or path.split("/", 1)[0] not in TOP_LEVEL:
        return None
    return undefined(REPO / path, re.match(r"[\w.]*", name).group().split("."), path)


def broken_references(text: str) -> list[str]:
    """The backticked words of a page that name a path or a module that is not there. Skipped: a
    word with a placeholder or a glob (`<run>/config.yaml`, `{name}`, `$OUT`, `*`, `...`); a dotted
    name that is a config key (see ``is_module_reference``), or that reads as code but is a key
    path of the training config (`policy.lora.rank`: `policy.lora` is also a module)."""
    broken = []
    for word in sorted(backticked_words(text)):
        if PLACEHOLDER.search(word):
            continue
        if looks_like_a_path(word):
            why = unresolved_path(word)
            if why:
                broken.append(f"{word}: {why}")
        elif DOTTED.match(word) and is_module_reference(word):
            why = unresolved(word)
            if why and word not in config_keys():
                broken.append(f"{word}: {why}")
    return broken


def dotted_keys(node, prefix: str = "") -> set[str]:
    """Every key path of a nested mapping: {"a": {"b": 1}} -> {"a", "a.b"}."""
    keys = set()
    for key, value in node.items() if isinstance(node, dict) else ():
        path = f"{prefix}{key}"
        keys |= {path} | dotted_keys(value, path + ".")
    return keys


@functools.cache
def config_keys() -> frozenset[str]:
    """Key paths of the training config: the fields of its dataclasses, and the keys of each yaml
    of experiments/conf both as written and under its group's name (`world_model/lm.yaml` holds
    `world_model.pretrained`)."""
    from omegaconf import OmegaConf

    from experiments.config import Resolved

    keys = set()
    for group in dataclasses.fields(Resolved):
        schema = getattr(importlib.import_module(Resolved.__module__), str(group.type), None)
        if dataclasses.is_dataclass(schema):
            keys |= dotted_keys(OmegaConf.to_container(OmegaConf.structured(schema)), group.name + ".")
    conf = REPO / "experiments" / "conf"
    for path in conf.rglob("*.yaml"):
        body = yaml.safe_load(path.read_text()) or {}
        keys |= dotted_keys(body)
        group = path.parent.relative_to(conf).as_posix().replace("/", ".")
        if group != ".":
            keys |= dotted_keys(body, group + ".") | dotted_keys(body, f"{group}.{path.stem}.")
    return frozenset(keys)


def test_the_span_rules_on_small_strings():
    text = "see `envs/base.py`, `python -m experiments.train seed=1` and\n```\n`nope/x.py`\n```\n`a`"
    assert backticked_words(text) == {"envs/base.py", "python", "-m", "experiments.train", "seed", "1", "a"}
    assert looks_like_a_path("envs/base.py") and looks_like_a_path("Makefile") and looks_like_a_path("train.py")
    assert not looks_like_a_path("charts/success_rate") and not looks_like_a_path("envsx/a")
    assert all(PLACEHOLDER.search(w) for w in ["<run>/config.yaml", "docs/*.md", "envs/my_env.py", "experiments/conf/GROUP/"])
    assert not PLACEHOLDER.search("experiments/conf/algo/grpo.yaml")
    assert path_exists("experiments/conf/algo/grpo.yaml") and path_exists("algo/grpo.yaml")
    assert path_exists("tests/test_readme.py::test_the_span_rules_on_small_strings")
    assert not path_exists("experiments/seeding.py") and not path_exists("no_such_file.py")
    assert unresolved_path("envs/seeding.py::derive_seed(seed") is None
    assert unresolved_path("envs/seeding.py::seed_of") == "envs/seeding.py defines no seed_of"
    assert unresolved_path("policy/config.py::LoRAConfig.rank") is None


def test_the_dotted_name_rules_on_small_strings():
    # world_model.kinds is a module, so the name after it must be defined there
    assert is_module_reference("world_model.kinds") and is_module_reference("world_model.kinds.nope")
    assert not is_module_reference("world_model.name") and not is_module_reference("policy.lr")
    assert is_module_reference("policy.algorithms.GROUP_ESTIMATORS")  # a capital: code, not a key
    assert unresolved("policy.config") is None
    assert unresolved("policy.config.LoRAConfig") is None
    assert unresolved("policy.config.LoRAConfig.rank") is None  # a field of a class defined there
    assert unresolved("policy.config.DEFAULT_LORA_TARGETS") is None  # an assignment
    assert unresolved("policy.config.field") is None  # an import
    assert unresolved("policy.config.nope") == "policy.config defines no nope"
    assert unresolved("policy.config.LoRAConfig.nope") is not None
    assert unresolved("policy.config.DEFAULT_LORA_TARGETS.count") is not None  # not a class
    assert unresolved("policy.algorithms.GROUP_ESTIMATORS") == "policy defines no algorithms"
    assert broken_references("`policy.lora.rank` and `world_model.name`") == []  # config keys
    assert broken_references("`policy.lora.nope`") == ["policy.lora.nope: policy.lora defines no nope"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_backticked_path_and_module_exists(page):
    broken = broken_references(page.read_text())
    assert not broken, f"{page.name} names paths or code that do not exist: {broken}"
