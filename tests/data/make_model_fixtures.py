"""Writes the model fixtures of tests/models_*.cpp: for each architecture, a small model with
random weights saved by Hugging Face transformers (config.json, model.safetensors) as
from_pretrained reads it, and reference.safetensors with input_ids, the logits HF computes for
them in float64, and the 8 tokens HF's greedy generate (float64, with its KV cache) appends
(for ViT: pixel_values and the logits); for the language models also reference_padded.safetensors,
the same for a left-padded batch with its attention_mask (write_padded).
Weights are drawn with 10 times the usual initial spread, so that the tokens generated depend
on the context, and the biases and norm weights are random too.
    python3 tests/data/make_model_fixtures.py [output dir]      (needs torch and transformers)
writes gpt2_tiny, llama_tiny, gemma_tiny and vit_tiny under the output dir (default: tests/data).
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import (GemmaConfig, GemmaForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          ViTConfig, ViTForImageClassification)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def save(name, model):
    model = model.eval()
    with torch.no_grad():  # biases and norms start at 0 and 1 (0 for Gemma): make them random
        for pname, p in model.named_parameters():
            if pname.endswith("bias") or "ln_" in pname or "norm" in pname:
                p.add_(0.1 * torch.randn_like(p))
    path = os.path.join(out, name)
    model.save_pretrained(path, safe_serialization=True)
    gen_config = os.path.join(path, "generation_config.json")
    if os.path.exists(gen_config):
        os.remove(gen_config)
    return model, path


def write(name, model, seed, vocab):
    model, path = save(name, model)
    torch.manual_seed(seed + 100)
    input_ids = torch.randint(0, vocab, (2, 11))
    with torch.no_grad():
        model = model.double()
        logits = model(input_ids).logits
        # An explicit mask: without one, generate masks every token equal to pad_token_id.
        generated = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=8,
                                   do_sample=False, pad_token_id=0)
    save_file({"input_ids": input_ids.contiguous(), "logits": logits.contiguous(), "generated": generated.contiguous()},
              os.path.join(path, "reference.safetensors"))
    write_padded(model, path, seed, vocab)


def write_padded(model, path, seed, vocab):
    """reference_padded.safetensors: a left-padded batch of prompts of 11, 6 and 3 tokens (pad id 0)
    with its attention_mask, the float64 logits of model(input_ids, attention_mask) at the real
    positions (0 at the padding) and the 8 tokens generate(input_ids, attention_mask) appends
    greedily. Each sequence is computed alone, with the position ids the padded batch gives it
    (the forward: its index in the row; generate: counted from its first token): in float64,
    transformers 4.40's Llama and Gemma turn a padded batch into NaN (their softmax runs in
    float32, where a fully masked row of a padding token is NaN, and the NaN reaches the other
    tokens through 0 * NaN in the attention's sum)."""
    g = torch.Generator().manual_seed(seed + 200)  # its own generator: the draws above stay as they were
    S, lengths = 11, [11, 6, 3]
    input_ids = torch.zeros(len(lengths), S, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    logits = torch.zeros(len(lengths), S, vocab, dtype=torch.float64)
    generated = torch.zeros(len(lengths), S + 8, dtype=torch.long)
    with torch.no_grad():
        for b, n in enumerate(lengths):
            ids = torch.randint(1, vocab, (1, n), generator=g)
            input_ids[b, S - n:] = ids[0]
            attention_mask[b, S - n:] = 1
            logits[b, S - n:] = model(ids, position_ids=torch.arange(S - n, S)[None]).logits[0].double()
            alone = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                                   pad_token_id=0)[0, n:]
            generated[b, :S] = input_ids[b]
            generated[b, S:S + len(alone)] = alone  # a sequence that ends early is padded with 0, as in a batch
    save_file({"input_ids": input_ids.contiguous(), "attention_mask": attention_mask.contiguous(), "logits": logits.contiguous(),
               "generated": generated.contiguous()}, os.path.join(path, "reference_padded.safetensors"))


torch.manual_seed(0)
gpt2 = GPT2Config(vocab_size=96, n_positions=32, n_embd=48, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                  attn_pdrop=0.0, initializer_range=0.2)
write("gpt2_tiny", GPT2LMHeadModel(gpt2), -100, 96)

# Grouped-query attention (4 query heads, 2 key/value heads), untied head.
torch.manual_seed(1)
llama = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=500.0,
                    initializer_range=0.2)
write("llama_tiny", LlamaForCausalLM(llama), 1, 96)

# One key/value head, head_dim 32 where hidden_size / heads is 16, tied head.
torch.manual_seed(2)
gemma = GemmaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=1, head_dim=32, max_position_embeddings=32, hidden_activation="gelu_pytorch_tanh",
                    initializer_range=0.2)
write("gemma_tiny", GemmaForCausalLM(gemma), 2, 96)

# 32 x 32 images of 3 channels in 8 x 8 patches (16 patches and the CLS token), 10 labels.
torch.manual_seed(3)
vit = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=96, num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                initializer_range=0.2)
model, path = save("vit_tiny", ViTForImageClassification(vit))
torch.manual_seed(103)
pixel_values = torch.randn(2, 3, 32, 32)
with torch.no_grad():
    logits = model.double()(pixel_values.double()).logits
save_file({"pixel_values": pixel_values.contiguous(), "logits": logits.contiguous()},
          os.path.join(path, "reference.safetensors"))
