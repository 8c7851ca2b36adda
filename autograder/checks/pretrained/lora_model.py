"""Hidden check of notebook 11's `add_lora`: the model it is tried on, what it must change, and its judgement
(`check_add_lora` in lora.py calls `judge_add_lora`); split from lora.py, which judges `LoRALinear` itself."""
from __future__ import annotations

import copy
import numbers

import torch
from torch import nn

from autograder.checks.kit.compare import expect_tensor, from_table
from autograder.checks.kit.draws import pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.toolkit import call, expected_got, fail, grader_step, randn
from autograder.checks.pretrained import mistakes_lora as M
from autograder.checks.pretrained.features import shown_config, state_of
from coursekit.tolerance import ROTARY_LOOSER

DEFAULT_RANK = 8                           # the contract's default rank
RANKS = [3, 2, 4, 5]                       # never the default 8
ALPHAS = [6.0, 3.0, 12.0, 5.0, 24.0]       # never the default 16; alpha / rank never alpha


def add_lora_config() -> dict:
    """This submission's model: 3 blocks, 4 query heads over 2 key/value heads (w_k and w_v half as wide as w_q and
    w_o), sizes different from each other and from the defaults."""
    return {"vocab_size": pick("add_lora.vocab", [19, 17, 23, 29]), "d_model": pick("add_lora.d_model", [24, 48, 40]),
            "num_heads": 4, "num_kv_heads": 2, "d_ff": pick("add_lora.d_ff", [20, 36, 44]), "num_layers": 3,
            "max_len": pick("add_lora.max_len", [16, 12, 14])}


def add_lora_arguments() -> dict[str, dict]:
    """{criterion: the arguments passed}, this submission's: each argument with teeth alone, at another value than
    its default (the core passes none)."""
    return {"add_lora.rank": {"rank": pick("add_lora.rank", RANKS)},
            "add_lora.alpha": {"alpha": pick("add_lora.alpha", [4.0, 6.0, 32.0, 2.0])},
            "add_lora.targets": {"targets": pick("add_lora.targets", [("w_k", "w_o"), ("w_q", "w_k", "w_o"), ("w_o",),
                                                                      ("w_k",), ("w_v", "w_o")])},
            "add_lora.blocks": {"blocks": pick("add_lora.blocks", [[0, 2], [1], [2, 0], [2], [0, 1]])}}


def _shown_kwargs(kwargs: dict) -> str:
    return "".join(f", {k}={v!r}" for k, v in kwargs.items())


def _where(layout) -> str:
    return ", ".join(f"blocks.{i}.attn.{name}" for i, name in sorted(layout)) or "none"


class _Reference:
    """The grader's copy of the model before add_lora, and what each known mistake (a row of M.TABLE) leaves in it."""

    def __init__(self, plain: nn.Module, kwargs: dict):
        self.plain, self.kwargs, self._done = plain, kwargs, {}

    def run(self, variant, switches) -> dict:
        key = (variant, tuple(sorted(switches.items())))
        if key not in self._done:
            model = copy.deepcopy(self.plain)
            count = variant(model, **self.kwargs, **switches)
            self._done[key] = {"count": count, "model": model, **M.lora_layout(model.state_dict(keep_vars=True))}
        return self._done[key]

    def rows(self):
        return from_table(M.TABLE, self.run, M.lora_ids_of(M.add_lora_variant))


def _count(got, tested: str) -> int:
    if isinstance(got, bool) or not isinstance(got, numbers.Integral):
        fail("add_lora must return the number of trainable parameters, an int.", tested=tested,
             details=[f"got a {type(got).__name__}"],
             hint="return sum(p.numel() for p in model.parameters() if p.requires_grad)")
    return int(got)


def _expect_layout(got_layout: dict, count: int, expected: dict, known: _Reference, rank: int,
                   tested: str) -> None:
    """Where the adapters are, the parameters, what is trainable, the adapters' ranks, the count: each against the
    reference, a difference named by the first row of the table whose result differs the same way."""
    def named(aspect, value):
        return next((mistake_id for mistake_id, produce in known.rows().items()
                     if produce()[aspect] == value), None)

    if got_layout["adapted"] != expected["adapted"]:
        fail("add_lora put adapters on other linears than the ones asked for.", tested=tested,
             details=expected_got(_where(expected["adapted"]), _where(got_layout["adapted"])),
             mistake=named("adapted", got_layout["adapted"]),
             hint="replace model.blocks[i].attn.<name> for each listed block i and each name in targets, with "
                  "LoRALinear(that linear, rank, alpha)")
    if got_layout["parameters"] != expected["parameters"]:
        differing = sorted(got_layout["parameters"] ^ expected["parameters"])
        fail("after add_lora the model's parameters are not those of LoRALinear adapters in place of the targets.",
             tested=tested, details=[f"first difference: {differing[0]} "
                                     f"({'missing' if differing[0] in expected['parameters'] else 'unexpected'})"],
             mistake=named("parameters", got_layout["parameters"]),
             hint="each adapter is LoRALinear(that linear, rank, alpha), holding base, lora_A and lora_B")
    missing = sorted(name for name in expected["trainable"] if name not in got_layout["trainable"])
    extra = sorted(name for name in got_layout["trainable"] if name not in expected["trainable"])
    if missing or extra:
        problem = (f"add_lora left {len(extra)} parameters trainable that must be frozen (e.g. {extra[0]})."
                   if extra else f"the adapters' parameters are not trainable (e.g. {missing[0]}).")
        fail(problem, tested=tested, mistake=named("trainable", got_layout["trainable"]),
             hint="freeze every parameter of the model first; the new adapters' lora_A and lora_B stay trainable")
    if got_layout["ranks"] != expected["ranks"]:
        ranks = sorted(set(got_layout["ranks"].values()))
        fail("the adapters have another rank than the one asked for.", tested=tested,
             details=expected_got(f"rank {rank} (lora_A of {rank} rows)", f"rank {', '.join(map(str, ranks))}"),
             mistake=named("ranks", got_layout["ranks"]))
    if count != expected["count"]:
        fail("add_lora returned a wrong number of trainable parameters.", tested=tested,
             details=expected_got(f"{expected['count']} (rank * (in_features + out_features) per adapter)",
                                  str(count)),
             mistake="add_lora.wrong_count")


def _adapter_values(layout: dict, config: dict, rank_of: dict, seed: int, device) -> dict:
    """Values the grader draws for every adapter's lora_A (r, in) and lora_B (out, r), by state_dict name."""
    d_model = config["d_model"]
    width = {"w_q": d_model, "w_o": d_model,
             "w_k": config["num_kv_heads"] * d_model // config["num_heads"]}
    width["w_v"] = width["w_k"]
    values = {}
    for k, (i, name) in enumerate(sorted(layout)):
        r, prefix = rank_of[(i, name)], f"blocks.{i}.attn.{name}."
        out_f = width[name]
        values[prefix + "lora_A"] = randn(r, d_model, seed=seed + 2 * k, device=device) * 0.5
        values[prefix + "lora_B"] = randn(out_f, r, seed=seed + 2 * k + 1, device=device) * 0.5
    return values


def judge_add_lora(add_lora, kernel, plain: nn.Module, config: dict, kwargs: dict, ids, seed: int, device) -> None:
    """add_lora(a kernel copy of `plain`, **kwargs): the count, the layout, the logits before and with the grader's
    adapter values, against the reference's add_lora on the grader's copy."""
    solution = reference("pretrained")
    tested = f"add_lora(a small {shown_config(config)}{_shown_kwargs(kwargs)})"
    model = kernel.modern_gpt(config, state_of(plain), "cpu")
    count = _count(call("add_lora", add_lora, model, tested=tested, **kwargs), tested)
    call("model.to(device)", model.attr("to"), device)
    call("model.eval()", model.attr("eval"))
    state = call("the model's state_dict(keep_vars=True) after add_lora", model.attr("state_dict"), keep_vars=True,
                 tested=tested)
    if not isinstance(state, dict):
        fail("the model's state_dict could not be read back after add_lora.", tested=tested)
    local = copy.deepcopy(plain)
    expected = {"count": solution.add_lora(local, **kwargs), **M.lora_layout(local.state_dict(keep_vars=True))}
    known = _Reference(plain, kwargs)
    _expect_layout(M.lora_layout(state), count, expected, known, kwargs.get("rank", DEFAULT_RANK), tested)
    local.eval()
    with torch.no_grad():
        before = plain(ids)
    got = call("the model's forward", model, ids.clone(), _no_grad=True, tested=f"{tested}, then model(ids)")
    expect_tensor(got, before, "the model's logits right after add_lora", device, tested=f"{tested}, then model(ids)",
                  looser=ROTARY_LOOSER, note="every lora_B starts at zeros: right after add_lora the model computes "
                                             "what it computed before")
    values = _adapter_values(expected["adapted"], config, expected["ranks"], seed, device)
    _missing, unexpected = grader_step("loading the grader's values into the adapters",
                                      lambda: model.load_state(values))
    if unexpected:
        fail("the adapters' lora_A and lora_B could not be set.", tested=tested, details=unexpected[:3])
    expected_logits = M.adapted_logits(local, ids, values)
    shown = f"{tested}, the adapters' lora_A and lora_B set to other values, then model(ids)"
    got = call("the model's forward", model, ids.clone(), _no_grad=True, tested=shown)

    def mistakes():
        return {mistake_id: (lambda produce=produce: M.adapted_logits(produce()["model"].eval(), ids, values))
                for mistake_id, produce in known.rows().items()}

    expect_tensor(got, expected_logits, "the adapted model's logits", device, tested=shown, looser=ROTARY_LOOSER,
                  mistakes=mistakes, note="each adapter is LoRALinear(that linear, rank, alpha): it adds "
                                          "(alpha / rank) * x A^T B^T")
