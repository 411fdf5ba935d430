"""A real-step budget (``trainer.max_env_steps``) that stops collection where it is reached.

The loop checks the budget after each iteration; on its own that overshoots by up to a whole
iteration of episodes. So an iteration that could reach the budget (its groups' most possible steps,
every episode at its turn cap and every resampling round of dynamic sampling played, reach what
is left) plays its groups one after another and starts no new group once the budget is reached: a
group already started finishes, so the overshoot is at most one group's steps per rank. Any other
iteration plays all its groups at once, as without a budget, so its numbers are unchanged. (The one
that plays group by group samples in other batches, so its numbers may differ from a run
without a budget even when, as it turns out, the budget is not reached in it.)

Several ranks: each rank plays its own share of the groups, so each gets its share of the steps
left (``rank_step_budget``, the steps split like the groups) and stops on its own count. The shares
add up to what is left, so the ranks together stop within one group per rank of the budget, and no
rank waits on another between groups. Whether any rank cut its groups is agreed after collection.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepBudget:
    """One rank's real-step allowance in an iteration that may reach the budget."""

    allowed: int
    """Steps this rank may start new groups under."""
    spent: int = 0
    cut: bool = False
    """A group was left unplayed because the allowance was spent."""

    def exhausted(self) -> bool:
        return self.spent >= self.allowed


def may_reach_budget(real_env_steps: int, max_env_steps: int | None, groups: int, most_group_steps: int) -> bool:
    """Whether ``groups`` groups of at most ``most_group_steps`` steps each could reach the budget."""
    return max_env_steps is not None and real_env_steps + groups * most_group_steps >= max_env_steps


def rank_step_budget(steps_left: int, world_size: int, rank: int) -> int:
    """Rank ``rank``'s share of ``steps_left`` (shares differ by at most one and add up to it)."""
    return steps_left * (rank + 1) // world_size - steps_left * rank // world_size


def budget_cut_entry(iteration: int, max_env_steps: int, real_env_steps: int, groups_planned: int,
                     groups_played: int) -> dict[str, int]:
    """The ``budget_cut`` entry of ``summary.json``: where collection stopped and what it had planned."""
    return {"iteration": iteration, "max_env_steps": max_env_steps, "real_env_steps": real_env_steps,
            "groups_planned": groups_planned, "groups_played": groups_played}
