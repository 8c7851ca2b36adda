"""Public instruments that the grader (and the notebook's self-check) attach to a Transformer's decoder to see how
often each key/value projection runs.

`ProjectionRecorder(model)` replaces every decoder layer's `self_attn.w_k`, `self_attn.w_v`, `cross_attn.w_k` and
`cross_attn.w_v` by a `StatefulProjection` around the same `nn.Linear`, and registers a forward hook on each that
records how many positions every call projected (`counts()`, as data).

A `StatefulProjection` returns `linear(x)` plus a small offset that depends on WHICH positions it is projecting:

    mode="count"     the offset of a projected position depends on how many positions this module has projected
                     before it (its running count), so projecting a position a second time gives it other keys and
                     values than the first time;
    mode="position"  the offset depends on the position's index inside the call (0 .. T-1).

A decoder that projects every position exactly once, in order, gives each position p the same offset in both modes
(its running count is p), so its tokens in "count" mode equal the tokens of plain step-by-step decoding in
"position" mode. A decoder that recomputes a prefix, or projects the memory again, shifts its offsets and usually
generates other tokens. Nothing here is an answer to an exercise: it only wraps the modules you wrote.
"""
from __future__ import annotations

import torch
from torch import nn

PROJECTIONS = ("self_attn.w_k", "self_attn.w_v", "cross_attn.w_k", "cross_attn.w_v")


def _offsets(index: torch.Tensor, width: int, seed: int, scale: float, dtype) -> torch.Tensor:
    """(n,) position indices -> (n, width) offsets: scale * sin(index * freq + phase), fixed by `seed`."""
    generator = torch.Generator().manual_seed(seed)
    freq = 0.3 + 1.7 * torch.rand(width, generator=generator, dtype=torch.float64)
    phase = 6.283185307179586 * torch.rand(width, generator=generator, dtype=torch.float64)
    angles = index.to("cpu", torch.float64)[:, None] * freq[None, :] + phase[None, :]
    return (scale * torch.sin(angles)).to(dtype=dtype, device=index.device)


class StatefulProjection(nn.Module):
    """`linear(x)` plus an offset per projected position (see the module's docstring); x is (..., T, d_in)."""

    def __init__(self, linear: nn.Module, scale: float = 1.0, seed: int = 0, mode: str = "count"):
        super().__init__()
        if mode not in ("count", "position"):
            raise ValueError(f"mode must be 'count' or 'position', got {mode!r}")
        self.linear = linear
        self.scale, self.seed, self.mode = float(scale), int(seed), mode
        self.seen = 0                                                    # positions projected so far

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        n = x.shape[-2] if x.dim() >= 2 else 1
        start = self.seen if self.mode == "count" else 0
        index = torch.arange(start, start + n, device=y.device)
        self.seen += n
        offset = _offsets(index, y.shape[-1], self.seed, self.scale, y.dtype)   # (n, d_out)
        return y + offset if x.dim() >= 2 else y + offset[0]


class ProjectionRecorder:
    """Wraps the key/value projections of every layer of `model.decoder.layers` and records the positions that each
    call projected. `counts()` -> {"decoder.layers.<i>.<projection>": [positions of call 1, call 2, ...]}."""

    def __init__(self, model: nn.Module, scale: float = 1.0, mode: str = "count", seed: int = 0):
        self.calls: dict[str, list[int]] = {}
        self._handles = []
        for index, layer in enumerate(model.decoder.layers):
            for number, path in enumerate(PROJECTIONS):
                attn_name, proj_name = path.split(".")
                attn = getattr(layer, attn_name)
                linear = getattr(attn, proj_name)
                name = f"decoder.layers.{index}.{path}"
                wrapped = StatefulProjection(linear, scale, seed=seed + 97 * index + 13 * number, mode=mode)
                setattr(attn, proj_name, wrapped)
                self.calls[name] = []
                self._handles.append(wrapped.register_forward_hook(self._hook(name)))

    def _hook(self, name: str):
        def record(module, inputs, output):
            x = inputs[0]
            self.calls[name].append(int(x.shape[-2]) if x.dim() >= 2 else 1)
        return record

    def counts(self) -> dict[str, list[int]]:
        return {name: list(calls) for name, calls in self.calls.items()}

    def remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
