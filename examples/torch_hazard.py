"""Reuse-after-free hazard on a real GPU (issue "Stream-ordered safety"), for scripts/gpu-check.sh.

With PyTorch's cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1) every tensor freed is a cudaFree, which
reaches gpuarena. A slow chain of kernels on a side stream writes buffer A; the program drops A (a
cudaFree while the kernels are still queued), allocates B of the same size, fills it with 2.0 on a
second stream and waits for that stream only. If B got A's bytes while the side stream was still
writing, B reads back the side stream's 1.0. The driver's own cudaFree waits for the device, and so
must gpuarena (GPUARENA_FREE_SYNC=deferred or device); with GPUARENA_FREE_SYNC=none it may not.
Prints one line; exit 0 intact, 1 corrupted, 2 no GPU.
"""
import sys

try:
    import torch
except ImportError as e:  # exit 1 means corrupted: a machine without PyTorch said that
    print(f"torch_hazard: no PyTorch ({e}); nothing was checked")
    sys.exit(2)

if not torch.cuda.is_available():
    print("torch_hazard: no GPU")
    sys.exit(2)
n = 64 << 20  # floats: 256 MiB
side, writer = torch.cuda.Stream(), torch.cuda.Stream()
src = torch.ones(n, device="cuda")
torch.cuda.synchronize()
bad = 0
for rnd in range(5):
    a = torch.empty(n, device="cuda")
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.current_stream())
        for _ in range(40):  # a long queue of copies into A
            a.copy_(src)
    a_ptr = a.data_ptr()
    del a  # cudaFree while the side stream still writes A
    with torch.cuda.stream(writer):
        b = torch.empty(n, device="cuda")
        b.fill_(2.0)
    writer.synchronize()
    torch.cuda.synchronize()
    wrong = int((b != 2.0).sum().item())
    bad += wrong > 0
    print(f"torch_hazard: round {rnd}: B {'reused' if b.data_ptr() == a_ptr else 'did not reuse'} "
          f"A's address, {wrong} wrong floats", flush=True)
    del b
print(f"torch_hazard: {'corrupted' if bad else 'intact'} ({bad} of 5 rounds)")
sys.exit(1 if bad else 0)
