"""Imagined rollouts inside the world model.

``DreamEnv`` puts a ``WorldModel`` behind the ``Env`` core (start from a real reset or a real
history prefix, imagine each step, with a reward penalty, uncertainty halting and a horizon);
``DreamStepper`` steps many of them in one batched model call; ``DreamEnvFactory`` builds envs
sharing a stepper for ``envs.collect(..., source="imagined")``. Mixing imagined with real data in
the training loop is planned (see docs/design.md).
"""

from imagination.dream_env import SUCCESS_REWARD, DreamEnv, DreamEnvFactory, DreamStepper, derive_seed

__all__ = ["SUCCESS_REWARD", "DreamEnv", "DreamEnvFactory", "DreamStepper", "derive_seed"]
