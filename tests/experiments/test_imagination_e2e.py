"""The model-based loop end to end in subprocesses: the ratio counted, ratio 0 and a closed gate
leave the model-free run untouched, and a run's world model is saved and reloadable."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from envs import TrajectoryStore
from tests.experiments.test_train_e2e import TINY, assert_ok, finish, read_records, start_train
from world_model import WorldModel

pytestmark = pytest.mark.slow

SMALL_WORLD_MODEL = [  # the default latent model shrunk (not the env presets' world_model=small)
    "world_model=default", "world_model.latent_size=16", "world_model.num_members=2", "world_model.encoder.embed_size=16",
    "world_model.encoder.feature_size=16", "world_model.decoder.model_size=16", "world_model.decoder.num_heads=2",
    "world_model.decoder.num_layers=1", "imagination.first_fit_steps=3", "imagination.fit_steps=2",
]
BASE = [*TINY, "algo=grpo", "trainer.iterations=3", "trainer.groups_per_iteration=4"]
TIMING = ("charts/elapsed_s", "time/")


def comparable(records: list[dict]) -> list[dict]:
    """Metrics without wall times and without the world model's own figures."""
    return [{k: v for k, v in r.items() if not k.startswith((*TIMING, "wm/", "imagination/", "charts/imagined"))}
            for r in records]


def test_imagined_share_follows_the_ratio_and_the_world_model_is_saved(tmp_path):
    run_dir = tmp_path / "mb"
    result = finish(start_train(*BASE, *SMALL_WORLD_MODEL, "imagination=dyna", "imagination.ratio=0.75",
                                "imagination.gate_threshold=0", f"hydra.run.dir={run_dir}"))
    assert_ok(result)
    records = read_records(run_dir)[1:]  # iteration 0 is the initial evaluation
    # The warm start's experts were fitted on and scored (threshold 0), so the gate is open from the
    # first iteration: 4 * (1 - 0.75) = 1 real group and 3 imagined ones per update.
    assert [r["imagination/imagined_groups"] for r in records] == [3.0, 3.0, 3.0]
    assert [r["imagination/gate_open"] for r in records] == [1.0, 1.0, 1.0]
    group_size = 4
    real_episodes = [r["charts/real_env_steps"] for r in records]
    stored = TrajectoryStore(run_dir / "trajectories").load()
    assert {t.source for t in stored} == {"real"}  # imagined episodes are never stored as real data
    per_iteration = [sum(t.iteration == i for t in stored) for i in (1, 2, 3)]
    assert per_iteration == [1 * group_size] * 3
    assert sum(t.iteration is None for t in stored) == 16  # the warm start's expert episodes
    assert real_episodes[-1] == sum(t.num_turns for t in stored if t.iteration is not None and t.iteration >= 1)
    assert records[-1]["imagination/ratio"] == pytest.approx(12 / 16)
    assert records[-1]["imagination/ratio_cumulative"] == pytest.approx(9 / 12)
    assert records[-1]["charts/imagined_env_steps"] > 0
    assert "imagination:" in result.stdout and "effective_ratio" in result.stdout
    # Every phase that ran is charged: each iteration scored, imagined and updated; iteration 1 also
    # holds the fit on the experts and the evaluation before the loop.
    every = {"collect_env", "collect_policy", "wm_score", "imagine_model", "imagine_policy", "imagine_other",
             "advantages", "update", "other"}
    phases = [{k[len("time/phase/"):-len("_cpu_s")] for k in r if k.startswith("time/phase/") and k.endswith("_cpu_s")}
              for r in records]
    assert all(every <= charged for charged in phases)
    assert {"wm_fit", "eval"} <= phases[0]
    model = WorldModel.from_pretrained(run_dir / "models" / "world_model")
    assert model.config.num_members == 2


def test_ratio_zero_and_a_closed_gate_reproduce_the_model_free_run(tmp_path):
    runs = {
        "model_free": [],
        "ratio_zero": ["imagination=dyna", "imagination.ratio=0"],
        "gate_closed": [*SMALL_WORLD_MODEL, "imagination=dyna", "imagination.ratio=0.75",
                        "imagination.gate_threshold=1.0"],
    }
    procs = {name: start_train(*BASE, *extra, f"hydra.run.dir={tmp_path / name}") for name, extra in runs.items()}
    results = {name: finish(proc) for name, proc in procs.items()}
    for result in results.values():
        assert_ok(result)
    reference = comparable(read_records(tmp_path / "model_free"))
    weights = load_file(str(tmp_path / "model_free" / "models" / "policy" / "model.safetensors"))
    for name in ("ratio_zero", "gate_closed"):
        assert comparable(read_records(tmp_path / name)) == reference, name
        other = load_file(str(tmp_path / name / "models" / "policy" / "model.safetensors"))
        assert all((weights[k] == other[k]).all() for k in weights), name
    assert not (tmp_path / "ratio_zero" / "models" / "world_model").exists()  # nothing model-based was built
    gate_closed = read_records(tmp_path / "gate_closed")[1:]
    assert all(r["imagination/gate_open"] == 0.0 and r["imagination/imagined_groups"] == 0.0 for r in gate_closed)
    assert all(r["wm/one_step_transitions"] > 0 for r in gate_closed)  # the gate was scored every iteration
