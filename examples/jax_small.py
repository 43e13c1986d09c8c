"""jax_small: a small real-GPU JAX job for scripts/gpu-check.sh.

A tiny MLP trained for a few steps with plain SGD on seeded random data, then a few large matmuls;
prints the peak memory as JAX's device sees it and the final loss. Run it plain, and under gpuarena:
    LD_PRELOAD=build/lib/libgpuarena.so XLA_PYTHON_CLIENT_ALLOCATOR=platform python3 examples/jax_small.py
With XLA_PYTHON_CLIENT_ALLOCATOR=platform every buffer reaches the driver and so gpuarena; without
it gpuarena sees XLA's single 75% preallocation. Exits 0 on success, 1 on error.
"""
import sys


def main(steps=20, width=1024):
    import jax
    import jax.numpy as jnp

    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        print("jax_small: no GPU device visible to JAX", file=sys.stderr)
        return 1
    k1, k2, k3, kx = jax.random.split(jax.random.PRNGKey(0), 4)
    params = [jax.random.normal(k, shape) * 0.02 for k, shape in
              ((k1, (width, width)), (k2, (width, width)), (k3, (width, 10)))]
    x = jax.random.normal(kx, (256, width))
    y = jax.nn.one_hot(jnp.arange(256) % 10, 10)

    def loss_fn(p):
        h = jax.nn.relu(x @ p[0])
        h = jax.nn.relu(h @ p[1])
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ p[2]) * y, axis=-1))

    @jax.jit
    def step(p):
        loss, g = jax.value_and_grad(loss_fn)(p)
        return [w - 0.05 * gw for w, gw in zip(p, g)], loss

    for _ in range(steps):
        params, loss = step(params)
    a = jax.random.normal(k1, (4096, 4096))
    for _ in range(4):
        a = jnp.tanh(a @ a / 64.0)
    checksum = float(a.sum())
    stats = gpus[0].memory_stats() or {}
    print(f"jax_small: loss {float(loss):.4f}, matmul checksum {checksum:.3f}, "
          f"peak in use {stats.get('peak_bytes_in_use', 0) >> 20} MiB, "
          f"limit {stats.get('bytes_limit', 0) >> 20} MiB")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # XLA reports CUDA errors (with their names) as XlaRuntimeError
        print(f"jax_small: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
