"""benchmarks.refit_schedule: the loop CPU of a run stopped early from its phases, and its table on
hand-made records whose figures are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import refit_schedule


def test_phase_cpu_sums_the_cpu_phases_only():
    records = [{"time/phase/update_cpu_s": 1.5, "time/phase/update_wall_s": 9.0, "time/phase/wm_fit_cpu_s": 2.0},
               {"time/phase/eval_cpu_s": 0.25, "charts/real_env_steps": 300, "time/update_s": 7.0}, {}]
    assert refit_schedule.phase_cpu_seconds(records) == 3.75


def write_run(folder: Path, evaluations: list[tuple[int, float]], iterations: list[tuple[int, dict]],
              summary: dict | None = None) -> None:
    folder.mkdir(parents=True)
    rows = [{"iteration": 0, "charts/real_env_steps": 0, "eval/success_rate": evaluations[0][1]}]
    for i, (steps, phases) in enumerate(iterations, start=1):
        success = [s for at, s in evaluations if at == steps]
        rows.append({"iteration": i, "charts/real_env_steps": steps, **phases,
                     **({"eval/success_rate": success[0]} if success else {})})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary))
        (folder / "done").write_text("")


def test_the_table_by_hand(tmp_path, capsys):
    records, headline = tmp_path / "records", tmp_path / "headline"
    # Stopped early (no summary): 4 iterations of 1,000 real steps, 3 + 1 CPU s each = 16 s over 4,000
    # steps = 4 ms per real step. Success 0.5, 0.8, 0.85, 0.9, 0.9 at 0 .. 4,000: held from the 1,000
    # mark (it and the next two at 0.8 or more), so 16 * 1,000 / 4,000 = 4 s of CPU to it.
    write_run(records / "arm=c100,seed=0", [(0, 0.5), (1000, 0.8), (2000, 0.85), (3000, 0.9), (4000, 0.9)],
              [(1000 * k, {"time/phase/wm_fit_cpu_s": 3.0, "time/phase/update_cpu_s": 1.0}) for k in (1, 2, 3, 4)])
    # Model-free (summary: 10 s over 5,000 steps = 2 ms per step): held from 2,000, so 4 s of CPU to it.
    write_run(headline / "method=grpo,seed=0", [(0, 0.5), (1000, 0.7), (2000, 0.8), (3000, 0.8), (4000, 0.9),
                                                (5000, 0.9)], [(1000 * k, {}) for k in (1, 2, 3, 4, 5)],
              {"cpu_seconds": 10.0, "real_env_steps": 5000, "final_success": 0.9})
    # Today's model-based arm: 40 s over 4,000 steps = 10 ms per step; never held (0.9 only at the end).
    write_run(headline / "method=mb_grpo_r0.9,seed=0", [(0, 0.5), (1000, 0.6), (2000, 0.6), (3000, 0.7),
                                                        (4000, 0.9)], [(1000 * k, {}) for k in (1, 2, 3, 4)],
              {"cpu_seconds": 40.0, "real_env_steps": 4000, "final_success": 0.9})
    refit_schedule.main(["--records", str(records), "--headline", str(headline)])
    out = capsys.readouterr().out
    assert "model-free loop CPU 2.0 ms per real step" in out
    assert "best model-free arm by loop CPU to the target (every seed held): grpo, 0.1 min" in out
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out.splitlines() if line.startswith("| ")}
    c100 = rows["refit every 100 real steps"]
    assert c100[1:4] == ["1,000", "1,000 too few seeds to bound", "4.0"] and c100[4] == "2.0x"
    assert c100[6].startswith("1.0x")  # 4 s against grpo's 4 s
    today = rows["mb_grpo_r0.9 (the headline's records, older code)"]
    assert today[1:4] == ["-", "not held on 1 of 1", "10.0"] and today[4] == "5.0x"
    assert rows["grpo (model-free)"][1] == "2,000"
    assert "refit every 400 real steps, early stop" not in rows  # no records of it


def test_commands_name_each_arm_and_seed(tmp_path):
    lines = refit_schedule.commands([0, 2], tmp_path)
    assert len(lines) == 2 * len(refit_schedule.ARMS)
    assert all("imagination.ratio=0.9" in line and "trainer.max_env_steps=15000" in line for line in lines)
    assert f"'hydra.run.dir=\"{tmp_path}/arm=today,seed=2\"'" in lines[1]
    assert "refit_every_steps" not in lines[0] and "imagination.refit_every_steps=100" in lines[2]


@pytest.mark.parametrize("folder", [f for f in refit_schedule.ARMS if f != "today"])
def test_every_arm_but_today_changes_the_refit_clock_or_only_the_imagined_groups(folder):
    _, overrides = refit_schedule.ARMS[folder]
    values = dict(o.split("=", 1) for o in overrides)
    if "imagination.refit_every_steps" in values:
        return
    # Today: 8 groups per update at ratio 0.9, so 0.8 real and 7.2 imagined groups per iteration. An arm
    # that keeps the clock must keep the 0.8 real groups (the clock counts iterations) and imagine fewer.
    groups, ratio = int(values["trainer.groups_per_iteration"]), float(values["imagination.ratio"])
    assert groups * (1 - ratio) == pytest.approx(0.8)
    assert groups * ratio < 7.2
