"""Step groups: a comparison group built on purpose at every real step (the real action and G policy
siblings, each played h turns and valued by a latent critic).

- ``groups``: playing the groups (``play_step_groups``), in the world model
  (``imagine_counterfactual_groups``); ``advantages``: their arithmetic as pure functions.
- ``counterfactual_gigpo``: ``algo=counterfactual_gigpo``, GiGPO with imagined step groups.
- ``real_branch``: ``algo=real_branch_gigpo``, the same groups played in the real env (an oracle).
"""
