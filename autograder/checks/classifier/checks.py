"""Hidden checks of notebook 07 (the Yelp review classifier): masked_mean_pool and TransformerClassifier.

Each `check_<name>(obj)` receives the student's object as a `RemoteObject` (it lives in the student's kernel, see
`kit/remote.py`), runs it there on inputs chosen here, compares what comes back (data) with the reference in
`solutions` computed here, names the most likely mistake when the values differ (`mistakes.py`), and raises
`AssertionError` with a message for the student. A passing check is silent.

train_one_epoch and evaluate have their own module, `training.py`; the trained model's check
(`check_trained_classifier`) has `trained.py`. Failures come from `toolkit.fail`: a diagnosed mistake is named by
its id in `coursekit.mistakes`.
"""
from __future__ import annotations

import torch

from autograder.checks.kit.criteria import argument
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.classifier import mistakes as M
from autograder.checks.kit.toolkit import (
    call, construct, expect_callable, expected_got, fail, kind_of, seeded, start_check,
)
from autograder.checks.kit.compare import (
    as_tensor, describe, diagnose, expect_dropout_acts, expect_shape, from_table, max_difference, values_close,
)
from autograder.checks.kit.draws import generator as seeded_generator, pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import ProbeBroken, StudentError, hidden_check


# ---------------------------------------------------------------------------------------------------- helpers
def fail_expected(what: str, expected: str, got: str, mistake: str | None = None, hint: str | None = None):
    """`toolkit.fail` with this notebook's `expected:` / `got:` lines; `mistake` is a catalogue id."""
    fail(what, details=expected_got(expected, got), mistake=mistake, hint=hint)


def _check_tensor(name: str, out, shape: tuple[int, ...]) -> torch.Tensor:
    """A float tensor of `shape` with finite values (the toolkit's type and shape checks, then these two)."""
    out = as_tensor(out, f"{name}'s result")
    expect_shape(out, shape, f"{name}'s result")
    if not out.is_floating_point():
        fail_expected(f"{name} must return floating-point values.", "a float tensor", str(out.dtype))
    if not bool(torch.isfinite(out).all()):
        fail_expected(f"{name} returned NaN or inf values.", "finite values", "NaN/inf",
                      hint="a division by a count of zero or a log of 0 gives NaN/inf.")
    return out.detach()


def _lengths_mask(lengths: list[int], device) -> torch.Tensor:
    positions = torch.arange(max(lengths), device=device)  # (T,)
    return positions[None, :] < torch.tensor(lengths, device=device)[:, None]  # (B, T) bool


def padded_review_ids(lengths: list[int], vocab_size: int, pad_id: int, generator: torch.Generator) -> torch.Tensor:
    """(B, max(lengths)) ids with post-padding, drawn from `generator`; real tokens never equal pad_id, and with
    pad_id != 0 the first token is a real 0 (it tells a hard-coded pad id apart)."""
    ids = torch.randint(0, vocab_size - 1, (len(lengths), max(lengths)), generator=generator)
    ids = ids + (ids >= pad_id).long()  # skip pad_id
    if pad_id != 0:
        ids[0, 0] = 0
    mask = _lengths_mask(lengths, "cpu")
    return ids.masked_fill(~mask, pad_id)


# ---------------------------------------------------------------------------------------------------- pooling
def _unchanged(echoed, sent: torch.Tensor) -> bool:
    return isinstance(echoed, torch.Tensor) and echoed.shape == sent.shape and echoed.dtype == sent.dtype and \
        bool(torch.equal(echoed.to(sent.device), sent))


@hidden_check
def check_masked_mean_pool(masked_mean_pool) -> None:
    """masked_mean_pool(x (B, T, d), mask (B, T) bool) -> (B, d): mean over the real positions only."""
    device = start_check()
    expect_callable(masked_mean_pool, "masked_mean_pool")
    generator = seeded_generator(707)
    pool_cases = pick("classifier.pool_cases", [
        (([9, 5, 2, 7], 6), ([3, 3, 1], 4)), (([8, 3, 6, 1], 5), ([4, 2, 4], 3)), (([7, 7, 2, 4, 5], 4), ([2, 1], 6)),
        (([10, 4, 1], 7), ([5, 5, 2, 3], 5)), (([6, 2, 5, 3], 3), ([3, 1, 3], 8))])
    for lengths, d in pool_cases:
        x = torch.randn(len(lengths), max(lengths), d, generator=generator).to(device)  # (B, T, d)
        mask = _lengths_mask(lengths, device)  # (B, T)
        shape = (len(lengths), d)
        label = f"masked_mean_pool(x {tuple(x.shape)}, mask {tuple(mask.shape)} bool)"
        echoed = call(label, masked_mean_pool, x, mask, _echo_args=True)  # (out, args after the call, kwargs)
        if not (isinstance(echoed, tuple) and len(echoed) == 3 and isinstance(echoed[1], tuple)
                and len(echoed[1]) == 2):
            fail(f"{label} could not be checked: the kernel's reply was not understood.")
        out, (x_after, mask_after), _ = echoed
        out = _check_tensor("masked_mean_pool", out, shape)
        if not (_unchanged(x_after, x) and _unchanged(mask_after, mask)):
            fail_expected("masked_mean_pool changed its inputs in place.", "x and mask unchanged", "modified",
                          mistake="pool.in_place")
        expected = reference("classifier").masked_mean_pool(x, mask)
        if not values_close(out, expected, device):
            mistake = diagnose(out, lambda x=x, mask=mask: from_table(
                M.TABLE, lambda variant, switches: variant(x, mask, **switches), M.ids_of(M.pool)), device)
            fail_expected(f"masked_mean_pool(x {tuple(x.shape)}, mask {tuple(mask.shape)}) gives wrong values "
                          f"(real lengths per row: {lengths}).",
                          f"shape {shape}, the mean over the positions where mask is True",
                          f"values differ by up to {max_difference(out.float(), expected):.3g}", mistake)


# ---------------------------------------------------------------------------------------------------- model
def _linear_shape(info: dict, name: str) -> tuple[int, ...] | None:
    """The weight shape (out, in) of submodule `name` when it is an nn.Linear (by its type name), else None."""
    modules = {str(n): str(t) for n, t in info.get("modules", [])}
    parameters = {str(n): tuple(s) for n, s, _dtype in info.get("parameters", [])}
    if not modules.get(name, "").endswith("Linear") or f"{name}.weight" not in parameters:
        return None
    return parameters[f"{name}.weight"]


def _shown(info: dict, name: str) -> str:
    modules = {str(n): str(t) for n, t in info.get("modules", [])}
    if name not in modules:
        return "None"
    shape = _linear_shape(info, name)
    return f"{modules[name]}(in_features={shape[1]}, out_features={shape[0]})" if shape and len(shape) == 2 \
        else modules[name]


@hidden_check
@given_working_parts("transformer_classifier")
def check_transformer_classifier(TransformerClassifier) -> None:
    """Architecture equal to the reference (by weight copy), padding excluded, padding-invariant logits."""
    device = start_check()
    info = kind_of(TransformerClassifier, "TransformerClassifier")
    if not info.get("module_class"):
        fail_expected("TransformerClassifier must be a class deriving from nn.Module.",
                      "class TransformerClassifier(nn.Module)", str(info.get("type", "?"))[:80])
    solution = reference("classifier")

    # the contract's defaults: num_classes=5, d_model=64
    default = construct(TransformerClassifier, "TransformerClassifier", vocab_size=30)
    described = describe(default, "TransformerClassifier(vocab_size=30)")
    if _linear_shape(described, "classifier") != (5, 64):
        fail_expected("TransformerClassifier(vocab_size=30) must use the defaults num_classes=5, d_model=64.",
                      "classifier = nn.Linear(64, 5)", _shown(described, "classifier"))

    generator = seeded_generator(7007)
    cases = pick("classifier.model_cases", [   # the second case: pad_id != 0 (a hard-coded 0 shows)
        [dict(vocab_size=31, num_classes=5, d_model=12, num_heads=3, d_ff=20, num_layers=2, max_len=16, pad_id=0),
         dict(vocab_size=23, num_classes=4, d_model=10, num_heads=2, d_ff=14, num_layers=1, max_len=12, pad_id=3)],
        [dict(vocab_size=29, num_classes=3, d_model=8, num_heads=2, d_ff=24, num_layers=2, max_len=14, pad_id=0),
         dict(vocab_size=19, num_classes=6, d_model=12, num_heads=4, d_ff=16, num_layers=1, max_len=16, pad_id=2)],
        [dict(vocab_size=27, num_classes=4, d_model=18, num_heads=3, d_ff=12, num_layers=1, max_len=20, pad_id=0),
         dict(vocab_size=25, num_classes=5, d_model=8, num_heads=4, d_ff=20, num_layers=2, max_len=13, pad_id=5)],
        [dict(vocab_size=33, num_classes=5, d_model=16, num_heads=4, d_ff=28, num_layers=2, max_len=18, pad_id=0),
         dict(vocab_size=21, num_classes=3, d_model=14, num_heads=2, d_ff=10, num_layers=1, max_len=12, pad_id=1)]])
    lengths = pick("classifier.model_lengths", [[8, 5, 3], [7, 2, 5], [6, 4, 8, 3], [8, 6, 2]])  # max 8 <= max_len-4

    # the core: every optional argument at its default (pad_id 0, dropout 0.1 switched off by eval mode)
    for config in cases:
        _try_classifier(TransformerClassifier, solution, {**config, "pad_id": 0}, lengths, generator, device)
    # pad_id: the padding of the second case is another id (a real token 0 tells a hard-coded 0 apart)
    with argument("TransformerClassifier.pad_id"):
        for config in cases:
            if config["pad_id"] != 0:
                _try_classifier(TransformerClassifier, solution, config, lengths, generator, device)
    # dropout: dropout=0.0 in training mode drops nothing (the logits of eval mode), dropout=0.5 drops something
    with argument("TransformerClassifier.dropout"):
        config = {**cases[0], "pad_id": 0}
        for dropout in (0.0, 0.5):
            _try_classifier_dropout(TransformerClassifier, solution, config, lengths, generator, device, dropout)


def _try_classifier(TransformerClassifier, solution, config: dict, lengths: list[int], generator, device) -> None:
    """Build `TransformerClassifier(**config)`, load the reference's weights, run it on padded ids in eval mode and
    compare with the reference; more padding appended changes nothing."""
    model, ref_model, description = _build_classifier(TransformerClassifier, solution, config, device)
    call(f"{description}.eval()", model.attr("eval"))
    ids = padded_review_ids(lengths, config["vocab_size"], config["pad_id"], generator).to(device)  # (B, T)
    shape = (len(lengths), config["num_classes"])
    with torch.no_grad():
        expected = ref_model(ids)  # eval mode
    logits = _check_tensor("TransformerClassifier.forward", call(
        f"{description}.forward(ids {tuple(ids.shape)})", model, ids, _no_grad=True, _seed=13), shape)
    longer = torch.cat([ids, torch.full((len(lengths), 4), config["pad_id"], device=device)], dim=1)  # (B, T+4)
    logits_longer = _check_tensor("TransformerClassifier.forward", call(
        f"{description}.forward(ids {tuple(longer.shape)})", model, longer, _no_grad=True), shape)
    if not values_close(logits, expected, device):
        mistake = diagnose(logits, lambda: from_table(
            M.TABLE, lambda variant, switches: variant(ref_model, ids, config["pad_id"], **switches),
            M.ids_of(M.classifier)), device)
        fail_expected(f"{description}: logits differ from the reference with the same weights "
                      f"(ids {tuple(ids.shape)} with real lengths {lengths}, pad_id={config['pad_id']}).",
                      f"logits of shape {shape}", "different values", mistake)
    if not values_close(logits_longer, logits, device):
        fail_expected(f"{description}: the logits change when more padding is appended.",
                      "padding to a longer length changes nothing", "different logits",
                      "classifier.padding_not_excluded")


def _try_classifier_dropout(TransformerClassifier, solution, config: dict, lengths: list[int], generator, device,
                            dropout: float) -> None:
    """`TransformerClassifier(**config, dropout=dropout)` with the reference's weights on padded ids: in training
    mode the logits of eval mode for dropout=0.0 (nothing is dropped), other logits for dropout=0.5; back in eval
    mode the reference's (the toolkit's expect_dropout_acts, training mode first)."""
    model, ref_model, description = _build_classifier(TransformerClassifier, solution, config, device, dropout)
    ids = padded_review_ids(lengths, config["vocab_size"], config["pad_id"], generator).to(device)  # (B, T)
    shape = (len(lengths), config["num_classes"])
    with torch.no_grad():
        expected = ref_model(ids)  # eval mode

    def forward(tested, seed):  # seeded in training mode only
        mode = "" if seed is None else " in training mode"
        return _check_tensor("TransformerClassifier.forward", call(
            f"{description}{mode}.forward(ids {tuple(ids.shape)})", model, ids, _no_grad=True, _seed=seed), shape)

    expect_dropout_acts(model, description, forward, expected, device, tested=f"ids {tuple(ids.shape)}",
                        hint="pass dropout on to Encoder(..., dropout) instead of a fixed value.", p=dropout,
                        eval_first=False, seed=13, what="logits")


def _build_classifier(TransformerClassifier, solution, config: dict, device, dropout: float | None = None):
    """`TransformerClassifier(**config)` (with `dropout` when given) with the contract's architecture, on `device`,
    holding the reference's weights (parameters and buffers): (model, the reference in eval mode, description)."""
    signature = ", ".join(f"{k}={v}" for k, v in config.items())
    extra = {} if dropout is None else {"dropout": dropout}
    description = f"TransformerClassifier({signature}{'' if dropout is None else f', dropout={dropout}'})"
    with seeded(11):
        ref_model = solution.TransformerClassifier(**config, **extra).to(device).eval()
    model = construct(TransformerClassifier, "TransformerClassifier", **config, **extra)
    described = describe(model, description)
    modules = {str(n): str(t) for n, t in described.get("modules", [])}
    if "encoder" not in modules:
        fail_expected(f"{description} has no submodule `encoder` of type Module.", "self.encoder = Encoder(...)",
                      "None")
    if _linear_shape(described, "classifier") is None:
        fail_expected(f"{description} has no submodule `classifier` of type Linear.",
                      "self.classifier = nn.Linear(d_model, num_classes)", _shown(described, "classifier"))
    theirs = {str(n): tuple(s) for n, s, *_ in [*described.get("parameters", []), *described.get("buffers", [])]}
    contract = {n: tuple(t.shape) for n, t in [*ref_model.named_parameters(), *ref_model.named_buffers()]}
    if set(contract) != set(theirs):
        missing, extra_names = sorted(set(contract) - set(theirs))[:4], sorted(set(theirs) - set(contract))[:4]
        fail_expected(f"{description}: the parameters do not match the contract's architecture.",
                      "encoder = Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout), "
                      "classifier = nn.Linear(d_model, num_classes)",
                      f"missing {missing}, unexpected {extra_names}")
    for key, shape in contract.items():
        if theirs[key] != shape:
            fail_expected(f"{description}: parameter `{key}` has the wrong shape.", str(shape), str(theirs[key]))
    call(f"{description}.to(device)", model.attr("to"), device)
    state = {k: v.detach().clone() for k, v in ref_model.state_dict().items()}  # parameters and buffers
    try:
        model.load_state(state)
    except StudentError as error:
        fail(f"{description}: could not load the grader's weights into your module.",
             details=[f"{error.type_name}: {' '.join(error.message.split())[:200]}"])
    except ProbeBroken as error:
        fail(f"{description} could not be checked: {error}.")
    return model, ref_model, description

