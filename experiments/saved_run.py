"""Find what a training run saved and rebuild its policy: no training code, nothing unpickled.

``experiments/train.py`` leaves in its run folder the resolved ``config.yaml`` and the final policy
in ``models/policy/`` (``policy/`` in runs saved before; with ``trainer.checkpoint_every``, earlier
ones in ``checkpoints/iteration_N/``). A policy folder is a Hugging Face model directory:
``config.json``, safetensors weights, tokenizer.

``find_saved_run`` accepts either a run folder (its ``models/policy/``, or an older run's ``policy/``,
is used) or a policy folder, whose run config is the ``config.yaml`` in it or in one of the two
folders above it (``RUN/models/policy``, ``RUN/policy``, ``RUN/checkpoints/iteration_N``), unless a
config file is given. Anything else is refused with one
``SavedRunError`` that says what the folder lacks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from envs.registry import make
from experiments.config import EnvConfig, TrainerConfig
from experiments.config_renames import added_keys
from experiments.run_layout import model_dir, saved_model_dir
from policy.chat_preamble import run_preamble
from policy.config import PolicyConfig
from policy.lm_policy import LMPolicy
from policy.model import load_local_pretrained

RUN_CONFIG = "config.yaml"
POLICY_DIR = str(model_dir("", "policy"))  # in messages: where a run folder holds its policy
MODEL_FILES = ("config.json", "tokenizer_config.json")  # what a saved model-and-tokenizer folder holds
CONFIG_SEARCH_DEPTH = 2  # folders above a policy folder searched for its run's config.yaml


class SavedRunError(ValueError):
    """The folder is not a run or policy folder, or what it holds cannot be read; the message says which."""


@dataclass(frozen=True)
class SavedRun:
    """Where a saved policy lies and the run settings needed to play it again."""

    policy_dir: Path
    config_path: Path
    env: EnvConfig
    policy: PolicyConfig
    seed: int  # the run's seed
    max_turns: int | None  # trainer.max_turns (None: the env's own cap)
    eval_episodes: int  # trainer.eval_episodes: how many held-out seeds the run evaluated on while training

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return dict(self.env.kwargs)


def find_saved_run(folder: str | Path, config: str | Path | None = None) -> SavedRun:
    """The saved policy in ``folder`` (a run or policy folder) and its run settings; ``config`` (a
    run's ``config.yaml``) overrides where the settings come from. Raises SavedRunError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SavedRunError(f"{folder} is not a folder")
    if _is_policy_dir(folder):
        policy_dir = folder
    elif (folder / RUN_CONFIG).is_file():
        policy_dir = saved_model_dir(folder, "policy")
        if not _is_policy_dir(policy_dir):
            checkpoints = sorted((folder / "checkpoints").glob("iteration_*"))
            hint = f"; evaluate a checkpoint instead, e.g. {checkpoints[-1]}" if checkpoints else ""
            raise SavedRunError(
                f"{folder} is a run folder without a saved policy ({POLICY_DIR}/ is written when "
                f"training ends){hint}"
            )
    else:
        raise SavedRunError(
            f"{folder} is not a run folder ({RUN_CONFIG} and {POLICY_DIR}/) nor a policy folder "
            f"(a model with its tokenizer: {', '.join(MODEL_FILES)}, weights)"
        )
    config_path = Path(config) if config is not None else _nearest_run_config(policy_dir)
    if config_path is None:
        raise SavedRunError(
            f"{policy_dir} is a policy folder outside a run folder: no {RUN_CONFIG} in it or the "
            f"{CONFIG_SEARCH_DEPTH} folders above; pass --config with a run's {RUN_CONFIG} "
            "(its env and policy settings are used)"
        )
    return _read_run_config(policy_dir, config_path)


def load_policy(saved: SavedRun, *, greedy: bool = True, seed: int = 0, device: str = "cpu") -> LMPolicy:
    """The saved model and tokenizer behind ``LMPolicy`` with the run's prompt settings, in eval
    mode on ``device``: greedy decoding (temperature 0), or sampling at the run's temperature and
    top-p from ``seed``. Raises SavedRunError when the folder's files cannot be loaded."""
    try:
        model, tokenizer = load_local_pretrained(saved.policy_dir)
    except Exception as error:  # transformers / safetensors raise many types for a damaged folder
        raise SavedRunError(
            f"{saved.policy_dir}: cannot load the saved policy ({type(error).__name__}: {_one_line(error)})"
        ) from error
    cfg = dataclasses.replace(saved.policy, temperature=0.0) if greedy else saved.policy
    preamble = run_preamble(saved.env.name, saved.env_kwargs, saved.policy, run_seed=saved.seed,
                            max_turns=saved.max_turns)  # the chat prompt the run trained with
    return LMPolicy(model.to(device).eval(), tokenizer, cfg, seed=seed, **preamble)


def with_env(saved: SavedRun, name: str, kwargs: dict[str, Any] | None = None) -> SavedRun:
    """``saved`` played in env ``name`` with ``kwargs`` instead of the run's own env (a policy trained
    in a dream, ``reverie/Dream-v0`` through ``gym_text``, played in the real env it imagines).
    Raises SavedRunError, naming ``--env``, for an unknown env or option."""
    try:
        env = _schema(EnvConfig, {"name": name, "kwargs": dict(kwargs or {})})
        make(env.name, **env.kwargs)  # an unknown env or option fails here, by name
    except (OmegaConfBaseException, ValueError, TypeError) as error:
        raise SavedRunError(f"--env {name} --env-kwargs {kwargs or {}}: {_one_line(error)}") from error
    return dataclasses.replace(saved, env=env)


def _is_policy_dir(folder: Path) -> bool:
    return all((folder / name).is_file() for name in MODEL_FILES)


def _nearest_run_config(policy_dir: Path) -> Path | None:
    for candidate in [policy_dir, *policy_dir.resolve().parents[:CONFIG_SEARCH_DEPTH]]:
        if (candidate / RUN_CONFIG).is_file():
            return candidate / RUN_CONFIG
    return None


def _read_run_config(policy_dir: Path, config_path: Path) -> SavedRun:
    """The env, policy and evaluation settings of a resolved run config, checked against their schemas."""
    try:
        cfg = OmegaConf.load(config_path)
    except FileNotFoundError as error:
        raise SavedRunError(f"{config_path} does not exist") from error
    except Exception as error:  # YAML errors come in several types
        raise SavedRunError(f"{config_path} is not a readable YAML file ({_one_line(error)})") from error
    if not isinstance(cfg, DictConfig):
        raise SavedRunError(f"{config_path} is not a run config (a YAML mapping with env: and policy:)")
    for key in ("env", "policy"):
        if key not in cfg:
            raise SavedRunError(f"{config_path} has no '{key}:' section; is it a run's {RUN_CONFIG}?")
    try:
        env = _schema(EnvConfig, cfg.env)
        # a key the run's record predates takes the value the run ran with (e.g. the fixed system prompt)
        policy = _schema(PolicyConfig, OmegaConf.merge(added_keys()["policy"], cfg.policy))
        seed = int(OmegaConf.select(cfg, "seed", default=0))
        # Only two trainer keys matter here: read alone, defaulting as TrainerConfig does.
        max_turns = OmegaConf.select(cfg, "trainer.max_turns", default=TrainerConfig.max_turns)
        eval_episodes = int(
            OmegaConf.select(cfg, "trainer.eval_episodes", default=TrainerConfig.eval_episodes)
        )
        make(env.name, **env.kwargs)  # an unknown env or option fails here, by name
    except (OmegaConfBaseException, ValueError, TypeError) as error:
        raise SavedRunError(f"{config_path}: {_one_line(error)}") from error
    return SavedRun(
        policy_dir=policy_dir,
        config_path=config_path,
        env=env,
        policy=policy,
        seed=seed,
        max_turns=None if max_turns is None else int(max_turns),
        eval_episodes=eval_episodes,
    )


def _schema(schema: type, node: Any) -> Any:
    """``node`` checked against the dataclass ``schema`` (unknown keys and wrong types fail) and built."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), node))


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."
