"""The two seed derivations keep the streams recorded runs were made with, and stay distinct."""

from envs.seeding import derive_seed, derive_seed_63bit


def test_derive_seed_keeps_the_31_bit_stream():
    # Values printed by the definition this one replaces (it lived in the experiments package).
    assert derive_seed(0, "policy-init") == 272571815
    assert derive_seed(7, "train", 1, 0) == 810420493
    assert all(0 <= derive_seed(s, "x") < 2**31 for s in range(50))


def test_derive_seed_63bit_keeps_the_dream_stream():
    # Values printed by the definition this one replaces (it lived beside the dream env).
    assert derive_seed_63bit(0, "reset", 3) == 8669917192483975118
    assert derive_seed_63bit(5, "branch", 11, 0, (1, 2)) == 3696241962522243243
    assert all(0 <= derive_seed_63bit(s, "x") < 2**63 for s in range(50))


def test_the_two_streams_differ():
    assert derive_seed(0, "reset", 3) != derive_seed_63bit(0, "reset", 3)
