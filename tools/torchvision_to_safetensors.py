#!/usr/bin/python3
"""Convert a PyTorch / torchvision state_dict to safetensors (the format dlperf loads) and back.

    torchvision_to_safetensors.py resnet50.pth resnet50.safetensors          # .pth -> .safetensors
    torchvision_to_safetensors.py --model resnet50 --seed 1 out.safetensors  # a fresh torchvision init
    torchvision_to_safetensors.py --reverse ck.safetensors ck.pth            # safetensors -> torch.save(state_dict)

The .pth may hold a bare state_dict or a training checkpoint with a "state_dict" or "model" entry; DataParallel's
"module." prefix is kept (dlperf accepts it). Names, order, dtypes and shapes are kept as they are
(num_batches_tracked stays I64). No safetensors package is needed: the format is written here directly
(8-byte little-endian header length, JSON header, raw little-endian data). Importable: save_file(), load_file().
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

_DTYPES = {  # torch dtype name -> (safetensors name, numpy dtype used for the bytes)
    "float64": ("F64", np.float64), "float32": ("F32", np.float32), "float16": ("F16", np.float16),
    "bfloat16": ("BF16", np.uint16), "int64": ("I64", np.int64), "int32": ("I32", np.int32),
    "int16": ("I16", np.int16), "int8": ("I8", np.int8), "uint8": ("U8", np.uint8), "bool": ("BOOL", np.bool_),
}
_BY_ST = {v[0]: (k, v[1]) for k, v in _DTYPES.items()}


def _tensor_bytes(t):
    import torch
    t = t.detach().cpu().contiguous()
    name = str(t.dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError(f"dtype {t.dtype} cannot go into safetensors here")
    st, npd = _DTYPES[name]
    if name == "bfloat16":
        arr = t.view(torch.int16).numpy().view(np.uint16)
    else:
        arr = t.numpy()
    return st, list(t.shape), arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def save_file(tensors, path, metadata=None):
    """Writes {name: torch.Tensor} (in dict order) to path atomically (temporary file, fsync, rename)."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        st, shape, b = _tensor_bytes(t)
        header[name] = {"dtype": st, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_file(path, with_metadata=False):
    """Reads a safetensors file into an ordered {name: torch.Tensor} (file order of the data)."""
    import torch
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for safetensors")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        tname, npd = _BY_ST[e["dtype"]]
        b, en = e["data_offsets"]
        arr = np.frombuffer(data, dtype=np.dtype(npd).newbyteorder("<"), count=(en - b) // np.dtype(npd).itemsize,
                            offset=base + b).copy().reshape(e["shape"])
        t = torch.from_numpy(arr)
        if tname == "bfloat16":
            t = t.view(torch.int16).view(torch.bfloat16) if t.numel() else torch.zeros(e["shape"], dtype=torch.bfloat16)
        out[name] = t
    return (out, meta) if with_metadata else out


def _state_dict_of(obj):
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        return obj["state_dict"]
    if isinstance(obj, dict) and "model" in obj and isinstance(obj["model"], dict):
        return obj["model"]
    if hasattr(obj, "state_dict"):
        return obj.state_dict()
    return obj


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", nargs="?", help=".pth state_dict (or .safetensors with --reverse)")
    ap.add_argument("dst", help="output file (never overwritten)")
    ap.add_argument("--reverse", action="store_true", help="safetensors -> torch.save(state_dict)")
    ap.add_argument("--model", help="instead of SRC: a freshly initialized torchvision model (resnet18 ... resnet152)")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    import torch
    if os.path.exists(a.dst):
        sys.exit(f"error: {a.dst} already exists; not overwriting it")
    if a.reverse:
        if not a.src:
            sys.exit("error: --reverse needs SRC")
        sd = load_file(a.src)
        torch.save(sd, a.dst)
    else:
        if a.model:
            import torchvision
            torch.manual_seed(a.seed)
            sd = getattr(torchvision.models, a.model)(num_classes=a.classes).state_dict()
        elif a.src:
            sd = _state_dict_of(torch.load(a.src, map_location="cpu"))
        else:
            sys.exit("error: give SRC or --model")
        bad = [k for k, v in sd.items() if not torch.is_tensor(v)]
        if bad:
            sys.exit(f"error: not tensors: {', '.join(bad[:5])}")
        save_file(sd, a.dst, {"format": "pt"})
    print(f"{a.dst}: {len(sd)} tensors")


if __name__ == "__main__":
    main()
