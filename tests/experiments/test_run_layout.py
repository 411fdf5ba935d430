"""A run folder saves its models under ``models/`` so that Python started inside it imports Reverie's
packages, and runs saved before (models at the root) still load."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.run_layout import model_dir, saved_model_dir
from tests.experiments.in_process import train_in_process
from tests.experiments.test_determinism import BASE, CASES
from tests.test_import_direction import ORDER

REPO = Path(__file__).resolve().parents[2]
# Python as a user runs it inside a run folder (`cd RUN && python -c ...`: the current folder is first on
# sys.path), with Reverie found the way an editable install finds it: by a finder asked after the path
# scan (setuptools' __editable__ finder), for Reverie's top-level packages only.
INSIDE_THE_RUN = """
import importlib.machinery, json, sys
repo, packages = sys.argv[1], set(sys.argv[2].split(","))

class EditableFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        return importlib.machinery.PathFinder.find_spec(name, [repo]) if name in packages else None

sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder) + 1, EditableFinder)
import critic, policy, world_model
from critic import LatentCritic

history = [{"role": "user", "content": sys.argv[3]}, {"role": "assistant", "content": "guess(3)"},
           {"role": "tool", "content": "guess 3 : higher"}]
values = LatentCritic.from_pretrained("models/critic").value([history])
print(json.dumps({"files": [m.__file__ for m in (critic, policy, world_model)], "values": [float(v) for v in values]}))
"""


def test_a_new_run_saves_under_models_and_finds_either_layout(tmp_path):
    new, old, both = tmp_path / "new", tmp_path / "old", tmp_path / "both"
    for folder in (new / "models" / "critic", old / "critic", both / "critic", both / "models" / "critic"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    assert model_dir(new, "critic") == new / "models" / "critic"
    assert saved_model_dir(new, "critic") == new / "models" / "critic"
    assert saved_model_dir(old, "critic") == old / "critic"  # a run saved before models/
    assert saved_model_dir(both, "critic") == both / "models" / "critic"
    assert saved_model_dir(tmp_path / "empty", "policy") == tmp_path / "empty" / "models" / "policy"
    with pytest.raises(ValueError, match="unknown saved model 'critc'"):
        model_dir(new, "critc")


@pytest.mark.slow
def test_python_started_inside_a_finished_run_imports_the_packages_and_loads_its_critic(tmp_path):
    run_dir = tmp_path / "run"
    train_in_process([*BASE, *CASES["model_based_ppo_turn_latent"]], run_dir)  # saves a policy, critic, world model
    assert not {p.name for p in run_dir.iterdir()} & set(ORDER)  # no folder named like a package at the root
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # Reverie only through the finder
    prompt = "find the hidden number in 1 .. 5 . call guess(k)"
    done = subprocess.run([sys.executable, "-c", INSIDE_THE_RUN, str(REPO), ",".join(ORDER), prompt],
                          cwd=run_dir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["files"] == [str(REPO / name / "__init__.py") for name in ("critic", "policy", "world_model")]
    assert len(result["values"]) == 1 and math.isfinite(result["values"][0])
