#!/usr/bin/env python3
"""Writes tests/data/bpe_tiny: a byte-level BPE tokenizer of GPT-2's kind (ByteLevel
pre-tokenizer without a prefix space, GPT-2's pattern, <|endoftext|> as an added special token)
trained by Hugging Face's `tokenizers` on the corpus below, and reference.json: the ids that
`tokenizers` gives for each test text, which tests/text_tokenizer.cpp compares kiln's with.
Then tests/data/gpt2_text: a small GPT2LMHeadModel with random weights over that vocabulary,
the tokenizer beside it, and reference.json: a prompt and the text of transformers' greedy
generate (float64) after it, which tests/models_gpt2.cpp and examples/generate.cpp reproduce.

  /usr/bin/python3 tests/data/make_tokenizer_fixture.py     (tokenizers 0.19.1, transformers
                                                            4.40.2, torch 1.13)
"""
import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "bpe_tiny")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's the dog's bone; they're sure we'll see.",
    "I've got 3 apples and 12 oranges: 15 fruits in all, 3.14159 of a pie, and 2,048 seeds.",
    "Compilers turn expressions into kernels. A kernel reads tensors and writes tensors.",
    "def main():\n    return kiln.compile(model)  # one line\n\n\tindented with a tab\n",
    "Ça coûte cher, n'est-ce pas ? Übermäßig große Straßen. Ελληνικά γράμματα. Русский текст.",
    "日本語のテキストと中文文本。 Emoji: 🙂🚀 and symbols ©®™ — dashes – and “quotes”.",
    "Hello, world! Hello again, world!! HELLO WORLD... hello?  Two  spaces   three.",
    "Numbers like ١٢٣ and Ⅻ and ½ are numbers too; letters like ǅ and ʰ are letters.",
] * 3

TESTS = [
    "Hello, world!",
    "The lazy dog's owner said: they'll come, I'm sure, we've seen it; it'd be fine.",
    "DON'T SHOUT'S",
    "   leading spaces, trailing spaces   ",
    "line one\nline two\n\n\tafter a tab\r\nwindows line",
    "12345 and 3.14159 and 1,000,000",
    "<|endoftext|>first document<|endoftext|>second document<|endoftext|>",
    "Ça coûte cher — Übermäßig große Straßen — Ελληνικά — Русский",
    "日本語のテキスト 中文 🙂🚀 ©®™",
    "e\u0301 (a combining accent), \u00a0no-break space, \u2003em space, \u3000ideographic space",
    "unseen words: zyxwvut qqq quantum chromodynamics",
    "x",
    "",
]


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(os.path.join(OUT, "tokenizer.json"))
    cases = []
    for text in TESTS:
        ids = tok.encode(text).ids
        assert tok.decode(ids, skip_special_tokens=False) == text, text
        cases.append({"text": text, "ids": ids})
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False, indent=1)
    print(f"vocabulary {tok.get_vocab_size()}, {len(cases)} cases")
    write_model(tok)


PROMPT = "The quick brown fox"
NEW_TOKENS = 12


def write_model(tok):
    import shutil

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    path = os.path.join(HERE, "gpt2_text")
    os.makedirs(path, exist_ok=True)
    torch.manual_seed(7)
    config = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.2,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(path, safe_serialization=True)
    gen_config = os.path.join(path, "generation_config.json")
    if os.path.exists(gen_config):
        os.remove(gen_config)
    shutil.copy(os.path.join(OUT, "tokenizer.json"), os.path.join(path, "tokenizer.json"))
    hf = GPT2TokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"))
    ids = hf(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.double().generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                                      do_sample=False, pad_token_id=0)
    # eos is token 0: generation may stop early, as kiln's does.
    reference = {"prompt": PROMPT, "max_new_tokens": NEW_TOKENS, "ids": out[0].tolist(),
                 "text": hf.decode(out[0])}
    with open(os.path.join(path, "reference.json"), "w") as f:
        json.dump(reference, f, ensure_ascii=False, indent=1)
    print(f"gpt2_text: {reference['text']!r}")


if __name__ == "__main__":
    main()
