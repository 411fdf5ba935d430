"""The batched fit (members stacked, logits only where scored) against the per-member loss it replaced.

``reference_loss`` is the loss as it was computed before the members were batched: every member's
decoder called on its own over the padded rows, logits at every position, each member's reward and
done heads called on their own. Losses and gradients must agree up to float rounding.
"""

import pytest
import torch

from tests.world_model.conftest import tiny_model
from world_model import build_training_batch
from world_model.decoder_context import DecoderContext
from world_model.losses import done_bce, regression_mse, token_nll

PARTS = ("loss", "observation_nll", "reconstruction_nll", "reward_mse", "done_bce")


def reference_loss(model, batch) -> dict[str, torch.Tensor]:
    """The per-member teacher-forced loss (see the module docstring)."""
    latents = model.encoder.states(
        batch.observation_ids, batch.observation_mask, batch.turn_ids, batch.turn_mask, batch.turn_count
    )  # (B, N + 1, D)
    outcome, current = batch.outcome_mask, batch.latent_mask
    before, after, now = latents[:, :-1][outcome], latents[:, 1:][outcome], latents[current]
    tk = model.tokenizer
    look_ids = torch.full((now.shape[0], batch.query_ids.shape[-1]), tk.pad_id)
    look_ids[:, 0] = tk.look_id
    look_mask = (look_ids != tk.pad_id).long()
    texts = torch.cat([batch.text_ids[:, 1:][outcome], batch.text_ids[current]])
    text_mask = torch.cat([batch.text_mask[:, 1:][outcome], batch.text_mask[current]])
    latent = torch.cat([before, now])
    query_ids = torch.cat([batch.query_ids[outcome], look_ids])
    query_mask = torch.cat([batch.query_mask[outcome], look_mask])
    logits = torch.stack(
        [decoder(DecoderContext(latent, query_ids, query_mask), texts[:, :-1]) for decoder in model.dynamics.decoders]
    )  # (K, R + R', S - 1, V)
    rows = before.shape[0]
    next_nll = token_nll(logits[:, :rows], texts[:rows, 1:], text_mask[:rows, 1:])
    now_nll = token_nll(logits[:, rows:], texts[rows:, 1:], text_mask[rows:, 1:])
    outs = [head(after) for head in model.dynamics.heads]
    rewards = torch.stack([r for r, _ in outs])
    done_logits = torch.stack([d for _, d in outs])
    parts = {
        "observation_nll": next_nll.sum(),
        "reconstruction_nll": now_nll.sum(),
        "reward_mse": regression_mse(rewards, batch.rewards[outcome]).sum(),
        "done_bce": done_bce(done_logits, batch.dones[outcome]).sum(),
    }
    c = model.config
    parts["loss"] = (
        parts["observation_nll"]
        + c.reconstruction_weight * parts["reconstruction_nll"]
        + c.reward_weight * parts["reward_mse"]
        + c.done_weight * parts["done_bce"]
    )
    return parts


def perturbed(model, seed: int):
    """Weights moved off their initialisation (zero biases and unit norms would hide a swapped map)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


@pytest.mark.parametrize("layers", [1, 2])
def test_batched_loss_and_gradients_equal_the_per_member_loss(hn_tokenizer, hn_trajectories, layers):
    model = perturbed(tiny_model(hn_tokenizer, seed=3, decoder={"model_size": 16, "num_layers": layers,
                                                                "num_heads": 2, "latent_slots": 4}), seed=4)
    batch = build_training_batch(hn_trajectories, hn_tokenizer)
    new = model.loss(batch)
    new_grads = torch.autograd.grad(new["loss"], list(model.parameters()), allow_unused=True)
    old = reference_loss(model, batch)
    old_grads = torch.autograd.grad(old["loss"], list(model.parameters()), allow_unused=True)
    for part in PARTS:
        assert torch.allclose(new[part], old[part], rtol=1e-5, atol=1e-6), (part, new[part], old[part])
    for (name, _), a, b in zip(model.named_parameters(), new_grads, old_grads, strict=True):
        assert (a is None) == (b is None), name
        if a is not None:
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), (name, float((a - b).abs().max()))


def test_one_member_is_trained_by_its_own_loss_only(hn_tokenizer, hn_trajectories):
    """A member's parameters get gradients from its own terms only: the batched members do not mix."""
    model = perturbed(tiny_model(hn_tokenizer, seed=5), seed=6)
    batch = build_training_batch(hn_trajectories[:5], hn_tokenizer)
    latents = model.encoder.states(
        batch.observation_ids, batch.observation_mask, batch.turn_ids, batch.turn_mask, batch.turn_count
    ).detach()
    before = latents[:, :-1][batch.outcome_mask]
    query_ids, query_mask = batch.query_ids[batch.outcome_mask], batch.query_mask[batch.outcome_mask]
    texts = batch.text_ids[:, 1:][batch.outcome_mask]
    scored = batch.text_mask[:, 1:][batch.outcome_mask][:, 1:].bool()
    logits = model.dynamics.logits_at(DecoderContext(before, query_ids, query_mask), texts[:, :-1], scored)  # (K, P, V)
    logits[1].sum().backward()
    for k, decoder in enumerate(model.dynamics.decoders):
        touched = any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in decoder.parameters())
        assert touched == (k == 1), k


def reference_batch(trajectories, tk):
    """The batch as ``build_training_batch`` built it before rows were cached per trajectory."""
    from world_model.turn_tokens import pad_nested, pad_rows

    kept = [t for t in trajectories if t.turns]
    first = tk.observation_words([t.turns[0].observation for t in kept])
    seen = [[w, *tk.observation_words([u.next_observation for u in t.turns])] for w, t in zip(first, kept, strict=True)]
    actions = [tk.action_words([u.action for u in t.turns]) for t in kept]
    obs = pad_rows([tk.observation_row(w) for w in first], tk.pad_id)
    turns = pad_nested(
        [[tk.turn_row(r, a) for r, a in zip(o[1:], acts, strict=True)] for o, acts in zip(seen, actions, strict=True)],
        tk.pad_id,
    )
    queries = pad_nested([[tk.query_row(a) for a in acts] for acts in actions], tk.pad_id)
    texts = pad_nested([[tk.text_row(w) for w in o] for o in seen], tk.pad_id)
    n = turns[0].shape[1]
    rewards, dones = torch.zeros(len(kept), n), torch.zeros(len(kept), n)
    for b, t in enumerate(kept):
        rewards[b, : t.num_turns] = torch.tensor([u.reward for u in t.turns], dtype=torch.float)
        dones[b, : t.num_turns] = torch.tensor([float(u.done) for u in t.turns])
    count, start = torch.tensor([t.num_turns for t in kept]), torch.tensor([t.branch_turn for t in kept])
    k = torch.arange(n + 1)
    return {
        "observation_ids": obs[0], "observation_mask": obs[1], "turn_ids": turns[0], "turn_mask": turns[1],
        "turn_count": count, "query_ids": queries[0], "query_mask": queries[1], "text_ids": texts[0],
        "text_mask": texts[1], "rewards": rewards, "dones": dones,
        "outcome_mask": (k[None, :-1] >= start[:, None]) & (k[None, :-1] < count[:, None]),
        "latent_mask": (k[None] >= start[:, None]) & (k[None] <= count[:, None]),
    }


def test_rows_cached_per_trajectory_give_the_batch_built_from_scratch(hn_tokenizer, hn_trajectories):
    from world_model.data import trainable, trajectory_loader

    items = trainable(hn_trajectories)
    loader = trajectory_loader(hn_trajectories, hn_tokenizer, batch_size=5)
    for start, batch in zip(range(0, len(items), 5), loader, strict=True):
        expected = reference_batch(items[start : start + 5], hn_tokenizer)
        for name, value in expected.items():
            assert torch.equal(getattr(batch, name), value), name


def test_saved_weights_keep_the_per_member_layout_so_older_saves_load(tmp_path, hn_tokenizer, hn_trajectories):
    """The batched fit stacks the members' weights per call and keeps them per member, so the names in
    ``model.safetensors`` are those every earlier save used, and such a file loads strictly."""
    from safetensors.torch import load_file

    from world_model import WorldModel

    model = perturbed(tiny_model(hn_tokenizer, seed=8), seed=9)
    model.save_pretrained(tmp_path)
    names = set(load_file(tmp_path / "model.safetensors"))
    for k in range(model.config.num_members):
        for name in ("tokens.weight", "blocks.layers.0.self_attn.in_proj_weight", "out.weight", "to_slots.bias"):
            assert f"dynamics.decoders.{k}.{name}" in names
        for name in ("trunk.0.weight", "reward.weight", "done.bias"):
            assert f"dynamics.heads.{k}.{name}" in names
    assert not any(n.startswith("dynamics.") and ".decoders." not in n and ".heads." not in n for n in names)
    loaded = WorldModel.from_pretrained(tmp_path)
    batch = build_training_batch(hn_trajectories[:4], hn_tokenizer)
    with torch.no_grad():
        assert torch.equal(loaded.loss(batch)["loss"], model.eval().loss(batch)["loss"])
