"""WorldModel: latent mediation, sampling with a generator, folding samples back, save/load, config."""

import dataclasses
import inspect

import pytest
import torch

from world_model import (
    DecoderConfig,
    ObservationDecoder,
    TokenLimits,
    TurnTokenizer,
    WorldModel,
    WorldModelConfig,
    WorldState,
    build_training_batch,
)
from world_model.decoder_context import DecoderContext

from .conftest import tiny_model

FIRST = "find the hidden number in 1 .. 16 . call guess(k)"


@pytest.fixture(scope="module")
def model(hn_tokenizer) -> WorldModel:
    return tiny_model(hn_tokenizer).eval()


def step(model, states, actions, seed, greedy=False):
    return model.step(states, actions, generator=torch.Generator().manual_seed(seed), greedy=greedy)


def test_the_decoder_reads_only_a_latent_and_a_query(model):
    """Besides the latent and the query, only the copy path's rows of the observation acted in,
    which a decoder without ``copy_observation`` (the default) refuses."""
    assert list(inspect.signature(ObservationDecoder.forward).parameters) == ["self", "context", "text_ids"]
    assert [f.name for f in dataclasses.fields(DecoderContext)] == [
        "latent",
        "query_ids",
        "query_mask",
        "previous_ids",
        "previous_mask",
    ]
    decoder = model.dynamics.decoders[0]
    assert not decoder.config.copy_observation
    ids = torch.tensor([[model.tokenizer.act_id, 5]])
    with pytest.raises(ValueError, match="without copy_observation"):
        decoder(DecoderContext(torch.zeros(1, decoder.config.latent_size), ids, torch.ones_like(ids), ids, torch.ones_like(ids)), ids)


def test_states_with_one_latent_predict_alike_whatever_their_history(model):
    """Two different histories given the same latent: equal predictions. With their own latents
    they differ, so the test would see a step that read anything but the latent."""
    a = model.initial_state([FIRST])
    b = model.observe(model.initial_state([FIRST]), ["guess(3)"], ["guess 3 : higher"])
    assert not torch.allclose(a.latent, b.latent)
    b_with_a_latent = WorldState(a.latent.clone(), b.observations)
    actions = ["guess(9)"]
    state_a, pred_a = step(model, a, actions, seed=5)
    state_b, pred_b = step(model, b_with_a_latent, actions, seed=5)
    assert pred_a.observations == pred_b.observations
    assert torch.equal(state_a.latent, state_b.latent)
    for name in ("reward", "done_probability", "uncertainty", "reward_std"):
        assert torch.equal(getattr(pred_a, name), getattr(pred_b, name))
    _, pred_own = step(model, b, actions, seed=5)
    assert not torch.equal(pred_own.done_probability, pred_a.done_probability)
    decoder = model.dynamics.decoders[0]
    query = torch.tensor([[model.tokenizer.act_id, 5]])
    text = torch.tensor([[model.tokenizer.bos_id, 6, 7]])
    with torch.no_grad():
        same = [decoder(DecoderContext(s.latent, query, torch.ones_like(query)), text) for s in (a, b_with_a_latent)]
    assert torch.equal(same[0], same[1])


def test_a_fixed_generator_reproduces_a_step_and_other_seeds_differ(model):
    states = model.initial_state([FIRST] * 4)
    actions = ["guess(8)", "guess(2)", "guess(15)", "guess(8)"]
    first_state, first = step(model, states, actions, seed=11)
    again_state, again = step(model, states, actions, seed=11)
    assert first.observations == again.observations
    assert torch.equal(first.done, again.done) and torch.equal(first_state.latent, again_state.latent)
    others = {tuple(step(model, states, actions, seed=s)[1].observations) for s in range(12, 16)}
    assert others - {tuple(first.observations)}


def test_greedy_ignores_the_generator(model):
    states = model.initial_state([FIRST] * 2)
    generator = torch.Generator().manual_seed(3)
    before = generator.get_state()
    _, pred = model.step(states, ["guess(8)", "nonsense"], generator=generator, greedy=True)
    assert torch.equal(generator.get_state(), before)
    _, again = step(model, states, ["guess(8)", "nonsense"], seed=99, greedy=True)
    assert pred.observations == again.observations
    assert torch.equal(pred.done, pred.done_probability > 0.5)


def test_a_sampled_outcome_is_folded_in_like_a_real_turn(model):
    states = model.initial_state([FIRST] * 3)
    actions = ["guess(8)", "guess(1)", "guess(16)"]
    imagined, pred = step(model, states, actions, seed=2)
    real = model.observe(states, actions, pred.observations)
    assert torch.allclose(imagined.latent, real.latent, atol=1e-6)
    assert imagined.observations == tuple(pred.observations)
    second, _ = step(model, imagined, actions, seed=4)  # a long imagined episode keeps going
    assert second.latent.shape == states.latent.shape


def test_prediction_shapes_and_ranges(model):
    states = model.initial_state([FIRST] * 3)
    _, pred = step(model, states, ["guess(8)"] * 3, seed=0)
    assert len(pred.observations) == 3
    for name in ("reward", "done_probability", "done", "uncertainty", "reward_std", "done_std", "ended"):
        assert getattr(pred, name).shape == (3,), name
    assert pred.done.dtype == torch.bool and pred.ended.dtype == torch.bool
    assert bool((pred.uncertainty >= 0).all()) and bool((pred.done_probability <= 1).all())
    assert all(
        len(model.tokenizer.observation_words([o])[0]) <= model.config.max_observation_words
        for o in pred.observations
    )
    assert len(states.select([2, 0, 0])) == 3
    with pytest.raises(ValueError, match="2 actions for 3 states"):
        step(model, states, ["guess(1)"] * 2, seed=0)


def test_loss_parts_are_summed_over_members(hn_tokenizer, hn_trajectories):
    batch = build_training_batch(hn_trajectories[:4], hn_tokenizer)
    single = [tiny_model(hn_tokenizer, num_members=1, seed=s) for s in (0, 1)]
    pair = tiny_model(hn_tokenizer, num_members=2, seed=0)
    pair.encoder.load_state_dict(single[0].encoder.state_dict())
    for k, m in enumerate(single):
        m.encoder.load_state_dict(single[0].encoder.state_dict())
        pair.dynamics.decoders[k].load_state_dict(m.dynamics.decoders[0].state_dict())
        pair.dynamics.heads[k].load_state_dict(m.dynamics.heads[0].state_dict())
    with torch.no_grad():
        parts = pair.loss(batch)
        alone = [m.loss(batch) for m in single]
    assert set(parts) == {"loss", "observation_nll", "reconstruction_nll", "reward_mse", "done_bce"}
    for name, value in parts.items():
        assert torch.allclose(value, alone[0][name] + alone[1][name], atol=1e-5), name


def test_save_and_load_give_identical_outputs(tmp_path, hn_tokenizer, hn_trajectories):
    model = tiny_model(hn_tokenizer, seed=7)
    with torch.no_grad():  # move the weights off their initial values, so loading has to restore them
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    model.save_pretrained(tmp_path)
    assert {"model.safetensors", "config.json", "tokenizer"} <= {p.name for p in tmp_path.iterdir()}
    loaded = WorldModel.from_pretrained(tmp_path)
    assert loaded.config == model.config
    batch = build_training_batch(hn_trajectories[:3], hn_tokenizer)
    with torch.no_grad():
        assert torch.equal(loaded.loss(batch)["loss"], model.eval().loss(batch)["loss"])
    states = [m.initial_state([FIRST] * 2) for m in (model, loaded)]
    out = [
        step(m, s, ["guess(4)", "guess(12)"], seed=1) for m, s in zip((model, loaded), states, strict=True)
    ]
    assert out[0][1].observations == out[1][1].observations
    assert torch.equal(out[0][0].latent, out[1][0].latent)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="safetensors"):
        WorldModel.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"num_members": 0}, "WorldModelConfig.num_members"),
        ({"reward_weight": -1.0}, "WorldModelConfig.reward_weight"),
        ({"decoder": {"num_heads": 3}}, "DecoderConfig.model_size"),
        ({"decoder": {"latent_slots": 0}}, "DecoderConfig.latent_slots"),
        ({"encoder": {"kernel_size": 2}}, "EncoderConfig.kernel_size"),
    ],
)
def test_bad_config_fields_are_named(hn_tokenizer, options, field):
    with pytest.raises(ValueError, match=field):
        WorldModelConfig.for_tokenizer(hn_tokenizer, **options)


def test_inconsistent_configs_and_tokenizers_are_named(hn_tokenizer):
    config = WorldModelConfig.for_tokenizer(hn_tokenizer, latent_size=16)
    with pytest.raises(ValueError, match="decoder.latent_size"):
        WorldModelConfig(
            encoder=config.encoder,
            decoder=DecoderConfig(**{**vars(config.decoder), "latent_size": 8}),
            max_observation_words=config.max_observation_words,
            max_action_words=config.max_action_words,
        )
    with pytest.raises(ValueError, match="max_text_tokens"):
        WorldModelConfig(
            encoder=config.encoder,
            decoder=DecoderConfig(
                **{**vars(config.decoder), "max_text_tokens": config.decoder.max_text_tokens - 1}
            ),
            max_observation_words=config.max_observation_words,
            max_action_words=config.max_action_words,
        )
    other = TurnTokenizer.build(["guess", "higher"], hn_tokenizer.limits)
    with pytest.raises(ValueError, match="vocab_size"):
        WorldModel(config, other)
    wider = TurnTokenizer(
        hn_tokenizer.tokenizer, TokenLimits(observation=hn_tokenizer.limits.observation, action=2)
    )
    with pytest.raises(ValueError, match="caps"):
        WorldModel(config, wider)
    with pytest.raises(ValueError, match="TurnTokenizer"):
        WorldModel(config)
    assert (
        WorldModelConfig(**{**vars(config), "encoder": vars(config.encoder)}) == config
    )  # read back from json
