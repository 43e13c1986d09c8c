"""torch_small: a small real-GPU PyTorch job for scripts/gpu-check.sh.

A tiny MLP trained for a few steps on random data (seeded), then a few large matmuls; prints the
peak memory as PyTorch sees it, the final loss and the time a training step took (with the cache
off every step's tensors go through gpuarena, so its fence shows there). Run it plain, and under
gpuarena:
    LD_PRELOAD=build/lib/libgpuarena.so PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 examples/torch_small.py
PYTORCH_NO_CUDA_MEMORY_CACHING=1 sends every tensor to cudaMalloc, so gpuarena sees each one (the
fair comparison); without it gpuarena sees PyTorch's own segments. Exits 0 on success, 1 on error.
"""
import sys
import time


def main(steps=20, width=1024):
    import torch

    if not torch.cuda.is_available():
        print("torch_small: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, width, device=dev)
    y = torch.randint(0, 10, (256,), device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t0) * 1e3 / steps
    a = torch.randn(4096, 4096, device=dev)
    for _ in range(4):
        a = torch.tanh(a @ a / 64.0)
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(f"torch_small: loss {loss.item():.4f}, matmul checksum {a.sum().item():.3f}, "
          f"{step_ms:.2f} ms a step, "
          f"peak allocated {torch.cuda.max_memory_allocated() >> 20} MiB, "
          f"peak reserved {torch.cuda.max_memory_reserved() >> 20} MiB, "
          f"mem_get_info free {free >> 20} of {total >> 20} MiB")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a CUDA error surfaces here as RuntimeError with the CUDA error name
        print(f"torch_small: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
