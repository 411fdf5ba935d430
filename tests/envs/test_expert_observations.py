"""Every env's expert acts on what the agent was shown, never on the hidden answer: episodes that differ
in hidden state (the number, the map's slips, the shop's catalogue, the room's generator) and have shown
the same observations so far get the same expert action."""

from __future__ import annotations

import random
import zlib
from collections import defaultdict

import pytest

from envs.minishop import MiniShop
from envs.registry import make, unavailable

SEEDS = range(60)


class MinishopWithAnotherShop(MiniShop):
    """Minishop whose episode ``seed`` shows the instruction of seed ``seed % 3`` over the catalogue of
    ``seed``: the first page is shared by a third of the seeds, the shop behind it is not."""

    def reset(self, seed: int) -> str:
        super().reset(seed)
        catalogue = self.catalogue
        super().reset(seed % 3)
        self.catalogue, self._by_id = catalogue, {p.id: p for p in catalogue}
        return self._page_text


def textarena():
    if unavailable("textarena") is not None:
        pytest.skip(str(unavailable("textarena")))
    return make("textarena", game="GuessTheNumber-v0")


ENVS = {
    "hidden_number": lambda: make("hidden_number"),
    "hidden_number_noisy": lambda: make("hidden_number", noise=0.2),
    "frozen_lake": lambda: make("frozen_lake"),
    "frozen_lake_slippery": lambda: make("frozen_lake", is_slippery=True),
    "sokoban_small_rooms": lambda: make("sokoban", dim_room=(5, 5), num_boxes=1),
    "minishop": lambda: MinishopWithAnotherShop(),
    "gym_text": lambda: make("gym_text", entry_point="envs.gym_toy:GuessNumberText"),
    "gym_text_taxi": lambda: make("gym_text", entry_point="envs.taxi_text:TaxiText"),
    "gym_text_lookup": lambda: make("gym_text", entry_point="envs.lookup_text:LookupText"),
    "textarena_guess_the_number": textarena,
}


def expert_actions_by_transcript(env) -> dict[str, dict[int, str]]:
    """For every observation-and-action transcript reached, the expert's action in each seed's episode
    that reached it. The played action (the expert's, or a random one) is drawn from a generator
    seeded by the transcript, so episodes that showed the same things go on alike."""
    seen: dict[str, dict[int, str]] = defaultdict(dict)
    for seed in SEEDS:
        transcript, done = [env.reset(seed)], False
        while not done:
            key = "\x00".join(transcript)
            expert = env.expert_action()
            seen[key][seed] = expert
            rng = random.Random(zlib.crc32(key.encode()))
            action = expert if rng.random() < 0.5 else env.random_action(rng)
            result = env.step(action)
            transcript += [action, result.observation]
            done = result.done or result.info.get("truncated", False)  # a time limit ends it too
    return seen


@pytest.mark.parametrize("name", list(ENVS))
def test_the_expert_action_is_a_function_of_the_observations_so_far(name):
    seen = expert_actions_by_transcript(ENVS[name]())
    shared = {key: by_seed for key, by_seed in seen.items() if len(by_seed) > 1}
    assert len(shared) >= 3  # points where different episodes had shown the same things
    for key, by_seed in shared.items():
        assert len(set(by_seed.values())) == 1, (key.replace("\x00", " | "), by_seed)
