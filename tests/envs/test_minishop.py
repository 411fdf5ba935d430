"""Minishop: reward by hand, search ranking, page transitions, memory of clicks, expert, fuzzing."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.base import Env, EpisodeDoneError
from envs.minishop import MiniShop, parse_action, purchase_reward
from envs.minishop_catalogue import Instruction, Product, search
from envs.tokenizer import split_words

SHIRT = Instruction(category="shirt", material="cotton", colour="red", size="m", cap=40)


def product(pid: int, category="shirt", material="cotton", style="classic", price=30,
            colours=("red", "blue"), sizes=("s", "m")) -> Product:
    return Product(pid, category, material, style, price, tuple(colours), tuple(sizes))


def listed_actions(page: str) -> list[str]:
    """The actions a page advertises, read back from its last line."""
    last = page.split("\n")[-1]
    assert last.startswith("actions : ")
    return re.findall(r"\w+\[[^\]]*\]", last)


def satisfying(env: MiniShop) -> Product:
    return next(p for p in env.catalogue if env.instruction.satisfied_by(p))


def open_item(env: MiniShop, item: Product) -> str:
    """Search the item's own title (it scores highest on it if unique) and open it."""
    results = env.step(f"search[{item.title} {' '.join(item.colours + item.sizes)}]").observation
    assert f"click[item {item.id}]" in listed_actions(results)
    return env.step(f"click[item {item.id}]").observation


# --- reward --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "item, colour, size, expected",
    [
        (product(1), "red", "m", 1.0),  # all five terms
        (product(1), "blue", "m", 0.8),  # wrong colour clicked
        (product(1), None, None, 0.6),  # options never clicked count as misses
        (product(1, price=40), "red", "m", 0.8),  # price == cap is not "under" the cap
        (product(1, price=39), "red", "m", 1.0),
        (product(1, category="hat", material="wool", price=55), "red", "m", 0.4),
        (product(1, category="hat", material="wool", price=55), "blue", "s", 0.0),
        (product(1, material="silk"), "red", None, 0.6),
    ],
)
def test_purchase_reward_by_hand(item, colour, size, expected):
    assert purchase_reward(item, colour, size, SHIRT) == pytest.approx(expected)


def test_perfect_purchase_is_exactly_one():
    assert purchase_reward(product(1), "red", "m", SHIRT) == 1.0


def test_instruction_text_and_satisfaction():
    assert SHIRT.text == "i want a red cotton shirt in size m , price under 40 dollars"
    assert SHIRT.satisfied_by(product(1))
    assert not SHIRT.satisfied_by(product(1, colours=("blue", "green")))
    assert not SHIRT.satisfied_by(product(1, sizes=("s", "l")))
    assert not SHIRT.satisfied_by(product(1, price=40))


# --- search ranking ------------------------------------------------------------------------------
def test_search_ranks_by_word_overlap_with_id_tie_break():
    catalogue = [
        product(1, category="hat", material="wool", colours=("red", "grey")),  # red: 1
        product(2, material="silk", colours=("blue", "pink")),  # shirt: 1
        product(3, colours=("green", "blue")),  # cotton, shirt: 2
        product(4, colours=("red", "black")),  # red, cotton, shirt: 3
        product(5, category="bag", material="nylon", style="sport", colours=("white", "brown"), sizes=("l", "xl")),  # 0
        product(6, material="linen", colours=("red", "green")),  # red, shirt: 2
    ]
    ranked = [p.id for p in search(catalogue, "Red  COTTON shirt", k=10)]
    assert ranked == [4, 3, 6, 1, 2]  # 3 beats 6 on the tie by lower id; 5 scores 0 and is dropped
    assert [p.id for p in search(catalogue, "red cotton shirt", k=2)] == [4, 3]
    assert [p.id for p in search(catalogue, "red red red", k=10)] == [1, 4, 6]  # distinct words count once
    assert search(catalogue, "dress", k=10) == []


def test_search_matches_options_and_style_words():
    catalogue = [product(1, style="vintage", sizes=("xs", "s")), product(2, sizes=("m", "xl"))]
    assert [p.id for p in search(catalogue, "vintage", k=5)] == [1]
    assert [p.id for p in search(catalogue, "xl", k=5)] == [2]


# --- pages and transitions -----------------------------------------------------------------------
def test_page_transitions():
    env = MiniShop()
    first = env.reset(seed=7)
    assert first.startswith(f"instruction : {env.instruction.text}\npage : search")
    assert listed_actions(first) == ["search[your query]"]

    result = env.step(f"search[{' '.join(env.instruction.key_words)}]")
    assert result.info == {"valid": True, "success": False, "turn": 1, "page": "results"}
    shown = search(env.catalogue, " ".join(env.instruction.key_words), env.results_per_page)
    assert listed_actions(result.observation) == [f"click[item {p.id}]" for p in shown] + ["click[back to search]"]
    for p in shown:
        assert f"item {p.id} : {p.title} , $ {p.price}" in result.observation

    item = shown[0]
    page = env.step(f"click[item {item.id}]").observation
    assert f"page : item {item.id}\ntitle : {item.title}\nprice : $ {item.price}" in page
    assert f"colour : {' , '.join(item.colours)}\nsize : {' , '.join(item.sizes)}" in page
    assert listed_actions(page) == [f"click[{v}]" for v in item.colours + item.sizes] + [
        "click[buy now]", "click[back to search]"]

    back = env.step("click[back to search]")
    assert back.observation == first and back.info["page"] == "search" and not back.done


def test_empty_results_page_offers_only_back():
    env = MiniShop()
    env.reset(seed=1)
    result = env.step("search[nothing here matches]")
    assert result.info["valid"] and "no items match your query ." in result.observation
    assert listed_actions(result.observation) == ["click[back to search]"]


def test_unavailable_actions_are_invalid_and_list_the_available_ones():
    env = MiniShop(max_turns=20)
    page = env.reset(seed=2)
    for action in ["click[buy now]", "click[item 1]", "click[red]"]:  # nothing to click on the search page
        result = env.step(action)
        assert not result.info["valid"] and result.reward == 0.0
        assert result.observation == "that action is not available on this page . use one of the actions listed below .\n" + page
    results = env.step("search[shirt]").observation
    hidden = next(p.id for p in env.catalogue if f"item {p.id} :" not in results)
    for action in ["search[hat]", f"click[item {hidden}]", "click[buy now]"]:
        result = env.step(action)
        assert not result.info["valid"] and result.observation.endswith(results)
        assert env.anchor_observation() == results  # the page is unchanged
    assert env.turn == 7


def test_malformed_action_states_the_format():
    env = MiniShop()
    page = env.reset(seed=3)
    for turn, action in enumerate(["buy", "search[]", "search[ , ]", "click[red", "search[a] now", "clack[x]"], 1):
        result = env.step(action)
        assert result.info == {"valid": False, "success": False, "turn": turn, "page": "search"}
        assert result.observation.startswith("invalid action . valid actions are search[ words ]")
        assert result.observation.endswith("\n" + page)


def test_spaced_and_cased_actions_parse():
    assert parse_action("click [ buy now ]") == ("click", "buy now")
    assert parse_action("  CLICK[Item   3]\n") == ("click", "item 3")
    assert parse_action("search [ Red\tCotton ]") == ("search", "red cotton")
    assert parse_action("click[buy now] please") is None
    assert parse_action("click[[buy now]]") is None
    env = MiniShop()
    env.reset(seed=4)
    item = satisfying(env)
    open_item(env, item)
    assert env.step(f"click [ {env.instruction.colour.upper()} ]").info["valid"]
    assert env.step(f" Click [ {env.instruction.size} ] ").info["valid"]
    result = env.step("click [ buy now ]")
    assert result.done and result.reward == 1.0 and result.info["success"]


# --- memory of clicks ----------------------------------------------------------------------------
def test_clicked_options_are_not_shown_but_count_at_purchase():
    env = MiniShop()
    env.reset(seed=5)
    item, wanted = satisfying(env), env.instruction
    page = open_item(env, item)
    after_colour = env.step(f"click[{wanted.colour}]")
    after_size = env.step(f"click[{wanted.size}]")
    assert after_colour.observation == page == after_size.observation == env.anchor_observation()
    assert after_colour.info["valid"] and after_size.info["valid"]
    bought = env.step("click[buy now]")
    assert bought.reward == 1.0 and bought.done and bought.info["success"]
    assert bought.observation == f"you bought item {item.id} : {item.title} . it matched 5 of 5 wanted attributes ."


def test_later_click_replaces_earlier_and_reopening_clears_options():
    env = MiniShop()
    env.reset(seed=6)
    item, wanted = satisfying(env), env.instruction
    other_colour = next(c for c in item.colours if c != wanted.colour)
    open_item(env, item)
    env.step(f"click[{wanted.colour}]")
    env.step(f"click[{wanted.size}]")
    env.step(f"click[{other_colour}]")  # replaces the right colour
    assert env.step("click[buy now]").reward == pytest.approx(0.8)

    env.reset(seed=6)
    open_item(env, item)
    env.step(f"click[{wanted.colour}]")
    env.step(f"click[{wanted.size}]")
    env.step("click[back to search]")
    open_item(env, item)  # a fresh visit: earlier clicks are gone
    result = env.step("click[buy now]")
    assert result.reward == pytest.approx(0.6) and not result.info["success"]


# --- episode bookkeeping -------------------------------------------------------------------------
def test_out_of_turns_ends_with_zero_reward():
    env = MiniShop(max_turns=3)
    env.reset(seed=8)
    results = [env.step(a) for a in ["search[shirt]", "click[back to search]", "search[hat]"]]
    assert [r.done for r in results] == [False, False, True]
    assert results[-1].reward == 0.0 and results[-1].info["success"] is False
    assert results[-1].observation.endswith("\nout of turns . episode over .")


def test_stepping_after_done_raises():
    env = MiniShop()
    env.reset(seed=9)
    while not env.step(env.expert_action()).done:
        pass
    with pytest.raises(EpisodeDoneError):
        env.step("click[buy now]")
    with pytest.raises(EpisodeDoneError):
        MiniShop().step("search[shirt]")  # no episode before reset


def test_expert_success_rate():
    env = MiniShop()
    successes, turns = 0, []
    for seed in range(200):
        env.reset(seed)
        result = None
        while result is None or not result.done:
            result = env.step(env.expert_action())
            assert result.info["valid"]
        successes += result.info["success"]
        turns.append(env.turn)
    assert successes / 200 >= 0.9
    assert max(turns) <= 5  # search, click item, colour, size, buy


def test_expert_recovers_after_random_detours():
    env = MiniShop(max_turns=30)
    rng = random.Random(0)
    recovered = 0
    for seed in range(30):
        env.reset(seed)
        for _ in range(rng.randint(1, 6)):
            if env.step(env.random_action(rng)).done:
                break  # a random click on buy now ended the episode
        if env.done:
            continue
        while not env.done:
            result = env.step(env.expert_action())
        assert result.info["success"]  # back, search, item, colour, size, buy: well within 30 turns
        recovered += 1
    assert recovered >= 20


def test_random_actions_are_valid_and_available():
    env = MiniShop()
    rng = random.Random(1)
    for seed in range(40):
        env.reset(seed)
        while not env.done:
            page = env.anchor_observation()
            action = env.random_action(rng)
            if action.startswith("search["):
                words = action[len("search["):-1].split()
                assert 1 <= len(words) <= 3 and set(words) <= set(env.instruction.key_words)
            else:
                assert action in listed_actions(page)
            assert env.step(action).info["valid"]


def test_seeding_reproduces_episodes():
    a, b = MiniShop(), MiniShop()
    assert a.reset(11) == b.reset(11) and a.catalogue == b.catalogue
    rng_a, rng_b = random.Random(3), random.Random(3)
    for _ in range(10):
        if a.done:
            break
        ra, rb = a.step(a.random_action(rng_a)), b.step(b.random_action(rng_b))
        assert ra == rb
    assert len({MiniShop().reset(s) for s in range(20)}) > 15


def test_every_instruction_is_satisfiable_and_options_are_choices():
    env = MiniShop(num_products=50, results_per_page=2)
    for seed in range(100):
        env.reset(seed)
        assert len(env.catalogue) == 50 and [p.id for p in env.catalogue] == list(range(1, 51))
        assert any(env.instruction.satisfied_by(p) for p in env.catalogue)
        assert all(len(p.colours) >= 2 and len(p.sizes) >= 2 for p in env.catalogue)


@pytest.mark.parametrize(
    "kwargs, option",
    [({"num_products": 49}, "num_products"), ({"num_products": 201}, "num_products"),
     ({"max_turns": 0}, "max_turns"), ({"max_turns": 2.5}, "max_turns"),
     ({"results_per_page": 0}, "results_per_page"), ({"num_products": True}, "num_products")],
)
def test_constructor_validates_options(kwargs, option):
    with pytest.raises(ValueError, match=option):
        MiniShop(**kwargs)


def test_follows_env_protocol():
    env = MiniShop()
    assert isinstance(env, Env) and env.name == "minishop" and env.max_turns == 10


# --- fuzzing and vocabulary ----------------------------------------------------------------------
def _spaced(data, action: str) -> str:
    """The action as the word tokenizer would decode it, or with random spacing and case."""
    pieces = split_words(action)
    text = pieces[0]
    for before, piece in zip(pieces, pieces[1:], strict=False):
        glue = data.draw(st.sampled_from(["", " ", "  ", "\t"]))
        text += (glue or " ") + piece if before[-1].isalnum() and piece[0].isalnum() else glue + piece
    text = text if data.draw(st.booleans()) else " ".join(pieces)
    return text.upper() if data.draw(st.booleans()) else text


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_fuzzed_actions_never_raise_and_count_turns(seed, data):
    env = MiniShop(max_turns=6)
    env.reset(seed)
    rng = random.Random(seed)
    while not env.done:
        page, turn = env.anchor_observation(), env.turn
        kind = data.draw(st.sampled_from(["text", "spaced", "listed"]))
        if kind == "text":
            action = data.draw(st.text(max_size=30))
        elif kind == "spaced":
            action = _spaced(data, env.random_action(rng))
        else:  # any advertised action, e.g. the literal search[your query]
            action = data.draw(st.sampled_from(listed_actions(page)))
        result = env.step(action)
        assert env.turn == turn + 1 == result.info["turn"]
        assert isinstance(result.info["valid"], bool) and isinstance(result.info["success"], bool)
        if kind == "text" and "[" not in action:
            assert not result.info["valid"]
        if kind != "text":
            assert result.info["valid"], action
        if not result.info["valid"]:
            assert result.reward == 0.0 and env.anchor_observation() == page
            assert result.observation.split("\n", 1)[1].startswith(page)
        assert result.done == (env.turn >= 6 or result.info["page"] == "bought")
        assert 0.0 <= result.reward <= 1.0
    with pytest.raises(EpisodeDoneError):
        env.step(data.draw(st.text(max_size=10)))


def test_vocabulary_covers_every_rendered_piece():
    env = MiniShop(num_products=200, max_turns=12)
    vocab = set(env.vocabulary())
    assert 150 <= len(vocab) <= 400 and len(vocab) == len(env.vocabulary())
    rng = random.Random(0)
    errors = ["nonsense", "click[nothing]"]
    for seed in range(80):
        texts = [env.reset(seed)]
        while not env.done:
            roll = rng.random()
            action = env.expert_action() if roll < 0.3 else rng.choice(errors) if roll < 0.4 else env.random_action(rng)
            result = env.step(action)
            texts += [result.observation, env.anchor_observation()]
            if result.info["valid"]:
                texts.append(action)
        for text in texts:
            missing = set(split_words(text)) - vocab
            assert not missing, (missing, text)
    assert {"shirt", "red", "cotton", "xl", "200", "130", "$", "[", "\n"} <= vocab
