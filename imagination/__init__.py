"""Imagined rollouts inside the world model, and the controls on their bias.

- ``DreamEnv`` puts a ``WorldModel`` behind the ``Env`` core (start from a real reset or a real
  history prefix, imagine each step, with a reward penalty, uncertainty halting and a horizon);
  ``DreamStepper`` steps many of them in one batched model call; ``DreamEnvFactory`` builds envs
  sharing a stepper for ``envs.collect(..., source="imagined")``.
- ``imagine_groups`` plays one imagined group per real branch point (``sample_branch_points``).
- ``ImaginationConfig`` holds every control; ``split_groups`` / ``scheduled_ratio`` split an
  update into real and imagined groups; ``ImaginationGate`` keeps imagination off while the world
  model predicts fresh real data badly; ``refit_and_gate`` scores and refits between iterations.
- ``imagined_minus_real_return`` and ``imagination_metrics`` measure the bias.
- ``CounterfactualGiGPO`` (``algo=counterfactual_gigpo``): step groups of the real action and G policy
  siblings imagined from every real state (``imagine_counterfactual_groups``), valued by a latent critic;
  it and the real-env oracle live in ``imagination.step_groups``.
- ``imagination.gym_dream`` (not imported here: it needs the optional gymnasium) registers
  ``reverie/Dream-v0``, a saved world model as a gymnasium env over ``DreamEnv``.
"""

from imagination.bias import imagined_minus_real_return, return_after
from imagination.branching import branchable_turns, sample_branch_points
from imagination.config import ImaginationConfig
from imagination.dream_env import SUCCESS_REWARD, DreamEnv, DreamEnvFactory, DreamStepper
from imagination.gate import ImaginationGate
from imagination.imagine import ImaginedGroups, imagine_groups
from imagination.metrics import imagination_metrics, imagination_summary
from imagination.mixing import budget_spent, scheduled_ratio, split_groups
from imagination.refit import refit_and_gate
from imagination.step_groups.counterfactual_gigpo import CounterfactualGiGPO
from imagination.step_groups.groups import CounterfactualGroups, imagine_counterfactual_groups

__all__ = [
    "CounterfactualGiGPO",
    "CounterfactualGroups",
    "DreamEnv",
    "DreamEnvFactory",
    "DreamStepper",
    "ImaginationConfig",
    "ImaginationGate",
    "ImaginedGroups",
    "SUCCESS_REWARD",
    "branchable_turns",
    "budget_spent",
    "imagination_metrics",
    "imagination_summary",
    "imagine_counterfactual_groups",
    "imagine_groups",
    "imagined_minus_real_return",
    "refit_and_gate",
    "return_after",
    "sample_branch_points",
    "scheduled_ratio",
    "split_groups",
]
