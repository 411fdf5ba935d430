"""Warm start from recorded transcripts (chat JSONL): the agent's turns are learned, nothing else."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from envs.agent import ExpertAgent
from envs.chat import export_chat_jsonl
from policy.transcripts import transcript_trajectories
from policy.warm_start import bc_loss, behaviour_clone
from tests.policy.fake_envs import EchoEnv, rollout
from tests.policy.test_warm_start import TOKENIZER, accuracy, make_policy

HELD_OUT = range(1000, 1040)  # accuracy() plays these seeds; the transcripts use 0..99


@pytest.fixture
def transcripts(tmp_path):
    path = tmp_path / "expert.jsonl"
    export_chat_jsonl(rollout(ExpertAgent(), EchoEnv, range(100)), path, system_prompt="be brief")
    return path


@pytest.mark.slow
def test_a_policy_cloned_from_transcripts_beats_an_uncloned_one_on_held_out_tasks(transcripts):
    demonstrations = transcript_trajectories(transcripts, "echo")
    assert len(demonstrations) == 100 and all(t.env_name == "echo" for t in demonstrations)
    cloned, uncloned = make_policy(seed=1), make_policy(seed=1)
    behaviour_clone(cloned, demonstrations, lr=3e-3, batch_size=64, max_steps=60, seed=0, progress=False)
    assert accuracy(cloned) > accuracy(uncloned) + 0.5
    assert accuracy(cloned) >= 0.8


def test_only_the_assistant_turns_are_targets(transcripts):
    """Each row's trained tokens are exactly one assistant message (+ EOS): never a user, tool or system text."""
    demonstrations = transcript_trajectories(transcripts, "echo")[:5]
    policy = make_policy()
    batch, samples = policy.encode(demonstrations)
    records = [json.loads(line) for line in transcripts.read_text().splitlines()[:5]]
    assistant = [m["content"] for r in records for m in r["messages"] if m["role"] == "assistant"]
    trained = [TOKENIZER.decode(row[mask.bool()].tolist()) for row, mask in zip(batch.input_ids, batch.response_mask, strict=True)]
    assert trained == [f"{text} {TOKENIZER.eos_token}" for text in assistant]


def test_the_loss_is_the_nll_of_the_assistant_tokens_alone(transcripts):
    """Independently: each (prompt, action) pair as its own unpadded row, NLL over the action and EOS."""
    demonstrations = transcript_trajectories(transcripts, "echo")[:3]
    policy = make_policy()
    batch, samples = policy.encode(demonstrations)
    nll, count = 0.0, 0
    with torch.no_grad():
        loss = bc_loss(policy, batch).item()
        for sample in samples:
            prompt = [TOKENIZER.bos_token_id] + TOKENIZER(sample.prompt, add_special_tokens=False).input_ids
            action = TOKENIZER(sample.action, add_special_tokens=False).input_ids + [TOKENIZER.eos_token_id]
            ids = torch.tensor([prompt + action])
            logits = policy.model(ids).logits[0]  # (L, V)
            targets = ids[0, len(prompt):]
            nll += F.cross_entropy(logits[len(prompt) - 1:-1], targets, reduction="sum").item()
            count += len(targets)
    assert loss == pytest.approx(nll / count, rel=1e-4)


def test_bad_transcript_files_fail_naming_the_key(tmp_path, transcripts):
    with pytest.raises(ValueError, match="trainer.warm_start.transcripts: no file"):
        transcript_trajectories(tmp_path / "missing.jsonl", "echo")
    with pytest.raises(ValueError, match=r"recorded on \['echo'\], this run's env is 'sokoban'"):
        transcript_trajectories(transcripts, "sokoban")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="holds no agent turns"):
        transcript_trajectories(empty, "echo")
    foreign = tmp_path / "foreign.jsonl"  # a user's SFT file: messages only, no env named
    foreign.write_text(json.dumps({"messages": [{"role": "user", "content": "say cat"},
                                                {"role": "assistant", "content": "cat"}]}) + "\n")
    (trajectory,) = transcript_trajectories(foreign, "echo")
    assert [(t.observation, t.action) for t in trajectory.turns] == [("say cat", "cat")]
