"""FitSettings: the one home of a world-model fit's settings, for fit_world_model and the training loop."""

import pytest

from imagination.config import ImaginationConfig
from world_model.fit_settings import FitSettings


def test_the_settings_become_the_fit_keywords():
    settings = FitSettings(steps=7, max_epochs=2, batch_size=5, lr=0.5, weight_decay=0.25, val_every_steps=3,
                           progress=False)
    assert settings.keywords() == {"max_steps": 7, "max_epochs": 2, "batch_size": 5, "lr": 0.5,
                                   "weight_decay": 0.25, "val_every_steps": 3, "progress": False}


def test_the_loop_reads_its_flat_imagination_keys():
    config = ImaginationConfig(fit_steps=11, first_fit_steps=40, fit_batch_size=6, fit_lr=0.002)
    assert config.world_model_fit(first_fit=True) == FitSettings(steps=40, batch_size=6, lr=0.002, progress=False)
    assert config.world_model_fit(first_fit=False) == FitSettings(steps=11, batch_size=6, lr=0.002, progress=False)
    # What the loop ran with before: no weight decay, no epoch cap, no validation passes.
    assert config.world_model_fit(first_fit=False).keywords() == {
        "max_steps": 11, "max_epochs": None, "batch_size": 6, "lr": 0.002, "weight_decay": 0.0,
        "val_every_steps": None, "progress": False}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("steps", 0, "fit.steps must be an integer >= 1"),
    ("batch_size", 0, "fit.batch_size must be an integer >= 1"),
    ("lr", 0.0, "fit.lr must be > 0"),
    ("weight_decay", -1.0, "fit.weight_decay must be >= 0"),
])
def test_a_bad_setting_is_named(key, value, message):
    with pytest.raises(ValueError, match=message):
        FitSettings(**{key: value})
