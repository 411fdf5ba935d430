"""Imports run left to right: envs -> world_model -> critic -> policy -> imagination -> experiments
-> benchmarks."""

import ast
import pathlib

ORDER = ["envs", "world_model", "critic", "policy", "imagination", "experiments", "benchmarks"]
RANK = {name: i for i, name in enumerate(ORDER)}
ROOT = pathlib.Path(__file__).resolve().parents[1]


def wrong_way_imports(root: pathlib.Path) -> list[str]:
    found = []
    for package in ORDER:
        for path in (root / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in RANK and RANK[top] > RANK[package]:
                        found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    return found


def test_no_import_runs_right_to_left():
    assert wrong_way_imports(ROOT) == []


def test_checker_catches_a_wrong_way_import(tmp_path):
    for package in ORDER:
        (tmp_path / package).mkdir()
    (tmp_path / "envs" / "bad.py").write_text("from policy.losses import aggregate\n")
    (tmp_path / "policy" / "good.py").write_text("import envs.base\n")
    assert wrong_way_imports(tmp_path) == ["envs/bad.py:1 imports policy.losses"]


def test_checker_catches_the_library_importing_a_benchmark(tmp_path):
    """The benchmarks come last: they may import every package, and none may import them."""
    for package in ORDER:
        (tmp_path / package).mkdir()
    (tmp_path / "experiments" / "bad.py").write_text("from benchmarks.critic_quality import collect_mix\n")
    (tmp_path / "envs" / "bad.py").write_text("import benchmarks.headline\n")
    (tmp_path / "benchmarks" / "good.py").write_text("import experiments.train\nfrom envs.agent import ExpertAgent\n")
    assert sorted(wrong_way_imports(tmp_path)) == ["envs/bad.py:1 imports benchmarks.headline",
                                                   "experiments/bad.py:1 imports benchmarks.critic_quality"]


def test_checker_reads_subpackages(tmp_path):
    for package in ORDER:
        (tmp_path / package).mkdir()
    (tmp_path / "policy" / "advantages").mkdir()
    (tmp_path / "policy" / "advantages" / "bad.py").write_text("from imagination.step_groups import groups\n")
    assert wrong_way_imports(tmp_path) == ["policy/advantages/bad.py:1 imports imagination.step_groups"]


def test_moved_modules_leave_no_shim():
    """The estimators live in ``policy/advantages/`` and the step groups in ``imagination/step_groups/``;
    the flat modules they came from must not come back as re-exporting shims."""
    old = ["policy/algorithms.py", "policy/group_advantages.py", "policy/group_norm.py", "policy/fused_advantages.py",
           "policy/fused_config.py", "policy/counterfactual_config.py", "imagination/counterfactual_gigpo.py",
           "imagination/counterfactual_math.py", "imagination/counterfactual_groups.py", "imagination/real_branch.py"]
    assert [path for path in old if (ROOT / path).exists()] == []


def test_the_builders_do_not_import_the_loop():
    """``experiments/build.py`` is what ``experiments/train.py`` builds before its loop; never the other way."""
    tree = ast.parse((ROOT / "experiments" / "build.py").read_text(encoding="utf-8"))
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert "experiments.train" not in modules and "experiments" in {m.split(".")[0] for m in modules}


CYCLE_PACKAGES = [*ORDER, "benchmarks"]  # benchmarks/ when it stands at the top level


def module_files(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> its file, for every ``.py`` of the library packages (a package is its ``__init__.py``)."""
    files = {}
    for package in dict.fromkeys(CYCLE_PACKAGES):
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_modules(path: pathlib.Path, name: str, files: dict[str, pathlib.Path]) -> set[str]:
    """The library modules ``path`` imports, wherever the import stands (a function-level one counts too).

    ``from a.b import c`` names the file ``a/b/c.py`` when ``c`` is a module, else ``a/b`` itself."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{module}.{alias.name}" if f"{module}.{alias.name}" in files else module for alias in node.names}
    return {module for module in found if module in files and module != name}


def import_cycles(root: pathlib.Path) -> list[list[str]]:
    """Every loop of file imports, as its files (sorted), one list per strongly connected group."""
    files = module_files(root)
    graph = {name: imported_modules(path, name, files) for name, path in files.items()}
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph[node]):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(files[m].relative_to(root).as_posix() for m in group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def test_no_file_imports_itself_round_a_loop():
    cycles = import_cycles(ROOT)
    assert cycles == [], "files that import each other round a loop:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_cycle_checker_finds_a_loop_through_a_lazy_import_and_a_package(tmp_path):
    for package in ORDER:
        (tmp_path / package).mkdir()
    (tmp_path / "policy" / "advantages").mkdir()
    (tmp_path / "policy" / "__init__.py").write_text("from policy.losses import aggregate\n")
    (tmp_path / "policy" / "losses.py").write_text("from .advantages import config\n")
    (tmp_path / "policy" / "advantages" / "config.py").write_text("def f():\n    from policy import learner\n")
    (tmp_path / "policy" / "learner.py").write_text("import envs.base\n")
    (tmp_path / "envs" / "base.py").write_text("")
    assert import_cycles(tmp_path) == []
    (tmp_path / "policy" / "learner.py").write_text("from .losses import aggregate\n")
    assert import_cycles(tmp_path) == [["policy/advantages/config.py", "policy/learner.py", "policy/losses.py"]]
