"""The critic: values of agent states for PPO, behind one turn-level seam.

``TurnCritic`` maps ``CriticStates`` to one value per state; ``TokenCritic`` reads the prompt ids the
policy saw, ``LatentCritic`` the agent's history (the world model's encoder plus a value head).
``gae`` is the one GAE / lambda-return recursion, shared with the policy's estimators;
``critic.fit`` fits any ``TurnCritic`` on fixed data (``lambda_returns``, ``fit_turn_critic``).
"""

from critic.base import CriticStates, TurnCritic
from critic.fit import (
    explained_variance,
    fit_turn_critic,
    history_states,
    lambda_returns,
    mse,
    predict,
    turn_states,
)
from critic.history_text import HistoryText
from critic.latent_critic import LatentCritic, LatentCriticConfig
from critic.targets import gae
from critic.token_alignment import first_response_column, token_values, turn_values
from critic.token_critic import TokenCritic, TokenCriticConfig

__all__ = [
    "CriticStates",
    "HistoryText",
    "LatentCritic",
    "LatentCriticConfig",
    "TokenCritic",
    "TokenCriticConfig",
    "TurnCritic",
    "explained_variance",
    "first_response_column",
    "fit_turn_critic",
    "gae",
    "history_states",
    "lambda_returns",
    "mse",
    "predict",
    "token_values",
    "turn_states",
    "turn_values",
]
