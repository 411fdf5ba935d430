"""The LM world model: the seam, sampling (cached against a full recompute), disagreement, save / load."""

from __future__ import annotations

import math

import pytest
import torch

from envs.token_positions import position_ids_for
from imagination.dream_env import DreamEnv
from tests.world_model.lm.conftest import ENV, tiny_lm_world_model
from world_model import WorldModel, WorldModelConfig
from world_model.kv_sampling import sample_with_cache
from world_model.lm import LMState, LMWorldModel
from world_model.lm.mixture import mixture_logprobs
from world_model.lm.rows import left_pad, score_rows
from world_model.protocol import WorldModelLike, WorldStateLike, concat_states
from world_model.turn_tokens import TurnTokenizer
from world_model.uncertainty import mutual_information

FIRST = "find the hidden number in 1 .. 16 . call guess(k)"


def test_both_models_answer_the_world_model_seam():
    tk = TurnTokenizer.for_env(ENV, {})
    latent = WorldModel(WorldModelConfig.for_tokenizer(tk, latent_size=16, num_members=2), tk)
    for model in (latent, tiny_lm_world_model()):
        assert isinstance(model, WorldModelLike)
        state = model.initial_state([FIRST, FIRST])
        assert isinstance(state, WorldStateLike)
        joined = concat_states([state.select([1]), state.select([0, 0])])
        assert len(joined) == 3 and joined.observations == (FIRST,) * 3
        after, pred = model.step(joined, ["guess(8)"] * 3, generator=torch.Generator().manual_seed(0))
        assert len(after) == 3 and pred.reward.shape == pred.uncertainty.shape == (3,)


def test_history_keeps_the_first_observation_and_the_latest_turns():
    state = LMState.start(["first"])
    for i in range(4):
        state = state.advance([f"a{i}"], [f"o{i}"], window=2)
    assert state.first == ("first",) and state.turns == ((("a2", "o2"), ("a3", "o3")),)
    assert state.observations == ("o3",)
    assert LMState.start(["x"]).advance(["a"], ["o"], window=0).turns == ((),)


def test_the_prompt_is_the_chat_history_in_role_markers():
    model = tiny_lm_world_model(history_turns=1)
    tk = model.tokenizer
    state = model.observe(model.initial_state([FIRST]), ["guess(8)"], ["guess 8 : higher"])
    state = model.observe(state, ["guess(12)"], ["guess 12 : lower"])
    (prompt,) = model.codec.prompts(state.first, state.turns, ["guess(10)"])
    words = tk.tokenizer.convert_ids_to_tokens(prompt)
    first = tk.tokenizer.convert_ids_to_tokens(tk.observation_words([FIRST])[0])
    # the first observation, then only the latest turn (window 1), then the action and <res>
    assert words == ["<s>", "<obs>", *first, "<act>", "guess", "(", "12", ")", "<res>", "guess", "12", ":", "lower",
                     "<act>", "guess", "(", "10", ")", "<res>"]


def mixture_by_hand(member_logits: torch.Tensor, banned: list[int]) -> torch.Tensor:
    """``(K, V)`` -> ``(V,)``: each member's softmax over the allowed ids (exp over their sum, in float64),
    the plain mean over members, its log; banned ids -inf."""
    logits = member_logits.double()
    allowed = torch.ones(logits.shape[-1], dtype=torch.bool)
    allowed[banned] = False
    weights = torch.where(allowed, torch.exp(logits - logits.max()), torch.zeros(()))  # (K, V)
    mean = (weights / weights.sum(-1, keepdim=True)).sum(0) / logits.shape[0]  # (V,)
    return torch.where(allowed, torch.log(mean), torch.tensor(float("-inf"), dtype=torch.float64))


def test_the_mixture_is_the_log_of_the_members_mean_softmax_by_hand():
    # Three allowed ids and a banned one (id 3). Member 0: logits 0, ln 3, 0 -> 1/5, 3/5, 1/5; member 1:
    # 0, 0, ln 2 -> 1/4, 1/4, 1/2. Their mean: 0.225, 0.425, 0.35 (member 0 alone would give 0.2, 0.6,
    # 0.2; the normalised geometric mean 0.241, 0.418, 0.341). The banned id's logits are the largest.
    member_logits = torch.tensor([[0.0, math.log(3), 0.0, 5.0], [0.0, 0.0, math.log(2), 9.0]])  # (K=2, V=4)
    got = mixture_logprobs(member_logits, torch.tensor([3]))
    assert got[:3].tolist() == pytest.approx([math.log(0.225), math.log(0.425), math.log(0.35)], abs=1e-6)
    assert got[3] == float("-inf")
    # leading axes are rows: (K, B, V), members in either order, give each row's own mixture
    rows = torch.stack([member_logits, member_logits.flip(0)], dim=1)  # (K, B=2, V)
    assert mixture_logprobs(rows, torch.tensor([3]))[:, :3].exp().flatten().tolist() == pytest.approx(
        [0.225, 0.425, 0.35] * 2, abs=1e-6)
    # nothing banned: the full softmaxes, e.g. member 0 puts e^5 / (5 + e^5) on id 3, member 1 e^9 / (4 + e^9)
    free = mixture_logprobs(member_logits, None).exp()
    assert float(free[3]) == pytest.approx((math.exp(5) / (5 + math.exp(5)) + math.exp(9) / (4 + math.exp(9))) / 2)


def uncached_greedy(model: LMWorldModel, prompts: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
    """Reference: every member recomputes the whole prefix for every token, mixture (by hand) argmax."""
    banned = sorted(set(model.codec.banned_ids))
    texts, logps = [], []
    for prompt in prompts:
        row, scores = list(prompt), []
        for _ in range(model.codec.max_new_tokens):
            ids = torch.tensor([row])
            logits = torch.stack([model.members.model(k)(input_ids=ids).logits[0, -1]
                                  for k in range(model.members.num_members)])  # (K, V)
            logp = mixture_by_hand(logits, banned)  # (V,)
            token = int(logp.argmax())
            row.append(token)
            scores.append(float(logp[token]))
            if token == model.codec.eos_id:
                break
        texts.append(row[len(prompt):])
        logps.append(scores)
    return texts, logps


def four_rows(model: LMWorldModel) -> tuple[LMState, list[str]]:
    """Four histories of different lengths and their next actions, two of them malformed."""
    state = model.observe(model.initial_state([FIRST] * 4), ["guess(8)", "guess(3)", "oops", "guess(5)"],
                          ["guess 8 : higher", "guess 3 : lower", "invalid action", "guess 5 : lower"])
    return state, ["guess(12)", "oops", "guess(16)", "what"]


@torch.no_grad()
@pytest.mark.parametrize("fitted", [False, True])
def test_cached_batched_sampling_equals_a_full_recompute(fitted, request):
    """Unfitted, no row ends (every row writes the most words); fitted, rows end at different
    lengths, so finished rows leave the members' caches while the others go on."""
    model = request.getfixturevalue("fitted_model") if fitted else tiny_lm_world_model(members=2)
    state, actions = four_rows(model)
    prompts = model.codec.prompts(state.first, state.turns, actions)
    ids, mask = left_pad(prompts, model.codec.pad_id)  # rows of different lengths: left padding matters
    assert len({len(p) for p in prompts}) > 1
    got = sample_with_cache(model.mixture, ids, mask, max_tokens=model.codec.max_new_tokens,
                            eos=model.codec.eos_id, pad=model.codec.pad_id)
    want_ids, want_logps = uncached_greedy(model, prompts)
    ends = [len(row) for row in want_ids if row[-1] == model.codec.eos_id]
    assert len(set(ends)) > 1 if fitted else not ends
    for b in range(len(prompts)):
        n = int(got.lengths[b])
        assert got.token_ids[b, :n].tolist() == want_ids[b]
        assert got.logprobs[b, :n].tolist() == pytest.approx(want_logps[b], abs=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("greedy", [True, False])
def test_repeated_prompts_share_their_prefill_in_every_member_and_sample_as_unshared(fitted_model, greedy):
    """The mixture's cache copies each distinct prompt's rows out in every member: the same tokens as when
    every row is prefilled, on the same uniforms; greedy rows still match the full recompute."""
    state, actions = four_rows(fitted_model)
    distinct = fitted_model.codec.prompts(state.first, state.turns, actions)
    prompts = [distinct[0]] * 3 + [distinct[1], distinct[3], distinct[1], distinct[0], distinct[3]]
    ids, mask = left_pad(prompts, fitted_model.codec.pad_id)
    width = fitted_model.codec.max_new_tokens
    uniforms = None if greedy else torch.rand((len(prompts), width), generator=torch.Generator().manual_seed(2))
    calls = []
    handle = fitted_model.members.model(0).register_forward_hook(
        lambda module, args, kwargs, out: calls.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    runs = [sample_with_cache(fitted_model.mixture, ids, mask, max_tokens=width, eos=fitted_model.codec.eos_id,
                              pad=fitted_model.codec.pad_id, weights=None if greedy else (lambda lp: lp.exp()),
                              uniforms=uniforms, share_prefill=share) for share in (True, False)]
    handle.remove()
    assert calls[0] == 3 and len(prompts) in calls[1:]  # member 0's prompt pass: the 3 distinct prompts
    shared, unshared = runs
    assert torch.equal(shared.token_ids, unshared.token_ids) and torch.equal(shared.lengths, unshared.lengths)
    assert torch.allclose(shared.logprobs, unshared.logprobs, atol=1e-5, rtol=0)
    if greedy:
        want_ids, _ = uncached_greedy(fitted_model, prompts)
        assert [shared.token_ids[b, : int(shared.lengths[b])].tolist() for b in range(len(prompts))] == want_ids
        assert len(set(shared.lengths.tolist())) > 1


POOLINGS = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax}


@pytest.mark.parametrize("score", list(POOLINGS))
def test_step_uncertainty_and_disagreement_are_the_members_mutual_information(score):
    model = tiny_lm_world_model(members=3, disagreement=score)
    state = model.initial_state([FIRST, FIRST])
    actions = ["guess(8)", "guess(2)"]
    outcomes = ["guess 8 : higher", "invalid action : call guess ( k ) with k in 1 .. 16"]  # unequal lengths
    got = model.disagreement(state, actions, outcomes)
    prompts = model.codec.prompts(state.first, state.turns, actions)
    targets = model.codec.targets(outcomes)
    for b in range(2):
        row = torch.tensor([prompts[b] + targets[b]])
        with torch.no_grad():
            probs = torch.stack([torch.softmax(model.members.model(k)(input_ids=row).logits[0].float(), -1)
                                 for k in range(3)])  # (K, T, V)
        n = len(targets[b])
        want = POOLINGS[score](mutual_information(probs[:, -n - 1 : -1]))  # over the target tokens, </s> included
        # a difference of entropies of ~3 nats per token, summed over up to ~15 tokens
        assert float(got[b]) == pytest.approx(float(want), abs=5e-5)


def mutual_information_of_two_by_hand(p: list[float], q: list[float]) -> float:
    """Two members' mutual information: the mean KL of each from their mean (the Jensen-Shannon
    divergence), in nats."""
    mean = [(a + b) / 2 for a, b in zip(p, q, strict=True)]
    kl = lambda r: sum(x * math.log(x / m) for x, m in zip(r, mean, strict=True) if x > 0)  # noqa: E731
    return (kl(p) + kl(q)) / 2


def test_two_members_mutual_information_by_hand():
    # members sure of different ids: ln 2; members that agree, however unsure: 0
    assert mutual_information_of_two_by_hand([1.0, 0.0], [0.0, 1.0]) == pytest.approx(math.log(2))
    assert mutual_information_of_two_by_hand([0.5, 0.5], [0.5, 0.5]) == 0.0
    two = torch.tensor([[[1.0, 0.0]], [[0.5, 0.5]]])  # (K=2, 1, V=2)
    # H(0.75, 0.25) - (0 + ln 2) / 2
    want = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) - math.log(2) / 2
    assert float(mutual_information(two)[0]) == pytest.approx(want, abs=1e-6)
    assert mutual_information_of_two_by_hand([1.0, 0.0], [0.5, 0.5]) == pytest.approx(want)


@torch.no_grad()
@pytest.mark.parametrize("fitted", [False, True])
def test_step_uncertainty_is_the_members_disagreement_over_the_words_it_wrote(fitted, request):
    """``step``'s uncertainty (what halts imagination, penalises its rewards and sends counterfactual
    groups to their fallback) is, per row, the two members' mutual information summed over the tokens
    it wrote (``</s>`` included where the row ended): by hand from full forward passes, and as
    ``score_rows`` and ``disagreement`` score the same tokens."""
    model = request.getfixturevalue("fitted_model") if fitted else tiny_lm_world_model(members=2)
    state, actions = four_rows(model)
    prompts = model.codec.prompts(state.first, state.turns, actions)
    _, pred = model.step(state, actions, generator=torch.Generator(), greedy=True)
    written, _ = uncached_greedy(model, prompts)
    eos = model.codec.eos_id
    assert pred.ended.tolist() == [row[-1] == eos for row in written]
    assert any(pred.ended) == fitted
    scored = score_rows(model.members, model.heads, prompts, written, pad=model.codec.pad_id, device=model.device)
    again = model.disagreement(state, actions, pred.observations)
    for b, (prompt, words) in enumerate(zip(prompts, written, strict=True)):
        row = torch.tensor([prompt + words])
        probs = [torch.softmax(model.members.model(k)(input_ids=row).logits[0].double(), -1)[-len(words) - 1 : -1]
                 for k in range(2)]  # (n, V) per member: the distributions each written token was drawn from
        want = sum(mutual_information_of_two_by_hand(p.tolist(), q.tolist()) for p, q in zip(*probs, strict=True))
        assert want > 0
        assert float(pred.uncertainty[b]) == pytest.approx(want, rel=1e-4, abs=1e-6)
        assert float(pred.uncertainty[b]) == pytest.approx(float(scored.disagreement[b]), abs=1e-6)
        if pred.ended[b]:  # the observation's own tokens are the written ones
            assert float(pred.uncertainty[b]) == pytest.approx(float(again[b]), abs=1e-6)


def test_same_generator_state_same_sample_and_rows_do_not_depend_on_the_batch():
    model = tiny_lm_world_model()
    state = model.initial_state([FIRST] * 3)
    actions = ["guess(8)", "guess(3)", "guess(5)"]
    a = model.step(state, actions, generator=torch.Generator().manual_seed(7))[1]
    b = model.step(state, actions, generator=torch.Generator().manual_seed(7))[1]
    assert a.observations == b.observations and torch.equal(a.done, b.done) and torch.equal(a.reward, b.reward)
    c = model.step(state, actions, generator=torch.Generator().manual_seed(8))[1]
    assert c.observations != a.observations


def test_save_and_load_give_identical_samples(tmp_path):
    model = tiny_lm_world_model(members=2, seed=3)
    model.save_pretrained(tmp_path / "wm")
    assert {"config.json", "model.safetensors", "tokenizer"} <= {p.name for p in (tmp_path / "wm").iterdir()}
    assert not list((tmp_path / "wm").rglob("*.bin")) and not list((tmp_path / "wm").rglob("*.pt*"))
    loaded = LMWorldModel.from_pretrained(tmp_path / "wm")
    state = model.observe(model.initial_state([FIRST] * 2), ["guess(8)"] * 2, ["guess 8 : higher"] * 2)
    for greedy in (False, True):
        x = model.step(state, ["guess(12)", "guess(10)"], generator=torch.Generator().manual_seed(1), greedy=greedy)
        y = loaded.step(state, ["guess(12)", "guess(10)"], generator=torch.Generator().manual_seed(1), greedy=greedy)
        assert x[1].observations == y[1].observations and x[0] == y[0]
        assert torch.equal(x[1].reward, y[1].reward) and torch.equal(x[1].uncertainty, y[1].uncertainty)


def test_a_pickle_only_folder_is_refused_naming_the_file(tmp_path):
    model = tiny_lm_world_model()
    model.save_pretrained(tmp_path / "wm")
    (tmp_path / "wm" / "model.safetensors").rename(tmp_path / "wm" / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pytorch_model.bin, a pickle checkpoint"):
        LMWorldModel.from_pretrained(tmp_path / "wm")


def test_dream_env_runs_on_the_lm_world_model():
    model = tiny_lm_world_model()
    env = DreamEnv(model, ENV, seed=0, horizon=3)
    first = env.reset(5)
    assert first.startswith("find the hidden number")
    steps = 0
    while not env.done:
        result = env.step("guess(8)")
        steps += 1
        assert math.isfinite(result.reward) and "uncertainty" in result.info
    assert steps <= 3
    # a real history prefix is folded as text: the state carries it
    assert isinstance(env.world_state, LMState)


def test_position_ids_start_at_each_rows_first_token():
    ids, mask = left_pad([[5, 6, 7], [8]], pad=0)
    assert position_ids_for(mask).tolist() == [[0, 1, 2], [0, 0, 0]]


@pytest.mark.parametrize(("options", "key"), [
    ({"history_turns": -1}, "world_model.lm.history_turns"),
    ({"num_heads": 3}, "world_model.lm.num_heads"),
    ({"dtype": "float16"}, "world_model.lm.dtype"),
    ({"device": "tpu"}, "world_model.lm.device"),
    ({"lora_rank": 4}, "world_model.lm.lora_rank"),
])
def test_bad_lm_options_name_their_key(options, key):
    from world_model.lm import LMOptions

    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LMOptions(**options)


def test_the_world_model_group_names_a_wrong_model():
    from experiments.config import WorldModelOptions

    with pytest.raises(ValueError, match=r"world_model\.name"):
        WorldModelOptions(name="transformer")
    assert WorldModelOptions(name="lm", lm={"history_turns": 1}).lm.history_turns == 1
