"""Minishop's synthetic catalogue, its instructions, and its keyword search.

A product has fixed attributes (category, material, a style word, an integer price) and two
selectable options, as in WebShop: the colours and the sizes it comes in. Its title is
``"<style> <material> <category>"``. An instruction asks for a category, a material, a colour, a
size and a price cap; it is drawn from a real product, so at least one product satisfies it.

Everything here is a pure function of a ``random.Random`` handed in: no global random state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

CATEGORIES = ("shirt", "shoes", "bag", "hat", "jacket", "dress", "pants", "scarf")
COLOURS = ("red", "blue", "green", "black", "white", "grey", "brown", "pink")
SIZES = ("xs", "s", "m", "l", "xl")  # canonical order, used when listing a product's sizes
MATERIALS = ("cotton", "leather", "wool", "silk", "denim", "linen", "nylon")
STYLES = ("classic", "casual", "slim", "sport", "vintage", "modern", "light", "warm")
PRICE_MIN, PRICE_MAX = 8, 95
MAX_CAP = (PRICE_MAX // 10 + 2) * 10  # the largest price cap an instruction can name
OVER_CAP = 20  # an over-budget distractor costs between the cap and the cap plus this
MAX_PRICE = MAX_CAP + OVER_CAP  # the largest price any product can have
MIN_PRODUCTS, MAX_PRODUCTS = 50, 200


@dataclass(frozen=True)
class Product:
    """One catalogue entry. ``colours`` and ``sizes`` are the option values a buyer can click."""

    id: int
    category: str
    material: str
    style: str
    price: int
    colours: tuple[str, ...]
    sizes: tuple[str, ...]

    def __deepcopy__(self, memo: dict) -> Product:
        return self  # immutable, so sharing is as safe as copying (and snapshots stay cheap)

    @property
    def title(self) -> str:
        return f"{self.style} {self.material} {self.category}"

    def index_words(self) -> frozenset[str]:
        """The words keyword search matches against: title, attributes and option values."""
        return frozenset(self.title.split()) | set(self.colours) | set(self.sizes)


@dataclass(frozen=True)
class Instruction:
    """What the shopper wants. A product costing ``price`` satisfies the cap iff ``price < cap``."""

    category: str
    material: str
    colour: str
    size: str
    cap: int

    def __deepcopy__(self, memo: dict) -> Instruction:
        return self  # immutable, so sharing is as safe as copying

    @property
    def text(self) -> str:
        return (
            f"i want a {self.colour} {self.material} {self.category} in size {self.size} , "
            f"price under {self.cap} dollars"
        )

    @property
    def key_words(self) -> tuple[str, ...]:
        """The searchable words of the instruction (the price cap cannot be searched)."""
        return (self.colour, self.material, self.category, self.size)

    def satisfied_by(self, product: Product) -> bool:
        """True iff buying ``product`` with the wanted options can score a perfect 1.0."""
        return (
            product.category == self.category
            and product.material == self.material
            and self.colour in product.colours
            and self.size in product.sizes
            and product.price < self.cap
        )


def _options(rng: random.Random, values: tuple[str, ...], low: int, high: int, ordered: bool) -> tuple[str, ...]:
    """Between ``low`` and ``high`` distinct values; in canonical order if ``ordered``."""
    chosen = rng.sample(values, rng.randint(low, high))
    return tuple(v for v in values if v in chosen) if ordered else tuple(chosen)


def random_product(rng: random.Random, product_id: int) -> Product:
    """A product with every attribute drawn uniformly; at least two choices per option."""
    return Product(
        id=product_id,
        category=rng.choice(CATEGORIES),
        material=rng.choice(MATERIALS),
        style=rng.choice(STYLES),
        price=rng.randint(PRICE_MIN, PRICE_MAX),
        colours=_options(rng, COLOURS, 2, 4, ordered=False),
        sizes=_options(rng, SIZES, 2, 4, ordered=True),
    )


def generate_catalogue(rng: random.Random, num_products: int) -> list[Product]:
    """``num_products`` random products with ids ``1..num_products``."""
    return [random_product(rng, i) for i in range(1, num_products + 1)]


def instruction_for(rng: random.Random, product: Product) -> Instruction:
    """An instruction that ``product`` satisfies: one of its colours and sizes, a cap above its price.

    The cap is the next multiple of ten above the price, sometimes ten more.
    """
    cap = (product.price // 10 + 1 + rng.randint(0, 1)) * 10
    return Instruction(product.category, product.material, rng.choice(product.colours), rng.choice(product.sizes), cap)


def near_misses(rng: random.Random, target: Product, instruction: Instruction, ids: tuple[int, int]) -> list[Product]:
    """Two distractors that share the target's title words but fail the instruction.

    The first has every wanted option but costs at least the cap; the second fits the budget and
    size but lacks the wanted colour. They make the agent read prices and options, not just titles.
    """
    pricey = Product(
        ids[0], target.category, target.material, rng.choice(STYLES),
        rng.randint(instruction.cap, instruction.cap + OVER_CAP),
        target.colours, target.sizes,
    )
    other_colours = tuple(c for c in COLOURS if c != instruction.colour)
    off_colour = Product(
        ids[1], target.category, target.material, rng.choice(STYLES),
        rng.randint(PRICE_MIN, instruction.cap - 1),
        tuple(rng.sample(other_colours, rng.randint(2, 4))), target.sizes,
    )
    return [pricey, off_colour]


def search(catalogue: list[Product], query: str, k: int) -> list[Product]:
    """The top ``k`` products by word overlap with ``query``.

    Score = number of distinct query words found in the product's ``index_words``. Products
    scoring 0 are dropped. Ties go to the lower product id, so the ranking is deterministic.
    """
    words = set(query.lower().split())
    scored = [(len(words & p.index_words()), p) for p in catalogue]
    ranked = sorted((sp for sp in scored if sp[0] > 0), key=lambda sp: (-sp[0], sp[1].id))
    return [p for _, p in ranked[:k]]


def draw_episode(rng: random.Random, num_products: int, k: int, attempts: int = 100) -> tuple[list[Product], Instruction]:
    """A catalogue with two near-miss distractors, and an instruction some product satisfies.

    The target is redrawn (up to ``attempts`` times, from the same ``rng``) until searching the
    instruction's key words lists a satisfying product among the top ``k``: every instruction is
    solvable by its own key-word search, so the expert can reach reward 1.0.
    """
    base = generate_catalogue(rng, num_products)
    for _ in range(max(attempts, 1)):
        target = rng.choice(base)
        instruction = instruction_for(rng, target)
        others = [p.id for p in base if p.id != target.id]
        ids = tuple(rng.sample(others, 2))
        replacements = {p.id: p for p in near_misses(rng, target, instruction, ids)}
        catalogue = [replacements.get(p.id, p) for p in base]
        shown = search(catalogue, " ".join(instruction.key_words), k)
        if any(instruction.satisfied_by(p) for p in shown):
            break
    return catalogue, instruction  # the target itself always satisfies it, listed or not
