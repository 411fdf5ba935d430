"""`make run`'s table in the README and in docs/make_run.md: the same table, the figures of
docs/make_run.json, and those the figures of the committed run records in docs/make_run/.

The expectations are read from the markdown and the records by hand (a table parsed cell by cell,
a duration read back to seconds, the held rule on the 300-step marks written out here), not by
calling the renderer; only the last tests run ``benchmarks.make_run_table`` itself, on a copy.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from benchmarks import make_run_table

REPO = Path(__file__).resolve().parents[2]
README, MAKE_RUN_MD = REPO / "README.md", REPO / "docs" / "make_run.md"
SUMMARY = json.loads((REPO / "docs" / "make_run.json").read_text(encoding="utf-8"))
START, END = "<!-- make-run-table:start -->", "<!-- make-run-table:end -->"


def block(page: Path) -> tuple[str, list[list[str]]]:
    """The sentence and the table cells (header first, the rule left out) between the markers."""
    text = page.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1, f"{page}: one start and one end marker"
    inner = text.split(START, 1)[1].split(END, 1)[0].strip().splitlines()
    sentence = inner[0]
    rows = [line for line in inner[1:] if line.startswith("|") and not set(line) <= set("|-")]
    return sentence, [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows]


def seconds(text: str) -> tuple[float, float]:
    """``7.0 min`` -> (420, 3): the duration and half the unit of its last digit."""
    number, unit = text.split()
    scale = {"s": 1, "min": 60, "h": 3600}[unit]
    decimals = len(number.split(".")[1]) if "." in number else 0
    return float(number) * scale, 0.5 * 10 ** -decimals * scale


def first_number(text: str) -> float:
    return float(re.match(r"[\d,.]+", text).group().replace(",", ""))


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_the_readme_and_docs_make_run_show_the_same_table():
    readme_sentence, readme_rows = block(README)
    docs_sentence, docs_rows = block(MAKE_RUN_MD)
    assert readme_rows == docs_rows
    # The same sentence, but for where each page links the summary from.
    assert readme_sentence.replace("(docs/make_run.json)", "(make_run.json)") == docs_sentence


def test_the_sentence_names_the_commit_and_date_of_the_summary():
    sentence, _ = block(README)
    assert f"commit `{SUMMARY['commit']}`" in sentence and SUMMARY["date"] in sentence


def test_the_header_names_the_summary_target_and_budgets():
    _, rows = block(README)
    budgets = [f"success at {budget:,.0f}" for budget in SUMMARY["at"]]
    assert rows[0] == ["configuration", f"real steps to {SUMMARY['target']:g}", *budgets, "final success",
                       "wall time", "CPU time", "seeds"]


def test_every_cell_is_the_summary_figure():
    _, rows = block(README)
    header, body = rows[0], rows[1:]
    arms = SUMMARY["configurations"]
    assert [row[0] for row in body] == [arm["label"] for arm in arms]  # the same arms, in the same order
    for row, arm in zip(body, arms, strict=True):
        cell = dict(zip(header, row, strict=True))
        steps = arm["steps_to_target"]
        reached = [s for s in steps if s is not None]
        if len(reached) < len(steps):
            assert cell[header[1]] == f"not reached ({len(reached)}/{len(steps)})"
        else:  # one seed: its steps; several: their geometric mean
            assert first_number(cell[header[1]]) == round(math.exp(mean([math.log(s) for s in reached])))
        for budget, values in arm["success_at"].items():
            assert abs(first_number(cell[f"success at {int(budget):,}"]) - mean(values)) <= 0.005 + 1e-9
        assert abs(first_number(cell["final success"]) - mean(arm["final_success"])) <= 0.005 + 1e-9
        for column, key in (("wall time", "wall_s"), ("CPU time", "cpu_s")):
            shown, half_unit = seconds(cell[column])
            assert abs(shown - mean(arm[key])) <= half_unit + 1e-9, (column, cell[column], arm[key])
        assert cell["seeds"] == str(len(arm["runs"]))


def held_steps(curve: list[tuple[int, float]], every: int, target: float) -> float | None:
    """The held rule by hand: marks 0, every, ..., each read at the first evaluation at or after it;
    the first mark whose value and the next two marks' are at or above the target."""
    marks = []
    mark = 0
    while mark <= curve[-1][0]:
        marks.append((mark, next(value for steps, value in curve if steps >= mark)))
        mark += every
    for i in range(len(marks) - 2):
        if all(value >= target for _, value in marks[i:i + 3]):
            return float(marks[i][0])
    return None


def evaluations(run: Path) -> list[tuple[int, float]]:
    """(real env steps, success) of every evaluation; at one step count the later record stands."""
    by_steps = {}
    for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("eval/success_rate") is not None:
            by_steps[record["charts/real_env_steps"]] = record["eval/success_rate"]
    return sorted(by_steps.items())


def test_the_summary_is_the_records_figures():
    for arm in SUMMARY["configurations"]:
        for seed, folder in enumerate(arm["runs"]):
            run = REPO / folder
            summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
            assert (run / "done").is_file()
            assert arm["final_success"][seed] == summary["final_success"]
            assert arm["wall_s"][seed] == summary["wall_s"]
            assert arm["cpu_s"][seed] == summary["cpu_seconds"]
            curve = evaluations(run)
            for budget, values in arm["success_at"].items():
                assert values[seed] == [value for steps, value in curve if steps <= float(budget)][-1]
            assert arm["steps_to_target"][seed] == held_steps(curve, SUMMARY["marks"], SUMMARY["target"])


def copy_pages(root: Path) -> None:
    for page in make_run_table.PAGES:
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / page, root / page)


def test_the_committed_pages_are_what_the_script_writes_from_the_summary(tmp_path):
    copy_pages(tmp_path)
    make_run_table.write_tables(SUMMARY, tmp_path)
    for page in make_run_table.PAGES:
        assert (tmp_path / page).read_text(encoding="utf-8") == (REPO / page).read_text(encoding="utf-8")


def test_the_summary_is_what_the_script_builds_from_the_records(tmp_path):
    # The committed records stand in for make run's sweep folder: they are finished runs.
    copy_pages(tmp_path)
    summary = make_run_table.record_sweep(REPO / "docs" / "make_run", commit=SUMMARY["commit"], date=SUMMARY["date"],
                                          note=SUMMARY["note"], root=tmp_path)
    assert summary == SUMMARY
    assert json.loads((tmp_path / "docs" / "make_run.json").read_text(encoding="utf-8")) == SUMMARY


def test_the_committed_records_given_as_the_sweep_are_kept(tmp_path):
    shutil.copytree(REPO / "docs" / "make_run", tmp_path / "docs" / "make_run")
    copy_pages(tmp_path)
    summary = make_run_table.record_sweep(tmp_path / "docs" / "make_run", commit=SUMMARY["commit"],
                                          date=SUMMARY["date"], note=SUMMARY["note"], root=tmp_path)
    assert summary == SUMMARY


def test_a_page_without_its_markers_is_refused(tmp_path):
    copy_pages(tmp_path)
    (tmp_path / "README.md").write_text("# no table here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="README.md: needs exactly one"):
        make_run_table.write_tables(SUMMARY, tmp_path)
