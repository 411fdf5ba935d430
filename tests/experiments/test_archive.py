"""A finished run's record (experiments/reporting/archive.py): the reports read the same from it as
from the run."""

from __future__ import annotations

import json
from dataclasses import asdict

from experiments.reporting.archive import archive_finished, archive_run, kept_records
from experiments.reporting.runs import load_run


def write_run(folder, *, done=True, summary=True):
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("- seed=2\n- env=frozen_lake\n")
    (folder / "config.yaml").write_text("env:\n  name: frozen_lake\ntrainer:\n  eval_every_steps: 50\n")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "step_1.pt").write_bytes(b"\0" * 1000)
    records = []
    for i in range(1, 12):  # the last record (11) logs no evaluation
        record = {"iteration": i, "charts/real_env_steps": 25 * i, "charts/elapsed_s": 2.0 * i,
                  "losses/policy": 0.1 * i}
        if i <= 10:
            record["wm/one_step_exact_match"] = i / 10
        if i % 2 == 0 and i <= 10:
            record |= {"eval/success_rate": i / 20, "eval/invalid_rate": 0.0}
        records.append(record)
    lines = "".join(json.dumps(record) + "\n" for record in records) + '{"iteration": 12, "charts/re'
    (folder / "metrics.jsonl").write_text(lines)
    if summary:
        (folder / "summary.json").write_text(json.dumps({"real_env_steps": 275, "final_success": 0.5, "wall_s": 22.0,
                                                         "cpu_seconds": 19.0, "ledger": {"expert_steps": 0}}))
    if done:
        (folder / "done").write_text("")
    return folder


def test_the_record_reads_as_the_run_without_its_bulk(tmp_path):
    run = write_run(tmp_path / "runs" / "method=x,seed=2")
    record = archive_run(run, tmp_path / "kept" / "x")
    original, kept = asdict(load_run(run)), asdict(load_run(record))
    assert original.pop("path") != kept.pop("path")
    assert kept == original and kept["curve"] == [(50, 0.1), (100, 0.2), (150, 0.3), (200, 0.4), (250, 0.5)]
    assert not (record / "checkpoints").exists()
    kept_keys = {key for line in (record / "metrics.jsonl").read_text().splitlines() for key in json.loads(line)}
    assert "losses/policy" not in kept_keys and {"eval/invalid_rate", "wm/one_step_exact_match"} <= kept_keys


def test_without_a_summary_the_last_record_still_gives_the_steps_and_time(tmp_path):
    run = write_run(tmp_path / "run", summary=False)
    kept = load_run(archive_run(run, tmp_path / "kept"))
    assert (kept.real_env_steps, kept.wall_s, kept.final_success) == (275, 22.0, 0.5)


def test_only_reported_keys_and_the_last_record_are_kept():
    records = [{"iteration": 1, "charts/real_env_steps": 10, "losses/value": 1.0},
               {"iteration": 2, "charts/real_env_steps": 20, "eval/success_rate": 0.5, "losses/value": 2.0},
               {"iteration": 3, "charts/real_env_steps": 30, "losses/value": 3.0}]
    assert kept_records(records) == [{"iteration": 2, "charts/real_env_steps": 20, "eval/success_rate": 0.5},
                                   {"iteration": 3, "charts/real_env_steps": 30}]
    assert kept_records([]) == []


def test_only_finished_runs_are_kept_and_a_kept_record_is_replaced(tmp_path):
    write_run(tmp_path / "env" / "method=a,seed=0")
    write_run(tmp_path / "env" / "method=b,seed=0", done=False)
    stale = tmp_path / "kept" / "method=a,seed=0"
    stale.mkdir(parents=True)
    (stale / "leftover").write_text("")
    written = archive_finished(tmp_path / "env", tmp_path / "kept")
    assert written == [stale] and not (stale / "leftover").exists()
    assert not (tmp_path / "kept" / "method=b,seed=0").exists()
    assert archive_finished(tmp_path / "missing", tmp_path / "kept") == []


def test_keeping_records_where_they_already_are_loses_nothing(tmp_path):
    run = write_run(tmp_path / "env" / "method=a,seed=0")
    before = load_run(run)
    assert archive_finished(tmp_path / "env", tmp_path / "env") == [run]
    assert asdict(load_run(run)) == asdict(before) and (run / "checkpoints").exists()


def test_a_record_names_no_path_of_the_machine_that_ran_it(tmp_path):
    run = write_run(tmp_path / "run")
    (run / ".hydra" / "overrides.yaml").write_text(
        "- seed=2\n- env=frozen_lake\n- trainer.warm_start.cache_dir='/somewhere/warm_starts'\n")
    (run / "config.yaml").write_text("env:\n  name: frozen_lake\ntrainer:\n  eval_every_steps: 50\n"
                                     "  warm_start:\n    cache_dir: /somewhere/warm_starts\n"
                                     "resume: /somewhere/runs/seed_2\n")
    record = archive_run(run, tmp_path / "kept")
    text = (record / ".hydra" / "overrides.yaml").read_text() + (record / "config.yaml").read_text()
    assert "/somewhere" not in text
    original, kept = load_run(run), load_run(record)
    assert kept.overrides == {"seed": "2", "env": "frozen_lake"} and kept.config_key() == original.config_key()
    assert (kept.env, kept.eval_every_steps, kept.seed) == ("frozen_lake", 50, 2)
