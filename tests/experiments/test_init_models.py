"""Starting from saved models (``world_model.init``, ``critic.init``): the ``fitted_on.json`` record
round trip, each one-line refusal naming the key, the weights loaded as saved for every kind, and the
ledger's imported steps worked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from safetensors.torch import load_file

from critic import LatentCritic, LatentCriticConfig, TokenCritic, TokenCriticConfig
from critic.config import LatentCriticSection
from envs.registry import make
from experiments.config import register_configs, validate
from experiments.fitted_on import (
    FITTED_ON,
    FittedOn,
    Source,
    env_options,
    read_fitted_on,
    vocabulary_sha256,
    write_fitted_on,
)
from experiments.init_models import fitted_on_record, model_tokenizers, start_from_saved, weights_sha256
from experiments.ledger import Ledger, ledger_summary
from experiments.loop_progress import LoopProgress
from experiments.phase_record import PhaseRecord
from experiments.world_model_builder import build_world_model
from imagination.config import ImaginationConfig
from policy.model import build_tiny_tokenizer
from world_model import TurnTokenizer
from world_model.config import WorldModelOptions

CONF = Path(__file__).resolve().parents[2] / "experiments" / "conf"
register_configs()
ENV = "hidden_number"
TINY_LATENT = {"name": "latent", "num_members": 2, "head_hidden": 8, "latent_size": 16,
               "encoder": {"embed_size": 8, "feature_size": 16, "conv_layers": 1},
               "decoder": {"model_size": 8, "num_layers": 1, "num_heads": 2, "latent_slots": 2}}
TINY_LM = {"name": "lm", "num_members": 2, "head_hidden": 8,
           "lm": {"hidden_size": 16, "intermediate_size": 32, "num_layers": 1, "num_heads": 2, "history_turns": 1}}
BY_HAND = (Source("by hand", 120, 40),)
SECTION = LatentCriticSection(latent_size=8, embed_size=8, feature_size=8, conv_layers=0, head_hidden_size=0)


def latent_critic(env: str = ENV, seed: int = 0, env_kwargs: dict | None = None) -> LatentCritic:
    tokenizer = TurnTokenizer.for_env(env, env_kwargs)
    return LatentCritic(LatentCriticConfig.from_section(tokenizer, SECTION), tokenizer, seed=seed)


def world_model(options: dict, seed: int = 0):
    return build_world_model(WorldModelOptions(**options), ENV, {}, make(ENV).vocabulary(), seed=seed)


def save(model, folder: Path, env: str = ENV, env_kwargs: dict | None = None, tokenizers=None,
         sources=BY_HAND) -> Path:
    """``model`` saved as a run saves it: weights, config and ``fitted_on.json``."""
    model.save_pretrained(folder)
    tokenizers = model_tokenizers(model) if tokenizers is None else tokenizers
    write_fitted_on(folder, FittedOn(env, env_options(env, env_kwargs or {}), vocabulary_sha256(*tokenizers),
                                     list(sources)))
    return folder


def same_state(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k].cpu(), sb[k].cpu()) for k in sa)


def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text, text
    return text


# --- the record ------------------------------------------------------------------------------------
def test_the_record_round_trips_with_its_sums_written_out(tmp_path):
    record = FittedOn("hidden_number", env_options("hidden_number", {"n": 16}), "ab" * 32,
                      [Source("run a", 120, 40), Source("run b", 80, 0)])
    write_fitted_on(tmp_path, record)
    assert read_fitted_on(tmp_path, "critic.init") == record
    written = json.loads((tmp_path / FITTED_ON).read_text())
    assert (written["env"], written["real_steps"], written["expert_steps"]) == ("hidden_number", 200, 40)
    assert written["env_options"] == {"n": 16, "max_turns": 6, "noise": 0.0, "observation": "last"}


def test_env_options_fill_the_env_defaults_so_two_spellings_are_one_setting():
    assert env_options("hidden_number", {}) == env_options("hidden_number", {"n": 16, "max_turns": 6})
    assert env_options("sokoban", {})["dim_room"] == [6, 6]  # a tuple default, as JSON reads it back
    assert env_options("hidden_number", {"n": 10}) != env_options("hidden_number", {})


def test_the_tokenizer_hash_follows_the_vocabulary():
    a = TurnTokenizer.for_env(ENV).tokenizer
    assert vocabulary_sha256(a) == vocabulary_sha256(TurnTokenizer.for_env(ENV).tokenizer)
    assert vocabulary_sha256(a) != vocabulary_sha256(TurnTokenizer.for_env("frozen_lake").tokenizer)


# --- refusals, one line naming the key ---------------------------------------------------------------
def test_a_model_saved_for_another_env_is_refused_naming_the_key(tmp_path):
    folder = save(latent_critic("frozen_lake"), tmp_path / "critic", env="frozen_lake")
    with pytest.raises(ValueError) as error:
        start_from_saved(latent_critic(), folder, "critic", ENV, {}, model_tokenizers(latent_critic()))
    assert one_line(error) == "critic.init: saved for env frozen_lake, this run is hidden_number"


def test_other_env_options_are_refused_naming_the_key_and_the_option(tmp_path):
    folder = save(world_model(TINY_LATENT), tmp_path / "wm", env_kwargs={"n": 10})
    model = world_model(TINY_LATENT)
    with pytest.raises(ValueError) as error:
        start_from_saved(model, folder, "world_model", ENV, {}, model_tokenizers(model))
    assert one_line(error) == "world_model.init: saved for hidden_number with n=10, this run has n=16"


def test_another_tokenizer_is_refused_naming_the_key(tmp_path):
    other = build_tiny_tokenizer(["a", "b"])  # a vocabulary the run's critic does not read
    folder = save(latent_critic(), tmp_path / "critic", tokenizers=[other])
    with pytest.raises(ValueError) as error:
        start_from_saved(latent_critic(), folder, "critic", ENV, {}, model_tokenizers(latent_critic()))
    assert one_line(error).startswith("critic.init: saved for another tokenizer (vocabulary sha256 ")


def test_a_missing_folder_a_folder_without_a_record_and_one_without_weights_are_refused(tmp_path):
    model = latent_critic()
    tokenizers = model_tokenizers(model)
    with pytest.raises(ValueError) as error:
        start_from_saved(model, tmp_path / "nowhere", "critic", ENV, {}, tokenizers)
    assert one_line(error) == f"critic.init: {tmp_path / 'nowhere'} is not a folder"
    with pytest.raises(ValueError) as error:  # a run folder that saved no critic
        start_from_saved(model, tmp_path, "critic", ENV, {}, tokenizers)
    assert one_line(error).startswith(f"critic.init: {tmp_path} is neither a saved critic folder nor")
    bare = tmp_path / "bare"
    model.save_pretrained(bare)  # weights, no fitted_on.json: saved before the record existed
    with pytest.raises(ValueError) as error:
        start_from_saved(model, bare, "critic", ENV, {}, tokenizers)
    assert one_line(error).startswith(f"critic.init: {bare} has no fitted_on.json")
    (bare / "model.safetensors").unlink()
    write_fitted_on(bare, FittedOn(ENV, env_options(ENV, {}), vocabulary_sha256(*tokenizers)))
    with pytest.raises(ValueError) as error:
        start_from_saved(model, bare, "critic", ENV, {}, tokenizers)
    assert one_line(error) == f"critic.init: {bare} has no model.safetensors (only safetensors weights are loaded)"


def test_weights_of_other_sizes_are_refused_naming_the_key(tmp_path):
    folder = save(world_model(TINY_LATENT), tmp_path / "wm")
    model = world_model({**TINY_LATENT, "latent_size": 32})
    with pytest.raises(ValueError) as error:
        start_from_saved(model, folder, "world_model", ENV, {}, model_tokenizers(model))
    assert one_line(error).startswith("world_model.init: ") and "does not fit this run's world_model settings" in \
        str(error.value)


def compose_train(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="train", overrides=overrides)


def test_validation_refuses_at_start_naming_the_key(tmp_path):
    lake = {"size": 4}  # conf/env/frozen_lake.yaml's options
    folder = save(latent_critic("frozen_lake", env_kwargs=lake), tmp_path / "critic", env="frozen_lake", env_kwargs=lake)
    with pytest.raises(ValueError) as error:
        validate(compose_train(["env=hidden_number", "algo=ppo_turn", "critic=latent", f"critic.init={folder}"]))
    assert one_line(error) == "critic.init: saved for env frozen_lake, this run is hidden_number"
    with pytest.raises(ValueError) as error:  # no critic to start
        validate(compose_train(["env=frozen_lake", "algo=grpo", f"critic.init={folder}"]))
    assert one_line(error).startswith("critic.init: algo=grpo has no critic")
    with pytest.raises(ValueError) as error:  # no world model to start
        validate(compose_train(["env=hidden_number", f"world_model.init={tmp_path / 'none'}"]))
    assert one_line(error).startswith("world_model.init: this run builds no world model")
    with pytest.raises(ValueError) as error:
        validate(compose_train(["env=hidden_number", "imagination=dyna", f"world_model.init={tmp_path / 'none'}"]))
    assert one_line(error) == f"world_model.init: {tmp_path / 'none'} is not a folder"
    run = validate(compose_train(["env=frozen_lake", "algo=ppo_turn", "critic=latent", f"critic.init={folder}"]))
    assert run.critic.init == str(folder)


# --- the weights as saved ------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [TINY_LATENT, TINY_LM], ids=["latent", "lm"])
def test_a_world_model_starts_from_the_saved_weights_found_through_a_run_folder(tmp_path, options):
    saved = world_model(options, seed=1)
    save(saved, tmp_path / "run" / "models" / "world_model")
    model = world_model(options, seed=2)
    assert not same_state(model, saved)
    imported = start_from_saved(model, tmp_path / "run", "world_model", ENV, {}, model_tokenizers(model))
    assert same_state(model, saved)
    assert imported.folder == tmp_path / "run" / "models" / "world_model"
    file = load_file(tmp_path / "run" / "models" / "world_model" / "model.safetensors")
    assert imported.weights_sha256 == weights_sha256(file)


def test_an_older_run_layout_is_found_too(tmp_path):
    saved = latent_critic(seed=1)
    save(saved, tmp_path / "run" / "critic")  # a run saved before models/ existed
    model = latent_critic(seed=2)
    start_from_saved(model, tmp_path / "run", "critic", ENV, {}, model_tokenizers(model))
    assert same_state(model, saved)


def test_the_token_critic_starts_from_saved_weights_over_the_policy_tokenizer(tmp_path):
    policy_tokenizer = build_tiny_tokenizer(make(ENV).vocabulary())
    config = TokenCriticConfig(vocab_size=len(policy_tokenizer), hidden_size=8, num_layers=1, num_heads=2,
                               intermediate_size=8)
    saved = TokenCritic(config, seed=1)
    folder = save(saved, tmp_path / "critic", tokenizers=[policy_tokenizer])
    model = TokenCritic(config, seed=2)
    start_from_saved(model, folder, "critic", ENV, {}, model_tokenizers(model, policy_tokenizer))
    assert same_state(model, saved)
    with pytest.raises(ValueError) as error:  # the same critic over another policy tokenizer
        start_from_saved(model, folder, "critic", ENV, {}, [build_tiny_tokenizer(["x"])])
    assert one_line(error).startswith("critic.init: saved for another tokenizer")


# --- the ledger ----------------------------------------------------------------------------------------
def test_the_imported_steps_go_on_the_ledger_and_into_the_next_saved_record():
    # Saved world model: run a 120 real + 40 expert, run b 80 real -> 200 real, 40 expert.
    # Saved critic: run a's 300 real. This run then fits its world model on 64 real and 16 expert steps.
    world = FittedOn(ENV, env_options(ENV, {}), "x", [Source("a", 120, 40), Source("b", 80, 0)])
    critic = FittedOn(ENV, env_options(ENV, {}), "y", [Source("a", 300, 0)])
    progress = LoopProgress.fresh(ImaginationConfig(), branch_seed=0, warm_start_env_steps=0)
    from experiments.train import imported_steps

    class Saved:  # what ``Imported`` the run holds (only its record is read)
        def __init__(self, fitted_on: FittedOn) -> None:
            self.fitted_on = fitted_on

    steps = imported_steps({"world_model": Saved(world), "critic": Saved(critic)})
    progress.apply(PhaseRecord(imported_steps=steps))
    progress.apply(PhaseRecord(imported_steps=steps))  # a resumed run counts them once, not twice
    summary = ledger_summary(progress.ledger, real_env_steps=64, warm_start_expert_steps=16, warm_start_check_steps=0)
    assert {k: v for k, v in summary.items() if k.startswith("imported_")} == {
        "imported_world_model_real_steps": 200, "imported_world_model_expert_steps": 40,
        "imported_critic_real_steps": 300, "imported_critic_expert_steps": 0}
    assert Ledger.from_record(progress.ledger.as_record()) == progress.ledger  # kept by a checkpoint

    class Model:  # a model whose one vocabulary is the env's word tokenizer
        tokenizer = TurnTokenizer.for_env(ENV)

    imported = type("Imported", (), {"fitted_on": world})()
    record = fitted_on_record(imported, ENV, {}, model_tokenizers(Model()), Source("c", 64, 16))
    assert (record.real_steps, record.expert_steps) == (120 + 80 + 64, 40 + 0 + 16)
    assert [s.collected_by for s in record.sources] == ["a", "b", "c"]
    assert fitted_on_record(None, ENV, {}, model_tokenizers(Model()), Source("c", 64, 16)).real_steps == 64
