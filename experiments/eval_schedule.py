"""When the training loop evaluates: every ``trainer.eval_every`` iterations, or at fixed marks of
real env steps (``trainer.eval_every_steps=N``: N, 2N, 3N, ...).

Why marks: an arm that spends fewer real steps per iteration (a model-based run at a high imagined
ratio) is evaluated more often on the real-step axis when evaluations follow iterations, and the
first crossing of a noisy success estimate comes earlier the more often one looks. Marks give every
arm the same looks. An iteration's real steps arrive together, so a mark is served by the
evaluation at the end of the first iteration whose cumulative real steps reach it; an iteration
that reaches several marks at once evaluates once and records every mark it stands for
(``eval/mark``: the last, ``eval/marks``: how many).
"""

from __future__ import annotations


def marks_crossed(steps_before: int, steps_after: int, every: int) -> list[int]:
    """The marks ``k * every`` (k >= 1) with ``steps_before < mark <= steps_after``: those an
    iteration that took the run from ``steps_before`` to ``steps_after`` real steps reached."""
    if every < 1:
        raise ValueError(f"trainer.eval_every_steps must be >= 1, got {every}")
    if steps_after < steps_before:
        raise ValueError(f"real env steps went down, from {steps_before} to {steps_after}")
    return [k * every for k in range(steps_before // every + 1, steps_after // every + 1)]


def evaluation_due(
    iteration: int, *, last_iteration: int, eval_every: int, eval_every_steps: int | None,
    steps_before: int, steps_after: int,
) -> tuple[bool, list[int]]:
    """Whether the loop evaluates after ``iteration``, and the real-step marks that evaluation
    stands for (empty on the iteration schedule). The last iteration of the run always evaluates."""
    if eval_every_steps is None:
        return iteration % eval_every == 0 or iteration == last_iteration, []
    marks = marks_crossed(steps_before, steps_after, eval_every_steps)
    return bool(marks) or iteration == last_iteration, marks


def mark_metrics(marks: list[int]) -> dict[str, float]:
    """What the log records of the marks an evaluation stands for (nothing off the mark schedule)."""
    if not marks:
        return {}
    return {"eval/mark": float(marks[-1]), "eval/marks": float(len(marks))}
