"""The model backend's speed against numpy FP32 attention on MiniLM's shape, as a ratio.

    $PY python/examples/speed.py [--check] [TOKENS ...]

(1, 12, S, 32) FP16 inputs; numpy's attention in FP32 on the same CPU, two ways: with einsum,
and with matmul (numpy's BLAS, the faster: the ratio to quote). A shape's first call also runs
the cycle model for the report; later calls reuse it. The model backend's default skips the
accuracy references (``check=False``); ``--check`` times ``FlashAttention(check=True)``: the
same output, checked against the f64 and plain FP16 references.
"""

import sys
import time

import numpy as np

import regflash

D = 32


def numpy_attention(q, k, v, blas=True):
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    if blas:
        s = (q @ k.swapaxes(-1, -2)) / np.float32(np.sqrt(D))
    else:
        s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.float32(np.sqrt(D))
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return p @ v if blas else np.einsum("bhqk,bhkd->bhqd", p, v)


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main(argv):
    check = "--check" in argv
    for s in [int(a) for a in argv if a != "--check"] or [128, 512, 1024]:
        rng = np.random.default_rng(s)
        q, k, v = (rng.standard_normal((1, 12, s, D)).astype(np.float16) for _ in range(3))
        fa = regflash.FlashAttention(D, check=check)
        first = timed(lambda: fa(q, k, v))
        again = min(timed(lambda: fa(q, k, v)) for _ in range(3))
        ref = min(timed(lambda: numpy_attention(q, k, v)) for _ in range(5))
        ein = min(timed(lambda: numpy_attention(q, k, v, blas=False)) for _ in range(5))
        print(
            f"S={s}: numpy matmul {ref * 1e3:.1f} ms, einsum {ein * 1e3:.1f} ms; model first "
            f"call {first * 1e3:.0f} ms ({first / ref:.1f}x matmul, {first / ein:.1f}x einsum), "
            f"again {again * 1e3:.0f} ms ({again / ref:.1f}x matmul, {again / ein:.1f}x einsum)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
