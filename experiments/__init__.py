"""Runnable entry points: ``python -m experiments.train`` (the training loop), Hydra configs under
``conf/``, evaluation and benchmarks. Library code others import lives in the packages to the left
(``envs``, ``world_model``, ``critic``, ``policy``, ``imagination``)."""
