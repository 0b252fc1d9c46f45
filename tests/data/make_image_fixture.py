#!/usr/bin/env python3
"""Writes the image fixtures of tests/models_vit.cpp and examples/classify_image.cpp:
  tests/data/vit_tiny/preprocessor_config.json  transformers' ViTImageProcessor for vit_tiny
                                                (224 x 224 replaced by the model's 32 x 32)
  tests/data/vit_image/image.png                 a 75 x 50 RGB test picture
  tests/data/vit_image/reference.safetensors     for that picture ("large", downscaled) and a
      13 x 9 one ("small", upscaled): the pixels (U8 [height, width, 3]), the processor's
      pixel_values (F32 [1, 3, 32, 32]) and vit_tiny's float64 logits for the large one.

  /usr/bin/python3 tests/data/make_image_fixture.py     (transformers 4.40.2, Pillow 9.4, torch 1.13)
"""
import os

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import ViTForImageClassification, ViTImageProcessor

HERE = os.path.dirname(os.path.abspath(__file__))


def picture(width, height, seed):
    """Smooth gradients, a disc and noise: every resize weight matters somewhere."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 255 * x / max(width - 1, 1)
    g = 255 * y / max(height - 1, 1)
    b = 255 * ((x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 3) ** 2)
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, 25, (height, width, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def main():
    model_dir = os.path.join(HERE, "vit_tiny")
    processor = ViTImageProcessor(size={"height": 32, "width": 32})
    processor.save_pretrained(model_dir)
    out = os.path.join(HERE, "vit_image")
    os.makedirs(out, exist_ok=True)
    large, small = picture(75, 50, 1), picture(13, 9, 2)
    Image.fromarray(large).save(os.path.join(out, "image.png"))
    tensors = {}
    for name, img in (("large", large), ("small", small)):
        pixels = processor(Image.fromarray(img), return_tensors="pt").pixel_values
        tensors[name + "_rgb"] = torch.from_numpy(img.copy())
        tensors[name + "_pixel_values"] = pixels.float().contiguous()
    model = ViTForImageClassification.from_pretrained(model_dir).double().eval()
    with torch.no_grad():
        logits = model(tensors["large_pixel_values"].double()).logits
    tensors["large_logits"] = logits.contiguous()
    save_file(tensors, os.path.join(out, "reference.safetensors"))
    print("label", model.config.id2label[int(logits.argmax())], logits.tolist())


if __name__ == "__main__":
    main()
