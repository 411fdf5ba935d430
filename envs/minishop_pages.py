"""Minishop's pages as compact text: search, results, item, and the purchase receipt.

Every page starts with the instruction and ends with the exact actions available on it. The item
page never mentions which options were already clicked: an agent has to remember its own clicks.
"""

from __future__ import annotations

from envs.minishop_catalogue import Instruction, Product

FORMAT_HELP = (
    "valid actions are search[ words ] on the search page and click[ choice ] on other pages , "
    "for example click[item 3] , click[red] , click[buy now] , click[back to search] ."
)
BACK, BUY = "back to search", "buy now"
OUT_OF_TURNS = "\nout of turns . episode over ."
NUM_WANTED = 5  # category, material, colour, size, price: the terms of the purchase score


def click(target: str) -> str:
    return f"click[{target}]"


def item_target(product: Product) -> str:
    return f"item {product.id}"


def search_actions() -> list[str]:
    return ["search[your query]"]


def results_actions(results: list[Product]) -> list[str]:
    return [click(item_target(p)) for p in results] + [click(BACK)]


def item_actions(product: Product) -> list[str]:
    return [click(v) for v in product.colours + product.sizes] + [click(BUY), click(BACK)]


def _page(instruction: Instruction, header: str, body: list[str], actions: list[str]) -> str:
    lines = [f"instruction : {instruction.text}", f"page : {header}", *body, "actions : " + " ".join(actions)]
    return "\n".join(lines)


def search_page(instruction: Instruction) -> str:
    return _page(instruction, "search", [], search_actions())


def results_page(instruction: Instruction, results: list[Product]) -> str:
    body = [f"{item_target(p)} : {p.title} , $ {p.price}" for p in results] or ["no items match your query ."]
    return _page(instruction, "results", body, results_actions(results))


def item_page(instruction: Instruction, product: Product) -> str:
    body = [
        f"title : {product.title}",
        f"price : $ {product.price}",
        "colour : " + " , ".join(product.colours),
        "size : " + " , ".join(product.sizes),
    ]
    return _page(instruction, item_target(product), body, item_actions(product))


def receipt_page(product: Product, matched: int) -> str:
    return f"you bought {item_target(product)} : {product.title} . it matched {matched} of {NUM_WANTED} wanted attributes ."


def malformed(page: str) -> str:
    """The answer to an action that does not parse: the format, then the unchanged page."""
    return f"invalid action . {FORMAT_HELP}\n{page}"


def unavailable(page: str) -> str:
    """The answer to a well-formed action the page does not offer: the page and its actions."""
    return f"that action is not available on this page . use one of the actions listed below .\n{page}"


def sample_texts(instruction: Instruction, product: Product) -> list[str]:
    """One rendering of every template, so a vocabulary can collect their fixed words."""
    page = item_page(instruction, product)
    return [
        search_page(instruction), results_page(instruction, []), results_page(instruction, [product]), page,
        receipt_page(product, 0), malformed(page), unavailable(page), OUT_OF_TURNS,
    ]
