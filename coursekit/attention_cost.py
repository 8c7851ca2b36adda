"""What attention costs: time and memory of a plain attention (03's) against F.scaled_dot_product_attention.

    rows = measure(scaled_dot_product_attention, [64, 128, 256], device)   # one dict per length
    print(markdown(rows))

Both compute causal self-attention of one sequence with `heads` heads of width `d_head`. The plain one builds the
(T, T) score and weight matrices of every head; PyTorch's fused kernel (flash or memory-efficient attention on a
GPU, a blocked kernel on the CPU) never holds them whole. Memory is the peak allocated on CUDA
(`torch.cuda.max_memory_allocated`) and, on the CPU, what the call allocates in total (torch's profiler), beyond the
inputs.
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

__all__ = ["measure", "markdown", "score_bytes"]


def score_bytes(T: int, heads: int, batch: int = 1, dtype=torch.float32) -> int:
    """Bytes of one (batch, heads, T, T) matrix: what the plain attention holds twice (scores and weights)."""
    return batch * heads * T * T * torch.finfo(dtype).bits // 8


def _synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _seconds(call, device, repeats: int) -> float:
    call()                                            # warm-up (kernel choice, allocator)
    _synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _bytes(call, device) -> int:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        call()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated(device) - before
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    return sum(max(event.self_cpu_memory_usage, 0) for event in prof.events())


def measure(plain_attention, lengths, device, heads: int = 4, d_head: int = 32, batch: int = 1,
            repeats: int = 3, memory: bool = True) -> list[dict]:
    """One row per length T: milliseconds and MiB of `plain_attention(q, k, v, causal mask)` and of
    F.scaled_dot_product_attention(q, k, v, is_causal=True), and their largest difference. `memory=False` skips
    the memory measurement (None in the rows): the CPU profiler it needs is slow and chatty."""
    rows = []
    generator = torch.Generator().manual_seed(0)
    for T in lengths:
        q, k, v = (torch.randn(batch, heads, T, d_head, generator=generator).to(device) for _ in range(3))
        mask = torch.ones(T, T, dtype=torch.bool, device=device).tril()
        with torch.no_grad():
            plain = lambda: plain_attention(q, k, v, mask)[0]                        # noqa: E731
            fused = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
            difference = float((plain() - fused()).abs().max())
            rows.append({"T": T, "device": str(torch.device(device).type),
                         "plain_ms": 1000 * _seconds(plain, device, repeats),
                         "fused_ms": 1000 * _seconds(fused, device, repeats),
                         "plain_mb": _bytes(plain, device) / 2 ** 20 if memory else None,
                         "fused_mb": _bytes(fused, device) / 2 ** 20 if memory else None,
                         "score_matrix_mb": score_bytes(T, heads, batch) / 2 ** 20, "max_difference": difference})
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| T | plain attention (ms) | F.sdpa (ms) | plain (MiB) | F.sdpa (MiB) | one T x T matrix (MiB) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        mib = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        lines.append(f"| {r['T']} | {r['plain_ms']:.2f} | {r['fused_ms']:.2f} | {mib(r['plain_mb'])} | "
                     f"{mib(r['fused_mb'])} | {r['score_matrix_mb']:.1f} |")
    return "\n".join(lines)
