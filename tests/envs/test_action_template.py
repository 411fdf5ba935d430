"""Random-action templates from config: draws in braces, literal text kept, bad templates refused."""

from __future__ import annotations

import random

import pytest

from envs.action_template import parse_action_template, sample_action

KEY = "env.kwargs.random_action"


def test_ranges_and_choices_draw_left_to_right_from_the_rng():
    parts = parse_action_template("[{0-4} {0-4}] {up|down}", KEY)
    reference = random.Random(7)  # by hand: two randint(0, 4) then one choice, in order
    expected = [f"[{reference.randint(0, 4)} {reference.randint(0, 4)}] {reference.choice(['up', 'down'])}"
                for _ in range(20)]
    rng = random.Random(7)
    assert [sample_action(parts, rng) for _ in range(20)] == expected


def test_every_value_of_a_range_and_nothing_outside_it():
    parts = parse_action_template("[{1-3}]", KEY)
    rng = random.Random(0)
    assert {sample_action(parts, rng) for _ in range(200)} == {"[1]", "[2]", "[3]"}


def test_a_template_without_draws_is_its_own_text():
    assert sample_action(parse_action_template("[stand]", KEY), random.Random(0)) == "[stand]"


@pytest.mark.parametrize("template", ["[{0-4]", "[0-4}]", "[{4-0}]", "[{x}]", "[{a|}]", "[{}]"])
def test_malformed_templates_fail_naming_the_key(template):
    with pytest.raises(ValueError, match=KEY):
        parse_action_template(template, KEY)
