"""One reference per exercise: each source notebook's solution cells and solutions/ define the same thing.

The instructor's notebook (course/source/NN_x/NN_x.ipynb, the code between `### BEGIN SOLUTION` and
`### END SOLUTION`) and the reference package (solutions/<topic>.py) are two texts of each exercise's answer. This
test keeps them one answer:

* `CHECKED_BY[name] == "code"`: the two definitions are the same code. Their syntax trees are compared after
  dropping docstrings, comments and type annotations (the notebook shows students no annotations).
* `CHECKED_BY[name] == "behaviour"`: the two are different texts of the same behaviour, checked on generated inputs
  with fixed seeds (`SCENARIOS`): the same outputs, and for classes the same submodules and the same parameter
  names, shapes and initial values (built under the same seed), in eval mode and, where there is dropout, in train
  mode under the same seed. Every "behaviour" exercise says why its texts differ (`WHY_DIFFERENT`): mostly, the
  reference checks its inputs (bad input gets a clear error) where the notebook keeps the answer short, or it is
  written for the grader's needs (e.g. `greedy_decode` uses the reference's key/value cache).

Every exercise is checked by behaviour, "code" ones in addition by their syntax trees. Outputs must be equal,
bit for bit, except where `TOLERANCE` names an exercise and says why.

The notebook's definitions run in a namespace made of the notebook's own top-level imports (`from provided import
X` becomes `from solutions import X`: provided.py is generated from solutions/) and its solution cells, in order.
"""
from __future__ import annotations

import ast
import copy
import math
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

import solutions
from coursekit import api

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "course" / "source"

CHECKED_BY = {
    "build_vocab": "behaviour",
    "encode": "behaviour",
    "pad_batch": "behaviour",
    "TokenEmbedding": "behaviour",
    "embedding_matrix_from_word2vec": "behaviour",
    "attention_over_words": "behaviour",
    "sinusoidal_positional_encoding": "behaviour",
    "PositionalEncoding": "behaviour",
    "LearnedPositionalEmbedding": "behaviour",
    "make_padding_mask": "behaviour",
    "make_causal_mask": "code",
    "scaled_dot_product_attention": "behaviour",
    "split_heads": "behaviour",
    "merge_heads": "behaviour",
    "MultiHeadAttention": "behaviour",
    "PositionwiseFeedForward": "code",
    "EncoderBlock": "behaviour",
    "Encoder": "code",
    "DecoderBlock": "behaviour",
    "Decoder": "code",
    "Transformer": "code",
    "greedy_decode": "behaviour",
    "cached_greedy_decode": "behaviour",
    "masked_mean_pool": "behaviour",
    "TransformerClassifier": "code",
    "train_one_epoch": "behaviour",
    "evaluate": "behaviour",
    "train_bpe": "code",
    "bpe_encode": "code",
    "bpe_decode": "code",
    "GPT": "code",
    "get_batch": "code",
    "lm_loss": "code",
    "estimate_loss": "code",
    "lr_at": "code",
    "train_step": "code",
    "sample_next_token": "code",
    "generate": "code",
    # 09
    "RMSNorm": "code",
    "rotary_cos_sin": "behaviour",
    "apply_rotary": "behaviour",
    "SwiGLU": "code",
    "GroupedQueryAttention": "behaviour",
    "LlamaBlock": "code",
    "ModernGPT": "code",
    # 10: each solution cell is the reference's code
    "label_smoothed_cross_entropy": "code",
    "noam_lr": "code",
    "beam_search": "code",
    "corpus_bleu": "code",
    # 11: each solution cell is the reference's code (its helpers included)
    "dequantize_q4_1": "code",
    "llama_state_dict": "code",
    "cached_forward": "code",
    "cached_generate": "code",
    "LoRALinear": "code",
    "add_lora": "code",
    "final_hidden": "code",
}

# Why the two texts of a "behaviour" exercise differ (both are the course's answer; neither is wrong).
VALIDATES = "the reference also refuses bad input with a clear error"
WHY_DIFFERENT = {
    "build_vocab": VALIDATES + " (a plain string); otherwise the same steps in other words",
    "encode": VALIDATES + " (a vocabulary without <unk>)",
    "pad_batch": VALIDATES + " (max_len < 0)",
    "TokenEmbedding": VALIDATES + " (padding_idx outside the vocabulary)",
    "embedding_matrix_from_word2vec": VALIDATES + " (ids that are not 0..len(vocab)-1)",
    "attention_over_words": VALIDATES + " (unknown words, no keys)",
    "sinusoidal_positional_encoding": "the reference computes the angles in float64, the notebook in float32",
    "PositionalEncoding": "the reference casts the table to the input's dtype",
    "LearnedPositionalEmbedding": VALIDATES + " (T > max_len: ValueError rather than IndexError)",
    "make_padding_mask": VALIDATES + " (ids that are not (B, T))",
    "scaled_dot_product_attention": "the same steps in other words",
    "split_heads": VALIDATES + " (shape, d_model % num_heads)",
    "merge_heads": VALIDATES + " (shape)",
    "MultiHeadAttention": "the reference calls scaled_dot_product_attention, the notebook writes it out so the "
                          "dropout on the weights is visible",
    "EncoderBlock": "the sublayer helper is a method in the reference, a closure in the notebook",
    "DecoderBlock": "the sublayer helpers are methods in the reference, closures in the notebook",
    "greedy_decode": "the reference decodes with its key/value cache (use_cache=True), validates its arguments and "
                     "restores the model's training mode; the notebook recomputes the whole prefix each step",
    "cached_greedy_decode": "the reference shares one cached decoding loop with greedy_decode; the notebook writes "
                            "the cache out in one function",
    "masked_mean_pool": VALIDATES + " (mask shape)",
    "train_one_epoch": VALIDATES + " (a loader with no batches)",
    "evaluate": VALIDATES + " (a loader with no examples); @torch.no_grad() against `with torch.no_grad()`",
    "rotary_cos_sin": VALIDATES + " (max_len < 0)",
    "apply_rotary": VALIDATES + " (tables that do not match x's length and width)",
    "GroupedQueryAttention": "the same steps in other words (the notebook slices the tables inline)",
}

# Exercises whose outputs may differ by rounding, and why. Everything else must be equal bit for bit.
# The notebook's float32 angle p / 10000**(2i/d_model) is rounded by up to about p * 2**-24 radians: 3e-5 at the
# default table's last position (511), measured 2.8e-5; at the hidden check's sizes (max_len <= 16) under 1e-6.
TOLERANCE = {
    "sinusoidal_positional_encoding": (dict(rtol=0, atol=512 * 2**-24), "float64 against float32 angles"),
    "PositionalEncoding": (dict(rtol=0, atol=512 * 2**-24), "its table is sinusoidal_positional_encoding's"),
}


# ----------------------------------------------------------------------------------------------------------------
# The notebooks' definitions

def _solution_cells(assignment: str) -> list[str]:
    cells = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4).cells
    return [cell.source for cell in cells if cell.cell_type == "code" and "### BEGIN SOLUTION" in cell.source]


def _imports(assignment: str) -> str:
    """The notebook's top-level import statements outside its solution cells (but its checks'), provided ->
    solutions."""
    cells = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4).cells
    lines = []
    for cell in cells:
        if cell.cell_type != "code" or "### BEGIN SOLUTION" in cell.source:
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.ImportFrom) and node.module == "provided":
                node = ast.ImportFrom(module="solutions", names=node.names, level=0)
            if isinstance(node, ast.ImportFrom) and node.module.startswith(("coursekit.checks", "coursekit.probe")):
                continue  # the self-check and grade cells' imports: not what the answers use
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                lines.append(ast.unparse(node))
    return "\n".join(lines)


_NAMESPACES: dict[str, dict] = {}


def notebook_namespace(assignment: str) -> dict:
    """The names a notebook defines in its solution cells, run after its imports (cached per notebook)."""
    if assignment not in _NAMESPACES:
        namespace: dict = {"__name__": f"notebook_{assignment}"}
        exec(compile(_imports(assignment), f"{assignment}:imports", "exec"), namespace)
        for number, source in enumerate(_solution_cells(assignment)):
            exec(compile(source, f"{assignment}:solution-cell-{number}", "exec"), namespace)
        _NAMESPACES[assignment] = namespace
    return _NAMESPACES[assignment]


def notebook_definition(entry: api.ApiEntry) -> ast.AST:
    for source in _solution_cells(entry.notebook):
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == entry.name:
                return node
    raise LookupError(f"{entry.notebook} defines no {entry.name} in its solution cells")


def reference_definition(entry: api.ApiEntry) -> ast.AST:
    tree = ast.parse((REPO / "solutions" / f"{entry.topic}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == entry.name:
            return node
    raise LookupError(f"solutions/{entry.topic}.py defines no {entry.name}")


def normalised(node: ast.AST) -> str:
    """The syntax tree without docstrings and annotations (comments are not in it)."""
    node = copy.deepcopy(node)
    for child in ast.walk(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = child.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                child.body = body[1:] or [ast.Pass()]
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            child.returns = None
        if isinstance(child, ast.arg):
            child.annotation = None
    return ast.dump(node, include_attributes=False)


# ----------------------------------------------------------------------------------------------------------------
# Comparing results

def module_report(module: torch.nn.Module) -> dict:
    """What a freshly built module is: its submodules (name, class name) and its parameters and buffers."""
    return {"submodules": [(name, type(sub).__name__) for name, sub in module.named_modules()],
            "state": {name: value.detach().clone() for name, value in module.state_dict().items()}}


def assert_same(ours, theirs, where="result", tolerance=None):
    """Equal nested results: tensors (dtype, shape, values), arrays, numbers, strings, containers."""
    if isinstance(ours, torch.Tensor):
        assert isinstance(theirs, torch.Tensor), f"{where}: a tensor against {type(theirs).__name__}"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape), (
            f"{where}: {ours.dtype}{tuple(ours.shape)} against {theirs.dtype}{tuple(theirs.shape)}")
        if tolerance and ours.is_floating_point():
            torch.testing.assert_close(ours, theirs, **tolerance, msg=lambda m: f"{where}: {m}")
        else:
            assert torch.equal(ours, theirs), f"{where}: the values differ (max |diff| " \
                f"{(ours.double() - theirs.double()).abs().max().item() if ours.numel() else 0})"
    elif isinstance(ours, np.ndarray):
        assert isinstance(theirs, np.ndarray) and ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        assert np.array_equal(ours, theirs), f"{where}: the values differ"
    elif isinstance(ours, dict):
        assert isinstance(theirs, dict), f"{where}: a dict against {type(theirs).__name__}"
        assert list(ours) == list(theirs), f"{where}: keys {list(ours)} against {list(theirs)}"
        for key in ours:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]", tolerance)
    elif isinstance(ours, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), f"{where}: {ours!r} against {theirs!r}"
        for index, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{index}]", tolerance)
    elif isinstance(ours, float):
        assert isinstance(theirs, float), f"{where}: a float against {type(theirs).__name__}"
        assert ours == theirs or (math.isnan(ours) and math.isnan(theirs)), f"{where}: {ours} against {theirs}"
    else:
        assert type(ours) is type(theirs) and ours == theirs, f"{where}: {ours!r} against {theirs!r}"


def raised(call) -> str:
    """The name of the exception `call()` raises, or "no error"."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the type is the result
        return type(error).__name__
    return "no error"


# ----------------------------------------------------------------------------------------------------------------
# Scenarios: fn(get) -> result, where get(name) is the notebook's or the reference's definition of `name`.

def _seeded(seed):
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def _ids(generator, B, T, vocab, pad_lengths=()):
    ids = torch.randint(4, vocab, (B, T), generator=generator)
    for row, length in enumerate(pad_lengths):
        ids[row, length:] = 0
    return ids


def _build_and_run(cls, args, inputs, call=lambda m, *x: m(*x), dropout_seeds=(11,)):
    """Build under seed 0; the fresh module, then its output in eval mode and in train mode per dropout seed."""
    torch.manual_seed(0)
    module = cls(*args)
    report = module_report(module)
    module.eval()
    with torch.no_grad():
        report["eval"] = call(module, *inputs)
    module.train()
    for seed in dropout_seeds:
        torch.manual_seed(seed)
        with torch.no_grad():
            report[f"train@{seed}"] = call(module, *inputs)
    return report


def scenario_build_vocab(get):
    build_vocab = get("build_vocab")
    texts = [["the", "cat", "sat"], ["the", "dog", "sat", "down"], ["a", "cat", "<unk>", "the"], []]
    return [list(build_vocab(texts).items()), list(build_vocab(texts, min_freq=2).items()),
            list(build_vocab(iter(texts), min_freq=3, specials=("<pad>", "<unk>")).items()),
            list(build_vocab([["b", "a", "b", "a", "c"]]).items())]


def scenario_encode(get):
    vocab = solutions.build_vocab([["the", "cat", "sat"], ["the", "dog"]])
    return [get("encode")(tokens, vocab) for tokens in (["the", "cat"], ["a", "dog", "the", "zebra"], [])]


def scenario_pad_batch(get):
    pad_batch = get("pad_batch")
    sequences = [[5, 6, 7], [8], [9, 10, 11, 12, 13], [4, 4]]
    return [pad_batch(sequences), pad_batch(sequences, pad_id=1), pad_batch(sequences, max_len=3),
            pad_batch(sequences, pad_id=2, max_len=7), pad_batch([(4, 5), range(6, 9)]), pad_batch([])]


def scenario_TokenEmbedding(get):
    generator = _seeded(1)
    ids = torch.randint(0, 11, (3, 5), generator=generator)
    return [_build_and_run(get("TokenEmbedding"), (11, 8, padding), (ids,)) for padding in (None, 0, 4)]


def _keyed_vectors():
    from gensim.models import KeyedVectors

    rng = np.random.default_rng(5)
    vectors = KeyedVectors(vector_size=6)
    words = ["good", "great", "bad", "awful", "food", "service"]
    vectors.add_vectors(words, rng.normal(size=(len(words), 6)).astype(np.float32))
    return vectors


def scenario_embedding_matrix_from_word2vec(get):
    vocab = solutions.build_vocab([["good", "food", "zebra"], ["bad", "service", "good"]])
    return get("embedding_matrix_from_word2vec")(vocab, _keyed_vectors())


def scenario_attention_over_words(get):
    attend = get("attention_over_words")
    vectors = _keyed_vectors()
    return [attend("good", ["great", "bad", "food"], vectors), attend("service", ["service"], vectors),
            attend("awful", ["good", "great", "bad", "awful", "food"], vectors)]


def scenario_sinusoidal_positional_encoding(get):
    encoding = get("sinusoidal_positional_encoding")
    return [encoding(1, 2), encoding(7, 4), encoding(50, 16), encoding(512, 64),
            raised(lambda: encoding(10, 5))]


def scenario_PositionalEncoding(get):
    cls = get("PositionalEncoding")
    x = torch.randn(2, 7, 8, generator=_seeded(2))
    runs = [_build_and_run(cls, (8, 20, dropout), (x,)) for dropout in (0.0, 0.3)]
    runs.append(_build_and_run(cls, (8,), (x,)))
    torch.manual_seed(0)
    runs.append(raised(lambda: cls(8, 5)(x)))
    return runs


def scenario_LearnedPositionalEmbedding(get):
    x = torch.randn(3, 6, 8, generator=_seeded(3))
    return _build_and_run(get("LearnedPositionalEmbedding"), (10, 8), (x,))


def scenario_make_padding_mask(get):
    make = get("make_padding_mask")
    ids = _ids(_seeded(4), 3, 6, 20, pad_lengths=(6, 2, 0))
    return [make(ids), make(ids, pad_id=5), make(ids[:, :0])]


def scenario_make_causal_mask(get):
    make = get("make_causal_mask")
    return [make(0), make(1), make(5), make(3, device=torch.device("cpu")), make(4, None)]


def scenario_scaled_dot_product_attention(get):
    attend = get("scaled_dot_product_attention")
    generator = _seeded(5)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=generator), torch.randn(2, 3, 6, 4, generator=generator),
               torch.randn(2, 3, 6, 7, generator=generator))
    padding = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)[:, None, None, :]
    causal = torch.ones(5, 6, dtype=torch.bool).tril(1)
    q3, k3, v3 = q[0], k[0], v[0]
    return [attend(q, k, v), attend(q, k, v, padding), attend(q, k, v, causal), attend(q, k, v, padding.int()),
            attend(q3, k3, v3), attend(q3[0], k3[0], v3[0], causal), attend(q.double(), k.double(), v.double())]


def scenario_split_heads(get):
    x = torch.randn(2, 5, 12, generator=_seeded(6))
    return [get("split_heads")(x, heads) for heads in (1, 2, 3, 4, 12)]


def scenario_merge_heads(get):
    x = torch.randn(2, 3, 5, 4, generator=_seeded(7))
    return [get("merge_heads")(x), get("merge_heads")(x.transpose(2, 3))]


def _attention_inputs(seed, d_model=8):
    generator = _seeded(seed)
    x = torch.randn(2, 5, d_model, generator=generator)
    memory = torch.randn(2, 7, d_model, generator=generator)
    keep = torch.tensor([[1] * 7, [1] * 4 + [0] * 3], dtype=torch.bool)[:, None, None, :]
    return x, memory, keep


def scenario_MultiHeadAttention(get):
    cls = get("MultiHeadAttention")
    x, memory, keep = _attention_inputs(8)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    runs = []
    for args in ((8, 2), (8, 4, 0.25), (8, 1, 0.0, False)):
        runs.append(_build_and_run(cls, args, (x, x, x, causal)))
        runs.append(_build_and_run(cls, args, (x, memory, memory, keep)))
        runs.append(_build_and_run(cls, args, (x, memory, memory)))
    runs.append(raised(lambda: cls(8, 3)))
    return runs


def scenario_PositionwiseFeedForward(get):
    x = torch.randn(2, 5, 8, generator=_seeded(9))
    return [_build_and_run(get("PositionwiseFeedForward"), args, (x,)) for args in ((8, 16), (8, 32, 0.3))]


def scenario_EncoderBlock(get):
    x, _, _ = _attention_inputs(10)
    keep = torch.tensor([[1] * 5, [1] * 3 + [0] * 2], dtype=torch.bool)[:, None, None, :]
    return [_build_and_run(get("EncoderBlock"), (8, 2, 16, dropout, norm_first), (x, keep))
            for dropout in (0.0, 0.2) for norm_first in (False, True)]


def scenario_Encoder(get):
    ids = _ids(_seeded(12), 3, 6, 30, pad_lengths=(6, 4, 1))
    keep = (ids != 0)[:, None, None, :]
    return [_build_and_run(get("Encoder"), (30, 8, 2, 16, layers, 12, dropout, norm_first), (ids, keep))
            for layers, dropout, norm_first in ((1, 0.0, False), (2, 0.2, True), (2, 0.1, False))]


def scenario_DecoderBlock(get):
    x, memory, keep = _attention_inputs(13)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    return [_build_and_run(get("DecoderBlock"), (8, 2, 16, dropout, norm_first), (x, memory, causal, keep))
            for dropout in (0.0, 0.2) for norm_first in (False, True)]


def scenario_Decoder(get):
    generator = _seeded(14)
    tgt = _ids(generator, 2, 5, 25, pad_lengths=(5, 3))
    memory = torch.randn(2, 7, 8, generator=generator)
    tgt_mask = (tgt != 0)[:, None, None, :] & torch.ones(5, 5, dtype=torch.bool).tril()
    memory_mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3], dtype=torch.bool)[:, None, None, :]
    return [_build_and_run(get("Decoder"), (25, 8, 2, 16, layers, 10, dropout, norm_first),
                           (tgt, memory, tgt_mask, memory_mask))
            for layers, dropout, norm_first in ((1, 0.0, False), (2, 0.2, True))]


def scenario_Transformer(get):
    generator = _seeded(15)
    src = _ids(generator, 3, 6, 20, pad_lengths=(6, 3, 5))
    tgt = _ids(generator, 3, 4, 17, pad_lengths=(4, 4, 2))

    def run_all(model, src, tgt):
        memory, src_mask = model.encode(src)
        return model(src, tgt), memory, src_mask, model.decode(tgt, memory, src_mask)

    runs = [_build_and_run(get("Transformer"), (20, 17), (src, tgt), call=run_all)]
    runs.append(_build_and_run(get("Transformer"), (20, 17, 16, 2, 32, 1, 12, 0.2, 0, True), (src, tgt),
                               call=run_all))
    src_pad5 = src.masked_fill(src == 0, 5)
    runs.append(_build_and_run(get("Transformer"), (20, 17, 8, 2, 16, 2, 12, 0.0, 5), (src_pad5, tgt),
                               call=run_all))
    return runs


def _decoding_models():
    """Reference Transformers (weights drawn 3x wider than the default, so that the tokens vary with the prefix)
    whose greedy decodings stop at <eos> after different numbers of steps, or not at all (see
    test_the_decoding_cases_are_informative)."""
    models = []
    for seed, norm_first, eos_bias in ((1, True, 1.0), (1, False, 0.0), (0, True, 0.0)):
        torch.manual_seed(seed)
        model = solutions.Transformer(20, 15, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16,
                                      dropout=0.1, norm_first=norm_first)
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() > 1:
                    parameter.normal_(0, 3 / parameter.size(-1) ** 0.5)
            model.generator.bias[3] = eos_bias
        models.append(model)
    return models


def _decode_all(decode):
    generator = _seeded(16)
    src = _ids(generator, 4, 7, 20, pad_lengths=(7, 5, 2, 6))
    results = []
    for model in _decoding_models():
        for max_len, bos_id, eos_id in ((10, 2, 3), (0, 2, 3), (12, 4, 5)):
            results.append(decode(model, src, max_len, bos_id=bos_id, eos_id=eos_id))
        results.append(decode(model, src[:1], 6))
    return results


def scenario_greedy_decode(get):
    return _decode_all(get("greedy_decode"))


def scenario_cached_greedy_decode(get):
    return _decode_all(get("cached_greedy_decode"))


def scenario_masked_mean_pool(get):
    generator = _seeded(17)
    x = torch.randn(4, 6, 5, generator=generator)
    mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [0] * 6, [1, 0, 1, 0, 1, 0]], dtype=torch.bool)
    return [get("masked_mean_pool")(x, mask), get("masked_mean_pool")(x.double(), mask)]


def scenario_TransformerClassifier(get):
    ids = _ids(_seeded(18), 4, 9, 40, pad_lengths=(9, 4, 1, 7))
    runs = [_build_and_run(get("TransformerClassifier"), (40,), (ids,))]
    runs.append(_build_and_run(get("TransformerClassifier"), (40, 3, 16, 2, 32, 1, 12, 0.0, 0), (ids,)))
    runs.append(_build_and_run(get("TransformerClassifier"), (40, 5, 8, 2, 16, 2, 12, 0.2, 7),
                               (ids.masked_fill(ids == 0, 7),)))
    return runs


def _classifier_and_batches(seed):
    generator = _seeded(seed)
    batches = []
    for size in (4, 4, 3):
        ids = _ids(generator, size, 8, 30, pad_lengths=[int(n) for n in torch.randint(1, 9, (size,),
                                                                                      generator=generator)])
        batches.append((ids, torch.randint(0, 5, (size,), generator=generator)))
    torch.manual_seed(seed)
    model = solutions.TransformerClassifier(30, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=12)
    return model, batches


def scenario_train_one_epoch(get):
    results = []
    for seed, make_optimizer in ((19, lambda p: torch.optim.SGD(p, lr=0.5)), (20, lambda p: torch.optim.Adam(p))):
        model, batches = _classifier_and_batches(seed)
        optimizer = make_optimizer(model.parameters())
        torch.manual_seed(seed)  # the dropout masks
        losses = [get("train_one_epoch")(model, batches, optimizer, torch.device("cpu")) for _ in range(2)]
        results.append({"losses": losses, "training": model.training, "state": module_report(model)["state"]})
    return results


def scenario_evaluate(get):
    results = []
    for seed in (21, 22):
        model, batches = _classifier_and_batches(seed)
        model.train()
        accuracy = get("evaluate")(model, batches, "cpu")
        results.append({"accuracy": accuracy, "training": model.training, "grad": torch.is_grad_enabled()})
    model, batches = _classifier_and_batches(23)
    with torch.no_grad():
        model.classifier.bias[:] = torch.tensor([0.0, 0.0, 50.0, 0.0, 0.0])  # everything is class 2
    results.append(get("evaluate")(model, batches, torch.device("cpu")))
    return results


_BPE_TEXTS = ("aaabdaaabac", "cdcd abab aaa-bcbc", "naïve café — 日本語 🤖", "", "To be, or not to be " * 5)


def scenario_train_bpe(get):
    return [get("train_bpe")(text, k) for text in _BPE_TEXTS for k in (0, 3, 40)]


def scenario_bpe_encode(get):
    merges = solutions.train_bpe(" ".join(_BPE_TEXTS) * 2, 30)
    return [get("bpe_encode")(text, used) for text in _BPE_TEXTS for used in (merges, merges[:4], [])]


def scenario_bpe_decode(get):
    merges = solutions.train_bpe(" ".join(_BPE_TEXTS) * 2, 30)
    cases = [solutions.bpe_encode(text, merges) for text in _BPE_TEXTS] + [[0xE6, 0x97], [256, 0xC3]]
    return [get("bpe_decode")(ids, merges) for ids in cases]


def scenario_GPT(get):
    ids = _ids(_seeded(24), 3, 9, 30)
    runs = [_build_and_run(get("GPT"), (30, 16, 2, 32, 2, 12), (ids,))]
    runs.append(_build_and_run(get("GPT"), (30, 8, 4, 16, 1, 9, 0.3), (ids,), dropout_seeds=(11, 12)))
    model = get("GPT")(30, 16, 2, 32, 1, 8)
    runs.append(raised(lambda: model(ids)))                          # T = 9 > max_len = 8
    return runs


def scenario_get_batch(get):
    data = torch.arange(100, 160)
    results = [get("get_batch")(data, block, batch, _seeded(25)) for block, batch in ((5, 4), (59, 2), (1, 7))]
    torch.manual_seed(26)
    results.append(get("get_batch")(data, 6, 3))
    return results


def scenario_lm_loss(get):
    generator = _seeded(27)
    return [get("lm_loss")(torch.randn(b, t, v, generator=generator), torch.randint(v, (b, t), generator=generator))
            for b, t, v in ((2, 5, 11), (1, 1, 3))]


def scenario_estimate_loss(get):
    torch.manual_seed(28)
    model = solutions.GPT(13, 8, 2, 16, 1, max_len=8, dropout=0.3)
    data = torch.randint(13, (50,), generator=_seeded(29))
    results = [get("estimate_loss")(model, data, 8, "cpu"), model.training]
    model.eval()
    results += [get("estimate_loss")(model, data[:9], 8, torch.device("cpu")), model.training,
                raised(lambda: get("estimate_loss")(model, data[:8], 8, "cpu"))]
    return results


def scenario_lr_at(get):
    values = [get("lr_at")(step, 1e-3, 10, 100, 1e-4) for step in (0, 5, 9, 10, 50, 99, 100, 200)]
    values += [get("lr_at")(step, 3e-3, 0, 20) for step in (0, 10, 20)]
    return values + [raised(lambda: get("lr_at")(0, 1e-3, 11, 10))]


def scenario_train_step(get):
    torch.manual_seed(35)
    model = solutions.GPT(13, 8, 2, 16, 1, max_len=6)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randint(13, (2, 6), generator=_seeded(36)), torch.randint(13, (2, 6), generator=_seeded(37))
    losses = [get("train_step")(model, optimizer, x, y, lr, *clip) for lr, clip in ((3e-3, ()), (1e-3, (None,)),
                                                                                    (2e-3, (0.1,)))]
    return losses + [dict(model.state_dict()), model.training]


def scenario_sample_next_token(get):
    logits = torch.randn(6, 9, generator=_seeded(30))
    draws = [get("sample_next_token")(logits, 0.0)]
    for temperature, top_k in ((1.0, None), (0.7, 3), (1.3, 20)):
        draws.append(get("sample_next_token")(logits, temperature, top_k, torch.Generator().manual_seed(31)))
    return draws


def scenario_generate(get):
    torch.manual_seed(32)
    model = solutions.GPT(13, 8, 2, 16, 1, max_len=6, dropout=0.2)
    prompt = torch.randint(13, (2, 3), generator=_seeded(33))
    results = [get("generate")(model, prompt, 8, 0.0), model.training]
    results.append(get("generate")(model, prompt, 5, 0.9, 4, torch.Generator().manual_seed(34)))
    return results
def scenario_RMSNorm(get):
    x = torch.randn(2, 5, 8, generator=_seeded(24)) * 0.1 + 0.2
    return [_build_and_run(get("RMSNorm"), args, (x,)) for args in ((8,), (8, 0.05))]


def scenario_rotary_cos_sin(get):
    tables = get("rotary_cos_sin")
    return [tables(7, 4), tables(16, 8, 500.0), tables(0, 2), tables(512, 64), raised(lambda: tables(4, 5))]


def scenario_apply_rotary(get):
    generator = _seeded(25)
    x = torch.randn(2, 3, 6, 8, generator=generator)
    cos, sin = solutions.rotary_cos_sin(6, 8, 100.0)
    return [get("apply_rotary")(x, cos, sin), get("apply_rotary")(x[0, 0], cos, sin),
            get("apply_rotary")(x.double(), cos, sin)]


def scenario_SwiGLU(get):
    x = torch.randn(2, 5, 8, generator=_seeded(26))
    return _build_and_run(get("SwiGLU"), (8, 12), (x,))


def scenario_GroupedQueryAttention(get):
    cls = get("GroupedQueryAttention")
    x, _, keep = _attention_inputs(27, d_model=12)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    keep = keep[..., :5] & causal
    runs = [_build_and_run(cls, args, (x, mask)) for args in ((12, 3, 1), (12, 6, 3, 8, 100.0), (12, 2, 2))
            for mask in (None, causal, keep)]
    runs += [raised(lambda args=args: cls(*args)) for args in ((10, 4, 2), (12, 6, 4), (12, 4, 1))]
    torch.manual_seed(0)
    runs.append(raised(lambda: cls(12, 3, 1, 4)(x)))
    return runs


def scenario_LlamaBlock(get):
    x, _, keep = _attention_inputs(28, d_model=12)
    mask = keep[..., :5] & torch.ones(5, 5, dtype=torch.bool).tril()
    return [_build_and_run(get("LlamaBlock"), args, (x, mask))
            for args in ((12, 3, 1, 20), (12, 6, 2, 16, 9), (12, 2, 1, 16, 9, 500.0, 0.05))]  # rope_base, eps


def scenario_ModernGPT(get):
    ids = _ids(_seeded(29), 3, 7, 25)
    runs = [_build_and_run(get("ModernGPT"), (25, 12, 6, 3, 20, 2, 8), (ids,)),
            _build_and_run(get("ModernGPT"), (25,), (ids,)),
            _build_and_run(get("ModernGPT"), (25, 12, 2, 1, 20, 2, 8, 500.0, 0.05), (ids,))]   # rope_base, eps
    torch.manual_seed(0)
    runs.append(raised(lambda: get("ModernGPT")(25, 12, 6, 3, 20, 1, 6)(ids)))
    return runs


def scenario_label_smoothed_cross_entropy(get):
    loss = get("label_smoothed_cross_entropy")
    generator = _seeded(40)
    logits = torch.randn(9, 11, generator=generator, dtype=torch.float64) * 2          # (N, V)
    targets = torch.randint(1, 11, (9,), generator=generator)
    targets[[1, 4]] = 0
    other = targets.clone()
    other[[0, 5]] = 2
    return [loss(logits, targets), loss(logits, targets, 0.0), loss(logits, other, 0.3, 2),
            loss(logits.float(), targets, 0.1), raised(lambda: loss(logits, targets, 1.0)),
            raised(lambda: loss(logits, targets, -0.1))]


def scenario_noam_lr(get):
    lr = get("noam_lr")
    values = [lr(step, 16, 10) for step in (0, 1, 5, 9, 10, 11, 100, 10_000)]
    values += [lr(step, 512, 4000, 2.0) for step in (1, 4000, 30_000)]
    return values + [raised(lambda: lr(5, 16, 0))]


def scenario_beam_search(get):
    search = get("beam_search")
    torch.manual_seed(41)
    model = solutions.Transformer(13, 11, 8, 2, 16, 1, max_len=24, dropout=0.1)
    sources = [torch.randint(4, 13, (1, length), generator=_seeded(42 + length)) for length in (3, 6)]
    results = []
    for src in sources:
        for beam_size in (1, 2, 5):
            for penalty in (0.0, 0.6, 1.0):
                results.append(search(model, src, beam_size, 8, length_penalty=penalty))
        results.append(search(model, src, 3, 0))
        results.append(search(model, src, 3, 1))
    results.append(model.training)
    return results + [raised(lambda: search(model, sources[0], 0, 5)),
                      raised(lambda: search(model, torch.cat(sources[:1] * 2), 2, 5))]


def scenario_corpus_bleu(get):
    bleu = get("corpus_bleu")
    generator = _seeded(43)
    words = [f"w{i}" for i in range(6)]

    def sentence(length):
        return [words[i] for i in torch.randint(6, (length,), generator=generator).tolist()]

    hypotheses = [sentence(n) for n in (7, 3, 9, 1, 5)]
    references = [sentence(n) for n in (8, 4, 6, 2, 5)]
    return [bleu(hypotheses, references, n) for n in (1, 2, 3, 4)] + [
        bleu(references, references), bleu([[]], [["a"]]), bleu(hypotheses[:2], references[:2]),
        raised(lambda: bleu(hypotheses, references[:3]))]


def _q4_1_blocks(seed, n):
    """n random Q4_1 blocks (n, 20) uint8: finite float16 d and m of both signs, random codes."""
    rng = np.random.default_rng(seed)
    header = rng.normal(0, 0.05, size=(n, 2)).astype("<f2").view(np.uint8)                # (n, 4)
    return np.concatenate([header, rng.integers(0, 256, size=(n, 16), dtype=np.uint8)], axis=1)


def _small_modern_gpt(seed, scale=3.0):
    """A small ModernGPT with non-default rotary base and eps, its blocks' matrices scaled so greedy decoding moves."""
    torch.manual_seed(seed)
    model = solutions.ModernGPT(29, 16, 4, 2, 20, 2, 16, 500.0, 1e-5)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.startswith("blocks.") and parameter.dim() == 2:
                parameter.mul_(scale)
    return model


def _gguf_tensors(model):
    """A ModernGPT's weights under their GGUF names (the reverse of llama_state_dict's table)."""
    names = {"norm1": "attn_norm", "attn.w_q": "attn_q", "attn.w_k": "attn_k", "attn.w_v": "attn_v",
             "attn.w_o": "attn_output", "norm2": "ffn_norm", "ffn.w_gate": "ffn_gate", "ffn.w_up": "ffn_up",
             "ffn.w_down": "ffn_down"}
    tensors = {"token_embd.weight": model.token_embedding.weight.detach().clone(),
               "output_norm.weight": model.norm.weight.detach().clone()}
    for i, block in enumerate(model.blocks):
        state = block.state_dict()
        for ours, theirs in names.items():
            tensors[f"blk.{i}.{theirs}.weight"] = state[f"{ours}.weight"].clone()
    return tensors


def scenario_dequantize_q4_1(get):
    decode = get("dequantize_q4_1")
    raw = _q4_1_blocks(50, 7)
    return [decode(raw), decode(raw[:1]), raised(lambda: decode(raw.astype(np.int16))),
            raised(lambda: decode(raw[:, :18])), raised(lambda: decode(raw.reshape(-1)))]


def scenario_llama_state_dict(get):
    mapping = get("llama_state_dict")
    tensors = _gguf_tensors(_small_modern_gpt(51))
    state = mapping(tensors, 2)
    missing = {k: v for k, v in tensors.items() if k != "blk.1.ffn_up.weight"}
    return [dict(sorted(state.items())), state["lm_head.weight"] is state["token_embedding.weight"],
            raised(lambda: mapping(missing, 2)), raised(lambda: mapping(tensors, 1)),
            raised(lambda: mapping({**tensors, "rope_freqs.weight": torch.ones(3)}, 2))]


def scenario_cached_forward(get):
    step = get("cached_forward")
    model = _small_modern_gpt(52).eval()
    ids = torch.randint(0, 29, (2, 9), generator=_seeded(53))
    with torch.no_grad():
        first, cache = step(model, ids[:, :4])
        second, cache = step(model, ids[:, 4:7], cache)
        third, cache = step(model, ids[:, 7:8], cache)
    return [first, second, third, [list(pair) for pair in cache], model.training,
            raised(lambda: step(model, torch.zeros(1, 17, dtype=torch.long)))]


def scenario_cached_generate(get):
    generate = get("cached_generate")
    model = _small_modern_gpt(54).train()
    prompt = torch.randint(0, 29, (5,), generator=_seeded(55)).tolist()
    plain = generate(model, prompt, 8)
    return [plain, model.training, generate(model, prompt, 8, eos_id=plain[3]), generate(model, prompt[:1], 3)]


def scenario_LoRALinear(get):
    cls = get("LoRALinear")
    x = torch.randn(2, 3, 7, generator=_seeded(56))
    results = []
    for bias, rank, alpha in ((True, 8, 16.0), (False, 3, 6.0)):
        torch.manual_seed(57)
        base = torch.nn.Linear(7, 5, bias=bias)
        lora = cls(base, rank, alpha)
        with torch.no_grad():
            lora.lora_B.copy_(torch.randn(5, rank, generator=_seeded(58)))
            merged = lora.merged()
        results += [module_report(lora), lora.scaling, lora(x).detach(), merged(x).detach(), merged.weight.detach()]
    return results + [raised(lambda: cls(torch.nn.Linear(3, 2), rank=0))]


def scenario_add_lora(get):
    add = get("add_lora")
    results = []
    for kwargs in ({}, {"rank": 3, "alpha": 6.0, "targets": ("w_k", "w_o"), "blocks": [1]}):
        model = _small_modern_gpt(59)
        torch.manual_seed(60)
        results += [add(model, **kwargs), module_report(model)]
    model = _small_modern_gpt(59)
    return results + [raised(lambda: add(model, targets=("w_x",))), raised(lambda: add(model, blocks=[2]))]


def scenario_final_hidden(get):
    hidden = get("final_hidden")
    model = _small_modern_gpt(61)
    ids = torch.randint(0, 29, (2, 6), generator=_seeded(62))
    with torch.no_grad():
        return [hidden(model, ids), model.training]


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items() if name.startswith("scenario_")}


# ----------------------------------------------------------------------------------------------------------------
# Tests

def test_every_exercise_says_how_it_is_checked():
    assert list(CHECKED_BY) == list(api.names())
    assert set(CHECKED_BY.values()) <= {"code", "behaviour"}
    assert set(SCENARIOS) == set(api.names())
    assert {name for name, way in CHECKED_BY.items() if way == "behaviour"} == set(WHY_DIFFERENT)
    assert set(TOLERANCE) <= set(WHY_DIFFERENT)


@pytest.mark.parametrize("name", api.names())
def test_the_notebook_defines_the_exercise_with_the_contracts_signature(name):
    entry = api.by_name(name)
    node = notebook_definition(entry)
    if entry.kind == "class":
        assert isinstance(node, ast.ClassDef), f"{entry.notebook}: {name} is not a class"
        node = next(item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__")
        arguments = copy.deepcopy(node.args)
        arguments.args = arguments.args[1:]  # self
    else:
        assert isinstance(node, ast.FunctionDef), f"{entry.notebook}: {name} is not a function"
        arguments = copy.deepcopy(node.args)
    for argument in arguments.args:
        argument.annotation = None
    expected = ast.parse(f"def f({entry.params}): pass").body[0].args
    assert ast.dump(arguments) == ast.dump(expected), f"{entry.notebook}: {name}({ast.unparse(arguments)})"


@pytest.mark.parametrize("name", [name for name, way in CHECKED_BY.items() if way == "code"] or
                         [pytest.param(None, marks=pytest.mark.skip(reason="no exercise is checked as code"))])
def test_code_exercises_are_the_same_code(name):
    entry = api.by_name(name)
    assert normalised(notebook_definition(entry)) == normalised(reference_definition(entry)), (
        f"{entry.notebook}'s {name} and solutions/{entry.topic}.py's differ beyond docstrings, comments and "
        "annotations; make them the same, or check the exercise by behaviour and say why they differ")


@pytest.mark.parametrize("name", api.names())
def test_the_notebook_and_the_reference_behave_the_same(name):
    entry = api.by_name(name)
    namespace = notebook_namespace(entry.notebook)
    assert name in namespace, f"{entry.notebook}'s solution cells define no {name}"
    assert namespace[name] is not getattr(solutions, name), f"{entry.notebook}'s {name} is the reference itself"
    tolerance = TOLERANCE.get(name, (None, ""))[0]
    theirs = SCENARIOS[name](lambda wanted: getattr(solutions, wanted))
    ours = SCENARIOS[name](lambda wanted: namespace[wanted] if wanted in api.names()
                           and api.by_name(wanted).notebook == entry.notebook else getattr(solutions, wanted))
    assert_same(ours, theirs, f"{entry.notebook}:{name}", tolerance)


def test_the_decoding_cases_are_informative():
    """The decoding scenarios are not degenerate: sequences stop at <eos> after different numbers of steps, some
    never do, and many different tokens come out."""
    decoded = [tokens for tokens in scenario_greedy_decode(lambda wanted: getattr(solutions, wanted))
               if tokens.size(1) >= 10 and tokens.size(0) == 4]
    stops = {None if not (row == 3).any() else int((row == 3).nonzero()[0]) for tokens in decoded for row in tokens}
    assert None in stops and len(stops - {None}) >= 3, stops
    assert len(set(torch.cat(decoded, dim=1).flatten().tolist())) >= 8


def test_a_changed_answer_is_caught():
    """The comparison is not blind: a notebook answer with one deliberate slip differs from the reference."""
    namespace = dict(notebook_namespace("03_attention"))

    def unscaled(query, key, value, mask=None):
        scores = query @ key.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        return weights @ value, weights

    namespace["scaled_dot_product_attention"] = unscaled
    theirs = scenario_scaled_dot_product_attention(lambda wanted: getattr(solutions, wanted))
    ours = scenario_scaled_dot_product_attention(lambda wanted: namespace[wanted])
    with pytest.raises(AssertionError, match="values differ"):
        assert_same(ours, theirs)
    init_changed = scenario_PositionwiseFeedForward(lambda wanted: _ffn_without_bias)
    with pytest.raises(AssertionError):
        assert_same(init_changed, scenario_PositionwiseFeedForward(lambda wanted: getattr(solutions, wanted)))


class _ffn_without_bias(solutions.PositionwiseFeedForward):  # noqa: N801 - a deliberate slip, named as such
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__(d_model, d_ff, dropout)
        self.linear2 = torch.nn.Linear(d_ff, d_model, bias=False)
