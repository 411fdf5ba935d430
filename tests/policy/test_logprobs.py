import torch
from transformers import LlamaConfig, LlamaForCausalLM

from envs.token_positions import position_ids_for
from policy.logprobs import token_logprobs


def tiny_lm(vocab: int = 11) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
    )
    return LlamaForCausalLM(config).eval()


def test_position_ids_restart_after_left_padding():
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert position_ids_for(mask).tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]


def test_logprobs_match_manual_softmax_and_ignore_left_padding():
    model = tiny_lm()
    ids = torch.tensor([[4, 5, 6, 7]])
    logp, entropy = token_logprobs(model, ids, torch.ones_like(ids))
    with torch.no_grad():
        probs = model(ids).logits.softmax(-1)[0]  # (L, V)
    expected = [0.0] + [probs[t - 1, ids[0, t]].log().item() for t in range(1, 4)]
    assert torch.allclose(logp[0], torch.tensor(expected), atol=1e-5)
    assert torch.allclose(entropy[0, 1:], -(probs[:-1] * probs[:-1].log()).sum(-1), atol=1e-5)

    padded = torch.tensor([[0, 0, 4, 5, 6, 7]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    logp_padded, _ = token_logprobs(model, padded, mask)
    assert torch.allclose(logp_padded[0, 3:], logp[0, 1:], atol=1e-5)
