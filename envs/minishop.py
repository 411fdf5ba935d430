"""Minishop: a WebShop-style shop in which an agent searches, opens an item, picks options and buys.

Actions (case-insensitive, any spacing, e.g. ``click [ buy now ]``):
``search[query]`` on the search page; on a results page ``click[item <id>]`` or
``click[back to search]``; on an item page ``click[<colour>]``, ``click[<size>]``,
``click[buy now]`` or ``click[back to search]``. Opening an item clears earlier option clicks;
clicking a second colour (or size) replaces the first.

Reward (only on ``click[buy now]``, which ends the episode; every other turn gives 0)::

    reward = ( [product.category == wanted category]
             + [product.material == wanted material]
             + [clicked colour == wanted colour]
             + [clicked size   == wanted size]
             + [product.price  <  wanted price cap] ) / 5

An option never clicked counts as not matching. Success means reward == 1.0. An episode that
reaches ``max_turns`` without a purchase ends with reward 0 and no success.
"""

from __future__ import annotations

import random
import re

from envs import minishop_pages as pages
from envs.base import EnvSnapshot, StepResult, ensure_not_done, ensure_started, snapshot_state
from envs.capabilities import Capabilities
from envs.checks import check_int
from envs.minishop_catalogue import (
    CATEGORIES,
    COLOURS,
    MATERIALS,
    MAX_PRICE,
    MAX_PRODUCTS,
    MIN_PRODUCTS,
    SIZES,
    STYLES,
    Instruction,
    Product,
    draw_episode,
    search,
)
from envs.tokenizer import words_of

_ACTION = re.compile(r"(search|click)\s*\[([^\[\]]*)\]")
_WORD = re.compile(r"[a-z0-9]")


def parse_action(text: str) -> tuple[str, str] | None:
    """``(verb, argument)`` with the argument's whitespace collapsed, or None if malformed."""
    match = _ACTION.fullmatch(text.strip().lower())
    if match is None:
        return None
    verb, argument = match.group(1), " ".join(match.group(2).split())
    return (verb, argument) if _WORD.search(argument) else None


def purchase_matches(product: Product, colour: str | None, size: str | None, instruction: Instruction) -> int:
    """How many of the five wanted terms a purchase meets (see the module docstring)."""
    return sum((
        product.category == instruction.category,
        product.material == instruction.material,
        colour == instruction.colour,
        size == instruction.size,
        product.price < instruction.cap,
    ))


def purchase_reward(product: Product, colour: str | None, size: str | None, instruction: Instruction) -> float:
    """The purchase score in [0, 1]; exactly 1.0 for a perfect purchase."""
    return purchase_matches(product, colour, size, instruction) / pages.NUM_WANTED


def _check_int(option: str, value: object, low: int, high: int) -> int:
    return check_int(f"minishop: {option}", value, low, high)


class MiniShop:
    """The minishop environment (see the module docstring for actions and reward).

    Options: ``num_products`` (catalogue size, 50..200, default 100), ``max_turns`` (default 10),
    ``results_per_page`` (items a search lists, 1..10, default 5).
    """

    name = "minishop"
    capabilities = Capabilities(expert=True, task_key=True, max_turns_option=True, snapshots=True)

    def __init__(self, *, num_products: int = 100, max_turns: int = 10, results_per_page: int = 5) -> None:
        self.num_products = _check_int("num_products", num_products, MIN_PRODUCTS, MAX_PRODUCTS)
        self.max_turns = _check_int("max_turns", max_turns, 1, 1000)
        self.results_per_page = _check_int("results_per_page", results_per_page, 1, 10)
        self.catalogue: list[Product] = []
        self.instruction: Instruction | None = None
        self.turn = 0
        self.done = True  # no episode until reset

    # --- episode -------------------------------------------------------------------------------
    def reset(self, seed: int) -> str:
        rng = random.Random(seed)
        self.catalogue, self.instruction = draw_episode(rng, self.num_products, self.results_per_page)
        self._by_id = {p.id: p for p in self.catalogue}
        self.turn, self.done = 0, False
        self._go_to_search()
        return self._page_text

    def step(self, action: str) -> StepResult:
        ensure_not_done(self.done, self.name)
        self.turn += 1
        parsed = parse_action(action)
        reward, bought, valid = 0.0, False, False
        if parsed is None:
            observation = pages.malformed(self._page_text)
        elif not self._available(*parsed):
            observation = pages.unavailable(self._page_text)
        else:
            reward, bought = self._apply(*parsed)
            observation, valid = self._page_text, True
        self.done = bought or self.turn >= self.max_turns
        if self.done and not bought:
            observation += pages.OUT_OF_TURNS
        info = {"valid": valid, "success": bought and reward == 1.0, "turn": self.turn, "page": self._page}
        return StepResult(observation, reward, self.done, info)

    # --- page state ----------------------------------------------------------------------------
    def _go_to_search(self) -> None:
        self._page, self._results, self._product = "search", [], None
        self._colour = self._size = None
        self._page_text = pages.search_page(self.instruction)

    def _click_targets(self) -> list[str]:
        """The click arguments the current page offers."""
        if self._page == "results":
            return [pages.item_target(p) for p in self._results] + [pages.BACK]
        if self._page == "item":
            return list(self._product.colours + self._product.sizes) + [pages.BUY, pages.BACK]
        return []

    def _available(self, verb: str, argument: str) -> bool:
        if verb == "search":
            return self._page == "search"
        return argument in self._click_targets()

    def _apply(self, verb: str, argument: str) -> tuple[float, bool]:
        """Carry out an available action; return (reward, bought)."""
        if verb == "search":
            self._results = search(self.catalogue, argument, self.results_per_page)
            self._page, self._page_text = "results", pages.results_page(self.instruction, self._results)
        elif argument == pages.BACK:
            self._go_to_search()
        elif argument == pages.BUY:
            matched = purchase_matches(self._product, self._colour, self._size, self.instruction)
            self._page, self._page_text = "bought", pages.receipt_page(self._product, matched)
            return matched / pages.NUM_WANTED, True
        elif argument.startswith("item "):
            self._product = self._by_id[int(argument.split()[1])]
            self._colour = self._size = None
            self._page, self._page_text = "item", pages.item_page(self.instruction, self._product)
        elif argument in COLOURS:
            self._colour = argument  # the page is unchanged: the click is not echoed
        else:
            self._size = argument
        return 0.0, False

    # --- agents --------------------------------------------------------------------------------
    def expert_action(self) -> str:
        """Search the instruction's key words, open a satisfying item, click the wanted options, buy."""
        wanted = self.instruction
        if self._page == "search":
            return f"search[{' '.join(wanted.key_words)}]"
        if self._page == "results":
            fits = [p for p in self._results if wanted.satisfied_by(p)]
            return pages.click(pages.item_target(fits[0])) if fits else pages.click(pages.BACK)
        if self._page == "item" and not wanted.satisfied_by(self._product):
            return pages.click(pages.BACK)
        if self._colour != wanted.colour:
            return pages.click(wanted.colour)
        if self._size != wanted.size:
            return pages.click(wanted.size)
        return pages.click(pages.BUY)

    def random_action(self, rng: random.Random) -> str:
        """Uniform over the page's actions; on the search page, 1-3 random key words of the instruction."""
        if self._page == "search":
            return f"search[{' '.join(rng.sample(self.instruction.key_words, rng.randint(1, 3)))}]"
        targets = self._click_targets() or [pages.BUY]
        return pages.click(rng.choice(targets))

    def anchor_observation(self) -> str:
        return self._page_text

    # --- snapshots and tasks -------------------------------------------------------------------
    _PAGE_STATE = ("_page", "_results", "_product", "_colour", "_size", "_page_text")

    def _options(self) -> dict:
        return {"num_products": self.num_products, "max_turns": self.max_turns, "results_per_page": self.results_per_page}

    def snapshot(self) -> EnvSnapshot:
        """The catalogue, the instruction, turn, done flag, and the page with its clicked options."""
        ensure_started(self.instruction is not None, self.name, "snapshot")
        state = {"catalogue": self.catalogue, "instruction": self.instruction, "turn": self.turn, "done": self.done}
        state.update({attr: getattr(self, attr) for attr in self._PAGE_STATE})
        return EnvSnapshot.take(self.name, self._options(), state)

    def restore(self, snapshot: EnvSnapshot) -> None:
        state = snapshot_state(snapshot, self.name, self._options())
        self.catalogue, self.instruction = state["catalogue"], state["instruction"]
        self._by_id = {p.id: p for p in self.catalogue}
        self.turn, self.done = state["turn"], state["done"]
        for attr in self._PAGE_STATE:
            setattr(self, attr, state[attr])

    def task_key(self) -> str:
        """The instruction and the whole catalogue (every product's every field): together they
        fix what a perfect purchase is and every page the agent can reach."""
        ensure_started(self.instruction is not None, self.name, "task_key")
        return "\n".join([repr(self.instruction), *map(repr, self.catalogue)])

    def vocabulary(self) -> list[str]:
        sample = Product(1, CATEGORIES[0], MATERIALS[0], STYLES[0], 10, COLOURS[:2], SIZES[:2])
        wanted = Instruction(CATEGORIES[0], MATERIALS[0], COLOURS[0], SIZES[0], 20)
        numbers = [str(n) for n in range(max(self.num_products, MAX_PRICE) + 1)]
        lists = [*CATEGORIES, *COLOURS, *SIZES, *MATERIALS, *STYLES, *numbers]
        return sorted(words_of(pages.sample_texts(wanted, sample) + lists))
