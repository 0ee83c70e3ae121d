"""Minimal safetensors reader/writer (the format of runtime/io/safetensors.h), so the benchmarks
need nothing beyond PyTorch: an 8-byte little-endian header length, a JSON header
{"__metadata__": {...}, name: {"dtype", "shape", "data_offsets": [begin, end]}}, then the
raw little-endian tensor bytes."""
import json
import struct

import torch

_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def load(path):
    """Returns (tensors: dict name -> tensor, metadata: dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    body = memoryview(data)[8 + n :]
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        if end == begin:
            t = torch.empty(info["shape"], dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype).reshape(info["shape"])
        out[name] = t
    return out, meta


def save(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
