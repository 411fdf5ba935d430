"""The LM world model: an ensemble of causal LMs writing the next observation over the text history.

``LMWorldModel`` answers the world-model seam (``world_model.protocol``) like the latent
``WorldModel``; ``LMOptions`` / ``LMWorldModelConfig`` configure it; ``fit_lm_world_model`` fits it
with Lightning.
"""

from world_model.lm.config import LMOptions, LMWorldModelConfig
from world_model.lm.history import LMState
from world_model.lm.model import LMWorldModel

__all__ = ["LMOptions", "LMState", "LMWorldModel", "LMWorldModelConfig"]
