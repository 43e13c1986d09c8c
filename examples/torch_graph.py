"""CUDA graphs through gpuarena on a real GPU (the capture rules of issue "Stream-ordered safety"),
for scripts/gpu-check.sh.

A graph captured once, whose temporaries are allocated and freed inside the capture, is replayed
three times after its input changed; each replay must give what the same work gives eagerly. With
PyTorch's default allocator the temporaries come from its private graph pool (cudaMalloc, which
gpuarena's pools serve); with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync they are
cudaMallocAsync/cudaFreeAsync inside the capture, graph memory that gpuarena passes to the driver
uncounted (a pool block there would be reused while the graph's launches still write it).
The simulated driver runs no graph: these rows are the only check of that rule on a GPU.
Prints one line per replay and a last line; exit 0 right, 1 wrong, 2 no GPU.
"""
import sys

import torch

if not torch.cuda.is_available():
    print("torch_graph: no GPU")
    sys.exit(2)
n = 1 << 22
x = torch.arange(n, device="cuda", dtype=torch.float32)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):  # warm-up on a side stream before the capture, as PyTorch asks
        out = ((x * 2) + 1).sum()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    t = x * 2  # temporaries allocated inside the capture
    u = t + 1
    out = u.sum()
    del t, u  # and freed inside it
bad = 0
for rnd in range(3):
    x.add_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    want = float(((x * 2) + 1).sum().item())
    got = float(out.item())
    wrong = abs(got - want) > 1e-5 * abs(want)
    bad += wrong
    print(f"torch_graph: replay {rnd}: {got:.6g} against {want:.6g} eagerly"
          f"{' (wrong)' if wrong else ''}", flush=True)
print(f"torch_graph: {'wrong' if bad else 'right'} ({3 - bad} of 3 replays right)")
sys.exit(1 if bad else 0)
