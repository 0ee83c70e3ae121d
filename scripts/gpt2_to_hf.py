#!/usr/bin/env python3
"""Converts the weights of models/gpt2.yaml (gradc train --save DIR: DIR/weights.safetensors)
to Hugging Face's GPT2LMHeadModel names and layouts, and back.

gradc's layers are torch.nn.Linear-shaped ([out, in]); Hugging Face's GPT-2 uses Conv1D, whose
weights are [in, out], so those four matrices per block are transposed. The LM head is tied to
the token embedding: gradc saves the matrix once as wte.weight; the converted file has both
transformer.wte.weight and lm_head.weight (the same values), as GPT2LMHeadModel's state_dict.

    /usr/bin/python3 scripts/gpt2_to_hf.py runs/gpt2/weights.safetensors hf.safetensors
    /usr/bin/python3 scripts/gpt2_to_hf.py --reverse hf.safetensors weights.safetensors

The mapping (N = block index; docs/models.md has the table):
    wte.weight                 transformer.wte.weight (and lm_head.weight)
    wpe.weight                 transformer.wpe.weight
    blocks.N.ln1.*             transformer.h.N.ln_1.*
    blocks.N.attn.qkv.weight   transformer.h.N.attn.c_attn.weight   (transposed)
    blocks.N.attn.qkv.bias     transformer.h.N.attn.c_attn.bias
    blocks.N.attn.proj.weight  transformer.h.N.attn.c_proj.weight   (transposed)
    blocks.N.attn.proj.bias    transformer.h.N.attn.c_proj.bias
    blocks.N.ln2.*             transformer.h.N.ln_2.*
    blocks.N.fc1.weight/bias   transformer.h.N.mlp.c_fc.weight (transposed) / .bias
    blocks.N.fc2.weight/bias   transformer.h.N.mlp.c_proj.weight (transposed) / .bias
    ln_f.*                     transformer.ln_f.*
"""
import argparse
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "pytorch"))

import st_io  # noqa: E402

# (gradc name, Hugging Face name, transposed); {n} is a block index, {p} weight or bias.
_RULES = [
    ("wte.weight", "transformer.wte.weight", False),
    ("wpe.weight", "transformer.wpe.weight", False),
    ("blocks.{n}.ln1.{p}", "transformer.h.{n}.ln_1.{p}", False),
    ("blocks.{n}.attn.qkv.weight", "transformer.h.{n}.attn.c_attn.weight", True),
    ("blocks.{n}.attn.qkv.bias", "transformer.h.{n}.attn.c_attn.bias", False),
    ("blocks.{n}.attn.proj.weight", "transformer.h.{n}.attn.c_proj.weight", True),
    ("blocks.{n}.attn.proj.bias", "transformer.h.{n}.attn.c_proj.bias", False),
    ("blocks.{n}.ln2.{p}", "transformer.h.{n}.ln_2.{p}", False),
    ("blocks.{n}.fc1.weight", "transformer.h.{n}.mlp.c_fc.weight", True),
    ("blocks.{n}.fc1.bias", "transformer.h.{n}.mlp.c_fc.bias", False),
    ("blocks.{n}.fc2.weight", "transformer.h.{n}.mlp.c_proj.weight", True),
    ("blocks.{n}.fc2.bias", "transformer.h.{n}.mlp.c_proj.bias", False),
    ("ln_f.{p}", "transformer.ln_f.{p}", False),
]


def _matcher(template):
    pattern = re.escape(template).replace(r"\{n\}", r"(?P<n>\d+)").replace(r"\{p\}", r"(?P<p>weight|bias)")
    return re.compile(pattern)


def _convert(state, forward):
    out = {}
    for name, t in state.items():
        for gradc, hf, transposed in _RULES:
            source, target = (gradc, hf) if forward else (hf, gradc)
            m = _matcher(source).fullmatch(name)
            if m:
                out[target.format(**m.groupdict())] = t.t().contiguous() if transposed else t
                break
        else:
            return name, out
    return None, out


def to_hf(state):
    """gradc names -> Hugging Face names (a new dict; tensors transposed where Conv1D needs it)."""
    unknown, out = _convert(state, forward=True)
    if unknown:
        raise ValueError(f"{unknown!r} is not a parameter of models/gpt2.yaml")
    out["lm_head.weight"] = out["transformer.wte.weight"]
    return out


def from_hf(state):
    """Hugging Face names -> gradc names (lm_head.weight must equal the embedding)."""
    # The tied head, and the causal-mask buffers older checkpoints carry, are not parameters.
    kept = {k: v for k, v in state.items()
            if k != "lm_head.weight" and not k.endswith(".attn.bias") and not k.endswith(".attn.masked_bias")}
    unknown, out = _convert(kept, forward=False)
    if unknown:
        raise ValueError(f"{unknown!r} is not a GPT2LMHeadModel parameter")
    if "lm_head.weight" in state and not bool((state["lm_head.weight"] == out["wte.weight"]).all()):
        raise ValueError("lm_head.weight differs from transformer.wte.weight: that model is not tied")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source")
    ap.add_argument("destination")
    ap.add_argument("--reverse", action="store_true", help="Hugging Face names to gradc's")
    a = ap.parse_args()
    tensors, meta = st_io.load(a.source)
    converted = from_hf(tensors) if a.reverse else to_hf(tensors)
    st_io.save(a.destination, converted, meta)
    print(f"{len(converted)} tensors -> {a.destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
