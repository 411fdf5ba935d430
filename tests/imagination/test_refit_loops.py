"""Both refit loops (``imagination.fit_loop``) get the same fit settings, weight decay included."""

from __future__ import annotations

import pytest

from imagination import refit
from imagination.config import ImaginationConfig
from imagination.gate import ImaginationGate
from world_model.fit_settings import FitSettings


@pytest.mark.parametrize("loop", ["lightning", "plain"])
def test_each_fit_loop_gets_every_fit_setting(monkeypatch, loop):
    calls: dict[str, dict] = {}

    def recorder(name):
        def fake_refit(model, store, **options):
            calls[name] = options
            return {"wm/loss": 0.5, "trajectories": 3}
        return fake_refit

    monkeypatch.setattr(refit, "refit_any_on_store", recorder("lightning"))
    monkeypatch.setattr(refit, "refit_plain_on_store", recorder("plain"))
    config = ImaginationConfig(fit_loop=loop, fit_trajectories=7)
    # Settings a flat key cannot set today (weight decay): what world_model_fit says is what either loop gets.
    monkeypatch.setattr(ImaginationConfig, "world_model_fit",
                        lambda self, first_fit: FitSettings(steps=11 if first_fit else 5, batch_size=6, lr=0.02,
                                                            weight_decay=0.25, progress=False))
    metrics = refit.refit_and_gate(object(), ImaginationGate(0.5), None, [], config, 1, first_fit=True, fit_seed=9,
                                   log=print)
    assert list(calls) == [loop]
    assert calls[loop] == {"steps": 11, "batch_size": 6, "lr": 0.02, "weight_decay": 0.25, "last": 7, "seed": 9}
    assert metrics == {"wm/train_loss": 0.5, "wm/fit_trajectories": 3.0}
