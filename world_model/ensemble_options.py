"""The options every world model's ensemble shares, declared once: the ``world_model`` group
(``WorldModelOptions``) and each kind's saved config (``WorldModelConfig``, ``LMWorldModelConfig``)
extend these dataclasses, so a saved model records them under the same names as the YAML sets them.

Keyword-only, so that a config extending them keeps its own fields first and positional.
"""

from __future__ import annotations

from dataclasses import dataclass

from envs.checks import check_bool, check_int
from world_model.disagreement_score import check_score


@dataclass(kw_only=True)
class EnsembleOptions:
    """The ensemble of either kind (``world_model.num_members``, ``head_hidden``, ``disagreement``,
    ``bootstrap``)."""

    num_members: int = 5
    """Ensemble members K (decoder and heads each); 1 gives no disagreement."""
    head_hidden: int = 64
    """Hidden width of each member's reward and done heads."""
    disagreement: str = "sum"
    """How an observation's per-token disagreement becomes one score (``step``'s ``uncertainty``,
    ``disagreement``): ``sum`` (the total, which tokens the members agree on leave unchanged, so the
    same scale on short and long observations), ``max`` (its largest token) or ``mean`` (the mean per
    token, the older score, which shrinks on long observations); see ``world_model.disagreement_score``."""
    bootstrap: bool = False
    """Train each member on its own resample (with replacement) of every batch's trajectories, so
    members also differ where the data is thin (``world_model.bootstrap``); False: every member sees
    the whole batch. Either kind: the resample is drawn per training step from the fit's seeded RNG
    (``world_model.bootstrap.bootstrap_counts``)."""

    def check_ensemble(self, owner: str) -> None:
        """Range checks, each naming ``owner.key`` (``world_model`` for the YAML, the class for a config)."""
        for name in ("num_members", "head_hidden"):
            check_int(f"{owner}.{name}", getattr(self, name), 1)
        check_score(self.disagreement, f"{owner}.disagreement")
        check_bool(f"{owner}.bootstrap", self.bootstrap)


@dataclass(kw_only=True)
class LatentOptions(EnsembleOptions):
    """The latent model's own switch (``world_model.ordinal_numbers``)."""

    ordinal_numbers: bool = False
    """Give every word that is an integer a learned ordinal component on top of its own embedding (a
    thermometer code: the sum of learned steps of all values up to its own, so "n > g" is linear), in
    the encoder and in every decoder (``world_model.ordinal``); False: unrelated word embeddings. The
    latent model only (the LM world model reads sub-word tokens). A config.json saved before the
    option existed has no such key and loads as False."""

    def check_latent(self, owner: str) -> None:
        """``check_ensemble`` and the switch, each naming ``owner.key``."""
        self.check_ensemble(owner)
        check_bool(f"{owner}.ordinal_numbers", self.ordinal_numbers)
