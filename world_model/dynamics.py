"""``EnsembleDynamics``: K members, each an observation decoder plus reward and done heads.

Members share the history encoder (its latent is the state) and differ in their own weights only,
drawn independently at initialisation, so they agree where the data pinned them down and disagree
elsewhere (``uncertainty``). The decoder of a member sees the latent before the turn and the action
(``decoder``); its reward and done heads read the latent *after* the turn, i.e. with the outcome
folded in, so a sampled ``correct`` or a sampled goal grid comes with its reward and its end, as
DreamerV3's reward and continue heads read the state they describe.

``generate`` samples text from the ensemble's mixture ``mean_k p_k`` (the Bayesian model average)
one word at a time and records the members' disagreement on every word it emits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from einops import rearrange, reduce
from torch import nn

from world_model.decoder import DecoderConfig, ObservationDecoder
from world_model.uncertainty import mutual_information


class OutcomeHeads(nn.Module):
    """``(B, D)`` latent after a turn -> ``(B,)`` reward and ``(B,)`` done logit."""

    def __init__(self, latent_size: int, hidden: int) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(latent_size, hidden), nn.GELU())
        self.reward = nn.Linear(hidden, 1)
        self.done = nn.Linear(hidden, 1)

    def forward(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(latent)  # (B, H)
        return self.reward(h).squeeze(-1), self.done(h).squeeze(-1)  # (B,), (B,)


@dataclass(frozen=True)
class GeneratedText:
    """Sampled observation rows of ``EnsembleDynamics.generate``."""

    ids: torch.Tensor  # (B, S) the sampled words then </s>, padded after it (no <s>)
    ended: torch.Tensor  # (B,) bool: the row emitted </s> within the cap
    disagreement: torch.Tensor  # (B,) mean mutual information over the row's emitted tokens (nats)


class EnsembleDynamics(nn.Module):
    """K observation decoders and K outcome heads over one shared latent."""

    def __init__(self, config: DecoderConfig, num_members: int, head_hidden: int) -> None:
        super().__init__()
        self.config = config
        self.decoders = nn.ModuleList(ObservationDecoder(config) for _ in range(num_members))
        self.heads = nn.ModuleList(OutcomeHeads(config.latent_size, head_hidden) for _ in range(num_members))

    @property
    def num_members(self) -> int:
        return len(self.decoders)

    def logits(
        self, latent: torch.Tensor, query_ids: torch.Tensor, query_mask: torch.Tensor, text_ids: torch.Tensor
    ) -> torch.Tensor:
        """Every member's next-token logits: ``(B, D)``, ``(B, A)``, ``(B, S)`` -> ``(K, B, S, V)``."""
        return torch.stack([decoder(latent, query_ids, query_mask, text_ids) for decoder in self.decoders])

    def outcome(self, next_latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's reward and done logit from the latent after the turn: ``(B, D)`` -> ``(K, B)``."""
        rewards, dones = zip(*(head(next_latent) for head in self.heads), strict=True)
        return torch.stack(rewards), torch.stack(dones)  # (K, B), (K, B)

    @torch.no_grad()
    def generate(
        self,
        latent: torch.Tensor,
        query_ids: torch.Tensor,
        query_mask: torch.Tensor,
        *,
        bos_id: int,
        eos_id: int,
        pad_id: int,
        banned_ids: Sequence[int],
        max_words: int,
        generator: torch.Generator | None,
        greedy: bool = False,
    ) -> GeneratedText:
        """Sample up to ``max_words`` words and ``</s>`` per row from the mixture of the members.

        A row still going after ``max_words`` words is cut there (``ended`` False).

        ``banned_ids`` (padding, ``<s>``, markers, unknown) are never emitted. ``greedy`` takes the
        mixture's most likely word instead of drawing from ``generator``. Each call to the members
        recomputes the whole prefix: rows are short, and it keeps the decoder a plain module.
        """
        batch = latent.shape[0]
        text = torch.full((batch, 1), bos_id, dtype=torch.long, device=latent.device)  # (B, 1)
        finished = torch.zeros(batch, dtype=torch.bool, device=latent.device)  # (B,)
        total = torch.zeros(batch, device=latent.device)  # (B,) summed disagreement
        count = torch.zeros(batch, device=latent.device)  # (B,) emitted tokens
        banned = torch.tensor(list(banned_ids), dtype=torch.long, device=latent.device)
        for position in range(max_words + 1):
            last = self.logits(latent, query_ids, query_mask, text)[:, :, -1].float()  # (K, B, V)
            last[..., banned] = float("-inf")
            probs = torch.softmax(last, dim=-1)  # (K, B, V)
            mixture = reduce(probs, "k b v -> b v", "mean")  # (B, V)
            if greedy:
                word = mixture.argmax(dim=-1)  # (B,)
            else:
                word = rearrange(torch.multinomial(mixture, 1, generator=generator), "b 1 -> b")  # (B,)
            live = ~finished  # (B,)
            total += mutual_information(probs) * live
            count += live
            if position == max_words:  # past the cap only </s> may follow; other words are cut
                live = live & (word == eos_id)
            word = torch.where(live, word, torch.full_like(word, pad_id))  # (B,)
            text = torch.cat([text, rearrange(word, "b -> b 1")], dim=1)  # (B, S + 1)
            finished |= word == eos_id
            if bool(finished.all()):
                break
        return GeneratedText(ids=text[:, 1:], ended=finished, disagreement=total / count.clamp(min=1.0))
