"""CUDA-graph timing shared by the GDN benchmarks (``gdn_bench.py`` and the two probes).

A graph replays the launches without the host in between, so a timing measures the GPU, not Python or
the launch path: the peers' Python wrappers cost more than their kernels at small sizes.
"""

from __future__ import annotations

import statistics

import torch

UNTIMED_REPLAYS = 3


def graph_ms(fn, *, calls: int = 1, replays: int = 20) -> float:
    """Median milliseconds per call of ``fn``, which makes ``calls`` calls.

    ``fn`` runs once on a side stream first (compilation, autotuning, the allocator's first blocks), is
    captured in one CUDA graph, replayed ``UNTIMED_REPLAYS`` times, then ``replays`` times between two
    events each; the result is the median replay divided by ``calls``.
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(UNTIMED_REPLAYS):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return statistics.median(times) / calls
