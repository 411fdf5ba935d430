"""Reverie's world model: a latent history encoder and an ensemble of text dynamics members.

``WorldModel`` is the entry point (``initial_state``, ``step``, ``observe``, ``loss``,
``save_pretrained`` / ``from_pretrained``); ``build_training_batch`` turns recorded trajectories
into its training rows; ``TurnTokenizer`` makes every token row the model reads.
"""

from world_model.batch import WorldModelBatch
from world_model.decoder import DecoderConfig, ObservationDecoder
from world_model.dynamics import EnsembleDynamics, GeneratedText, OutcomeHeads
from world_model.encoder import EncoderConfig, LatentStateEncoder, TurnEmbedder
from world_model.model import WorldModel, WorldModelConfig
from world_model.state import Predictions, WorldState
from world_model.trajectory_rows import build_training_batch
from world_model.turn_tokens import TokenLimits, TurnTokenizer, default_token_limits, token_limits
from world_model.uncertainty import member_std, mutual_information

__all__ = [
    "DecoderConfig",
    "EncoderConfig",
    "EnsembleDynamics",
    "GeneratedText",
    "LatentStateEncoder",
    "ObservationDecoder",
    "OutcomeHeads",
    "Predictions",
    "TokenLimits",
    "TurnEmbedder",
    "TurnTokenizer",
    "WorldModel",
    "WorldModelBatch",
    "WorldModelConfig",
    "WorldState",
    "build_training_batch",
    "default_token_limits",
    "token_limits",
    "member_std",
    "mutual_information",
]
