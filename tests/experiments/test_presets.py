"""The named experiments of ``conf/experiment/``: each composes and validates, and each sweep preset
expands (through ``hydra.sweeper.params``) into the jobs its description promises."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from experiments.config import register_configs, validate

CONF = Path(__file__).resolve().parents[2] / "experiments" / "conf"
register_configs()
SWEEPS = {  # preset -> the swept key and its values, as the issue of each preset promises them
    "quick": ("imagination.ratio", ["0", "0.9"]),
    "baselines": ("algo", ["ppo_token", "ppo_turn", "grpo", "drgrpo", "gigpo", "hgpo"]),
    "ablate_ratio": ("imagination.ratio", ["0", "0.5", "0.75", "0.9", "0.95"]),
    "ablate_controls": ("control", sorted(p.stem for p in (CONF / "control").glob("*.yaml"))),
}
ENVS = sorted(p.stem for p in (CONF / "env").glob("*.yaml"))
# The imagination fields each control option of conf/control/ turns on (a value other than the
# ablate_controls base, where every control is off).
CONTROL_FIELDS = {
    "none": set(),
    "reward_penalty": {"reward_penalty"},
    "halt_uncertainty": {"halt_uncertainty"},
    "imagined_weight": {"imagined_weight"},
    "value_expansion": {"mode"},
    "gate": {"gate_threshold"},
    "horizon": {"horizon"},
    "ratio_schedule": {"ratio_end"},
    "warmup": {"warmup_iterations"},
}


def compose_train(overrides: list[str], hydra: bool = False):
    return _compose(tuple(overrides), hydra)


@functools.cache  # the tests compose the same jobs more than once; nothing mutates a result
def _compose(overrides: tuple[str, ...], hydra: bool):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="train", overrides=list(overrides), return_hydra_config=hydra)


def presets() -> list[str]:
    return sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def sweep_params(preset: str) -> dict[str, list[str]]:
    """``hydra.sweeper.params`` of a preset, each value list split the way Hydra's sweeper does."""
    params = compose_train([f"experiment={preset}"], hydra=True).hydra.sweeper.params or {}
    parser = OverridesParser.create()
    return {
        key: [str(v) for v in parser.parse_override(f"{key}={value}").sweep_string_iterator()]
        for key, value in params.items()
    }


@pytest.mark.parametrize("preset", presets())
def test_every_named_experiment_composes_and_validates(preset):
    run = validate(compose_train([f"experiment={preset}"]))
    assert run.env.name in ENVS


def test_the_named_experiments_are_all_there():
    assert set(SWEEPS) | set(ENVS) <= set(presets())


@pytest.mark.parametrize("env", ENVS)
def test_an_env_preset_runs_its_env(env):
    assert validate(compose_train([f"experiment={env}"])).env.name == env


@pytest.mark.parametrize("preset", sorted(SWEEPS))
def test_a_sweep_preset_expands_into_its_jobs_and_each_job_validates(preset):
    key, values = SWEEPS[preset]
    params = sweep_params(preset)
    assert list(params) == [key]  # nothing inherited from the presets it builds on
    assert sorted(params[key]) == sorted(values)
    for value in values:
        validate(compose_train([f"experiment={preset}", f"{key}={value}"]))


def test_single_run_presets_sweep_nothing():
    for preset in set(presets()) - set(SWEEPS):
        assert sweep_params(preset) == {}, preset


def test_ablate_ratio_is_model_free_at_ratio_zero_and_model_based_above():
    runs = {
        v: validate(compose_train(["experiment=ablate_ratio", f"imagination.ratio={v}"]))
        for v in ("0", "0.9")
    }
    assert not runs["0"].imagination.enabled and runs["0.9"].imagination.enabled
    assert runs["0"].algo == runs["0.9"].algo and runs["0"].trainer == runs["0.9"].trainer


def test_quick_compares_the_same_learner_with_and_without_imagination():
    runs = [validate(compose_train(["experiment=quick", f"imagination.ratio={v}"])) for v in ("0", "0.9")]
    assert [r.imagination.enabled for r in runs] == [False, True]
    assert runs[0].algo == runs[1].algo and runs[0].env == runs[1].env and runs[0].trainer == runs[1].trainer
    # One real-step budget and one real-step evaluation schedule for both arms; the world model off
    # the warm start's expert episodes.
    assert runs[1].trainer.max_env_steps == 3000 and runs[1].trainer.eval_every_steps == 300
    assert not runs[1].imagination.fit_on_warm_start
    hydra_cfg = compose_train(["experiment=quick"], hydra=True).hydra
    assert list(hydra_cfg.callbacks.sweep_end.at) == [1000, 2000, 3000]


@pytest.mark.parametrize("preset", presets())
def test_every_preset_evaluates_at_real_step_marks(preset):
    assert validate(compose_train([f"experiment={preset}"])).trainer.eval_every_steps is not None


def test_baselines_sets_each_algorithm_and_keeps_the_preset_learning_rate():
    for algo in SWEEPS["baselines"][1]:
        run = validate(compose_train(["experiment=baselines", f"algo={algo}"]))
        assert run.algo.name == algo and run.algo.ppo.lr == pytest.approx(1e-4)
    drgrpo = validate(compose_train(["experiment=baselines", "algo=drgrpo"]))
    assert drgrpo.algo.ppo.loss_agg == "seq-mean-token-sum-norm"  # the algo's own setting survives


def test_each_control_turns_on_exactly_its_own_field():
    assert set(CONTROL_FIELDS) == set(SWEEPS["ablate_controls"][1])
    base = validate(compose_train(["experiment=ablate_controls", "control=none"])).imagination
    for control, fields in CONTROL_FIELDS.items():
        on = validate(compose_train(["experiment=ablate_controls", f"control={control}"])).imagination
        changed = {name for name in vars(base) if getattr(base, name) != getattr(on, name)}
        assert changed == fields, control


def test_ablate_controls_base_has_every_control_off():
    base = validate(compose_train(["experiment=ablate_controls", "control=none"])).imagination
    assert (
        base.reward_penalty,
        base.halt_uncertainty,
        base.imagined_weight,
        base.mode,
        base.gate_threshold,
        base.horizon,
        base.ratio_end,
        base.warmup_iterations,
    ) == (0.0, None, 1.0, "policy", 0.0, None, None, 0)
    assert base.enabled


LATENT_TUNED = {"frozen_lake", "sokoban", "taxi", "lookup"}
"""The presets that set the latent world model's own keys (the decoder's copy path); the others choose
their sizes through the world_model group (world_model=small), which world_model=lm replaces."""


@pytest.mark.parametrize("preset", presets())
def test_a_preset_with_the_lm_world_model_composes_or_is_refused_naming_a_latent_key(preset):
    overrides = [f"experiment={preset}", "world_model=lm"]
    if preset not in LATENT_TUNED:
        assert validate(compose_train(overrides)).world_model.name == "lm"
        return
    with pytest.raises(ValueError, match=r"world_model\.(latent_size|decoder\.\w+) is read only by the latent "
                                         r"world model; world_model\.name=lm does not use it"):
        validate(compose_train(overrides))


# --- each env preset's prompt limit holds its env's longest prompt -------------------------------------
# The presets named after an env (and the variants of one), with the episodes their prompts are measured on.
ENV_PRESETS = [*ENVS, "learning_check", "hidden_number_10", "taxi", "lookup"]
PROMPT_EPISODES = 6


def longest_prompt(run) -> int:
    """Tokens of the longest prompt (BOS included) the policy is shown over random full-length episodes of
    the preset's env, rendered and tokenized as the policy does (its window, its env tokenizer)."""
    from envs import RandomAgent, collect, make
    from policy.env_tokenizer import env_tokenizer
    from policy.render import render_prompt

    kwargs = dict(run.env.kwargs)
    tokenizer = env_tokenizer(run.policy.tokenizer, run.env.name, kwargs, make(run.env.name, **kwargs).vocabulary())
    episodes = collect(RandomAgent(0), run.env.name, group_size=1, group_seeds=list(range(PROMPT_EPISODES)),
                       env_kwargs=kwargs, max_turns=run.trainer.max_turns, progress=False)
    prompts = [render_prompt(tokenizer, t.turns[:k], t.turns[k].observation, run.policy.history_window)
               for t in episodes for k in range(len(t.turns))]
    return 1 + max(len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("preset", ENV_PRESETS)
def test_an_env_presets_prompt_limit_holds_its_longest_prompt_with_the_longest_actions(preset):
    """A cut prompt loses its start (the task's rules), so the limit holds the longest prompt of random
    episodes with room for every action in the history window to be as long as an action may be."""
    from envs.registry import unavailable

    run = validate(compose_train([f"experiment={preset}"]))
    if unavailable(run.env.name) is not None:
        pytest.skip(unavailable(run.env.name))
    room = run.policy.history_window * run.policy.max_action_tokens
    assert longest_prompt(run) + room <= run.policy.max_prompt_tokens


@pytest.mark.parametrize("preset", ENV_PRESETS)
def test_an_env_preset_fits_the_small_world_model_unless_the_command_line_says_otherwise(preset):
    """world_model=small's sizes, written out by hand (conf/world_model/small.yaml), and the default's
    on the command line."""
    model = validate(compose_train([f"experiment={preset}", "imagination=dyna"])).world_model
    decoder = model.decoder
    assert (model.name, model.latent_size, model.num_members) == ("latent", 64, 3)
    assert (decoder.model_size, decoder.num_layers, decoder.num_heads, decoder.latent_slots) == (32, 1, 2, 4)
    assert (model.encoder.embed_size, model.encoder.feature_size, model.encoder.conv_layers) == (64, 128, 2)
    default = validate(compose_train([f"experiment={preset}", "imagination=dyna", "world_model=default"])).world_model
    assert (default.latent_size, default.num_members, default.decoder.model_size) == (128, 5, 64)
    assert default.max_observation_words == model.max_observation_words  # the preset's word caps stay
