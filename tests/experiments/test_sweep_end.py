"""A sweep's job folder names, and the verdicts it lists at its end (pure functions, no Hydra run)."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from experiments.sweep import NO_MARKER, JobOutcome, format_outcomes, job_dirname, job_outcomes

PAIR = st.builds(
    lambda k, v: f"{k}={v}",
    st.from_regex(r"[a-z][a-z_.]{0,20}", fullmatch=True),
    st.from_regex(r"[a-z0-9.]{1,15}", fullmatch=True),
)


def test_a_short_name_is_hydras_override_dirname():
    assert (
        job_dirname("experiment=ablate_ratio,imagination.ratio=0.9,seed=1", 7)
        == "experiment=ablate_ratio,imagination.ratio=0.9,seed=1"
    )


def test_a_long_name_keeps_the_whole_pairs_that_fit_and_the_job_number():
    name = ",".join(f"key{i}=value{i}" for i in range(20))  # 20 pairs of 11-12 characters: 238 in all
    assert job_dirname(name, 3, max_length=40) == "key0=value0,key1=value1,...,job=3"  # 33 <= 40


@given(pairs=st.lists(PAIR, min_size=1, max_size=30), num=st.integers(0, 10_000), limit=st.integers(40, 200))
def test_names_fit_keep_whole_pairs_and_stay_unique(pairs, num, limit):
    full = ",".join(pairs)
    name = job_dirname(full, num, max_length=limit)
    assert len(name) <= max(limit, 0) or name == full
    if len(full) <= limit:
        assert name == full
    else:
        suffix = f"...,job={num}"
        kept, room = name[: -len(suffix)], limit - len(suffix)
        assert name.endswith(suffix) and full.startswith(kept) and len(kept) <= room
        if "," in full[:room]:  # at least one whole pair fits: cut after the last pair that fits
            assert kept.endswith(",") and "," not in full[len(kept) : room]
        else:  # not even the first pair fits: as much of it as there is room for
            assert kept == full[:room]
        assert job_dirname(full, num + 1, max_length=limit) != name


def make_job(root, name, *markers):
    job = root / name
    (job / ".hydra").mkdir(parents=True)
    for i, marker in enumerate(markers):  # later markers are newer
        (job / marker).write_text("x")
        os.utime(job / marker, (1000 + i, 1000 + i))
    return job


def test_job_outcomes_read_the_markers_of_every_job_folder(tmp_path):
    ok = make_job(tmp_path, "seed=0", "done")
    bad = make_job(tmp_path, "seed=1", "failed")
    killed = make_job(tmp_path, "seed=2")
    retried = make_job(tmp_path, "seed=3", "failed", "done")  # rerun after a failure: the newer verdict
    # A "/" in an override's value nests the job folder.
    nested = make_job(tmp_path, "policy.pretrained=/models/x,seed=4", "done")
    (tmp_path / "report.md").write_text("not a job")
    assert job_outcomes(tmp_path) == sorted(
        [
            JobOutcome(ok, "done"),
            JobOutcome(bad, "failed"),
            JobOutcome(killed, NO_MARKER),
            JobOutcome(retried, "done"),
            JobOutcome(nested, "done"),
        ],
        key=lambda o: o.path,
    )
    assert job_outcomes(tmp_path / "missing") == []


def test_format_lists_each_failed_job_and_its_traceback(tmp_path):
    outcomes = [
        JobOutcome(tmp_path / "a", "done"),
        JobOutcome(tmp_path / "b", "failed"),
        JobOutcome(tmp_path / "c", NO_MARKER),
    ]
    text = format_outcomes(outcomes)
    lines = text.splitlines()
    assert lines[0] == "3 jobs: 1 done, 1 failed, 1 without a marker"
    assert f"FAILED {tmp_path / 'b'}" in lines[1] and f"traceback: {tmp_path / 'b' / 'failed'}" in lines[2]
    assert f"NO MARKER {tmp_path / 'c'}" in lines[3] and len(lines) == 4
    assert format_outcomes([JobOutcome(tmp_path / "a", "done")]) == "1 job: 1 done, 0 failed"
