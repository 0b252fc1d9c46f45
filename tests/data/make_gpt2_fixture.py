"""Writes tests/data/gpt2_tiny: a GPT-2 with random weights, saved by Hugging Face transformers
(config.json, model.safetensors) as from_pretrained reads it, and reference.safetensors with
input_ids, the logits HF computes for them in float64, and the 8 tokens HF's greedy generate
appends to them (float64, its KV cache). kiln's GPT-2 is checked against it
(tests/models_gpt2.cpp). Needs torch and transformers:
    python3 tests/data/make_gpt2_fixture.py [output dir]
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "gpt2_tiny")
torch.manual_seed(0)
config = GPT2Config(vocab_size=96, n_positions=32, n_embd=48, n_layer=2, n_head=4,
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                    initializer_range=0.2)  # 10x GPT-2's, so that the tokens generated depend on the context
model = GPT2LMHeadModel(config).eval()
with torch.no_grad():  # the biases and layer norms are 0 and 1 at initialisation: make them random
    for name, p in model.named_parameters():
        if name.endswith("bias") or ".ln_" in name:
            p.add_(0.1 * torch.randn_like(p))
model.save_pretrained(out, safe_serialization=True)

input_ids = torch.randint(0, config.vocab_size, (2, 11))
with torch.no_grad():
    model = model.double()
    logits = model(input_ids).logits
    generated = model.generate(input_ids, max_new_tokens=8, do_sample=False, pad_token_id=0)
save_file({"input_ids": input_ids.contiguous(), "logits": logits.contiguous(), "generated": generated.contiguous()},
          os.path.join(out, "reference.safetensors"))
