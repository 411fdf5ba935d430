"""``EnsembleDynamics``: K members, each an observation decoder plus reward and done heads.

Members share the history encoder (its latent is the state) and differ in their own weights only,
drawn independently at initialisation, so they agree where the data pinned them down and disagree
elsewhere (``uncertainty``). The decoder of a member sees the latent before the turn and the action
(``decoder``); its reward and done heads read the latent *after* the turn, i.e. with the outcome
folded in, so a sampled ``correct`` or a sampled goal grid comes with its reward and its end, as
DreamerV3's reward and continue heads read the state they describe.

``generate`` samples text from the ensemble's mixture ``mean_k p_k`` (the Bayesian model average)
one word at a time and records the members' disagreement on every word it emits. The members run
together, each new word through a KV cache of the earlier ones (``cached_decoding``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from world_model.batched_members import member_logits_at, member_outcome
from world_model.cached_decoding import CachedEnsembleDecoder
from world_model.decoder import DecoderConfig, ObservationDecoder
from world_model.decoder_context import DecoderContext
from world_model.disagreement_score import scattered_score
from world_model.sampling import inverse_cdf_sample
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
    disagreement: torch.Tensor  # (B,) the row's emitted tokens' mutual information, pooled by ``score`` (nats)


class EnsembleDynamics(nn.Module):
    """K observation decoders and K outcome heads over one shared latent."""

    def __init__(
        self, config: DecoderConfig, num_members: int, head_hidden: int,
        integer_values: Sequence[int | None] | None = None,
    ) -> None:
        """``integer_values``: per token id, the integer the word spells (or None), to give every
        member's token embeddings the ordinal number component; None: plain word embeddings."""
        super().__init__()
        self.config = config
        self.decoders = nn.ModuleList(ObservationDecoder(config, integer_values) for _ in range(num_members))
        self.heads = nn.ModuleList(OutcomeHeads(config.latent_size, head_hidden) for _ in range(num_members))

    @property
    def num_members(self) -> int:
        return len(self.decoders)

    def logits(self, context: DecoderContext, text_ids: torch.Tensor) -> torch.Tensor:
        """Every member's next-token logits: ``context`` of B rows, ``(B, S)`` text -> ``(K, B, S, V)``.
        The context's copy memory (``previous_ids``, ``previous_mask``) is given exactly when the
        decoders have the copy path (``DecoderConfig.copy_observation``)."""
        return torch.stack([decoder(context, text_ids) for decoder in self.decoders])

    def logits_at(self, context: DecoderContext, text_ids: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
        """``logits(...)[:, scored]`` for a ``(B, S)`` bool ``scored``, all members batched and only
        the scored positions projected onto the vocabulary: ``(K, P, V)`` (``batched_members``)."""
        return member_logits_at(self.decoders, context, text_ids, scored)

    def outcome(self, next_latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each member's reward and done logit from the latent after the turn: ``(B, D)`` -> ``(K, B)``,
        all members in one batched computation (``batched_members``)."""
        return member_outcome(self.heads, next_latent)  # (K, B), (K, B)

    @torch.no_grad()
    def generate(
        self,
        context: DecoderContext,
        *,
        bos_id: int,
        eos_id: int,
        pad_id: int,
        banned_ids: Sequence[int],
        max_words: int,
        generator: torch.Generator | None,
        greedy: bool = False,
        use_cache: bool = True,
        score: str = "sum",
    ) -> GeneratedText:
        """Sample up to ``max_words`` words and ``</s>`` per row from the mixture of the members.

        A row still going after ``max_words`` words is cut there (``ended`` False).

        ``banned_ids`` (padding, ``<s>``, markers, unknown) are never emitted. ``greedy`` takes the
        mixture's most likely word instead of drawing from ``generator``.

        ``use_cache`` feeds each new word through all members at once with their keys and values
        of earlier positions kept (``CachedEnsembleDecoder``); ``False`` reruns every member's
        ``forward`` over the whole prefix per word, the reference the cached path is tested
        against (same logits up to float rounding, so the same words).

        ``score`` pools each row's per-token disagreement (``disagreement_score``: ``"sum"``,
        ``"max"`` or ``"mean"``). ``context``'s copy memory is given as in ``logits``.
        """
        batch, device = context.latent.shape[0], context.latent.device
        text = torch.full((batch, max_words + 2), pad_id, dtype=torch.long, device=device)  # (B, S_max)
        text[:, 0] = bos_id
        finished = torch.zeros(batch, dtype=torch.bool, device=device)  # (B,)
        forbid = torch.zeros(self.config.vocab_size, device=device)  # (V,) added to every logit row
        forbid[list(banned_ids)] = float("-inf")
        # Rows leave the batch once they have written </s>: ``active`` lists the A rows still
        # writing, in the order the decoder holds them.
        active = torch.arange(batch, device=device)  # (A,)
        seen_probs, seen_rows = [], []  # per position: (K, A, V) member probabilities, (A,) their rows
        cached = CachedEnsembleDecoder(self.decoders, context, max_words + 1) if use_cache else None
        for position in range(max_words + 1):
            if cached is None:  # the reference: every member over the whole prefix again
                prefix = text[active, : position + 1]  # (A, S)
                last = self.logits(context.select(active), prefix)[:, :, -1]  # (K, A, V)
            else:
                last = cached.next_logits(text[active, position])  # (K, A, V)
            probs = torch.softmax(last.float() + forbid, dim=-1)  # (K, A, V)
            mixture = probs.sum(dim=0)  # (A, V), K times the members' mean; the draws normalise it
            if greedy:
                word = mixture.argmax(dim=-1)  # (A,)
            else:
                word = inverse_cdf_sample(mixture, generator)  # (A,)
            seen_probs.append(probs)
            seen_rows.append(active)
            ends = word == eos_id  # (A,)
            if position == max_words:  # past the cap only </s> may follow; other words are cut
                word = word.masked_fill(~ends, pad_id)
            text[active, position + 1] = word
            if bool(ends.any()):
                finished[active[ends]] = True
                active = active[~ends]
                if active.numel() == 0:
                    break
                if cached is not None:
                    cached.keep(~ends)
        # The disagreement of every (row, position) written, pooled per row at once.
        per_token = mutual_information(torch.cat(seen_probs, dim=1))  # (N,) over all N written tokens
        rows = torch.cat(seen_rows)  # (N,)
        disagreement = scattered_score(per_token, rows, batch, score)  # (B,)
        return GeneratedText(ids=text[:, 1 : len(seen_rows) + 1], ended=finished, disagreement=disagreement)
