#!/usr/bin/env python3
"""Writes a synthetic image-classification set in the format `gradc train --data` and
`gradc eval --data` read for image models (docs/training.md): a safetensors file with
`images` f32[N, C, H, W] and `labels` i64[N]. Each class has a random prototype image; a
sample is its class's prototype plus Gaussian noise, so a ResNet can learn it in a few dozen
steps. Standard library only (no numpy or torch).

    scripts/make_image_data.py OUT.safetensors [--count N] [--channels C] [--size S]
        [--classes K] [--noise X] [--seed N] [--sample-seed N]

The prototypes come from --seed, the samples from --sample-seed (default: --seed), so a
held-out set of the same classes is another --sample-seed.
"""
import argparse
import array
import json
import random
import struct
import sys


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        raw = data.tobytes() if sys.byteorder == "little" else _swapped(data)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def _swapped(data):
    copy = array.array(data.typecode, data)
    copy.byteswap()
    return copy.tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--noise", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample-seed", type=int)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    pixels = a.channels * a.size * a.size
    prototypes = [[rng.gauss(0, 1) for _ in range(pixels)] for _ in range(a.classes)]
    rng = random.Random(a.seed if a.sample_seed is None else (a.sample_seed + 1) * 1_000_003)
    images, labels = array.array("f"), array.array("q")
    for _ in range(a.count):
        k = rng.randrange(a.classes)
        labels.append(k)
        images.extend(v + a.noise * rng.gauss(0, 1) for v in prototypes[k])
    write_safetensors(a.out, {"images": ("F32", [a.count, a.channels, a.size, a.size], images),
                              "labels": ("I64", [a.count], labels)})


if __name__ == "__main__":
    main()
