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
