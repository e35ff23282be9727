"""The model backend's speed against numpy FP32 attention on MiniLM's shape, as a ratio.

    target/pyenv/bin/python python/examples/speed.py [TOKENS ...]

(1, 12, S, 32) FP16 inputs; numpy's attention in FP32 (einsum, softmax) on the same CPU.
A shape's first call also runs the cycle model for the report; later calls reuse it.
"""

import sys
import time

import numpy as np

import regflash

D = 32


def numpy_attention(q, k, v):
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.float32(np.sqrt(D))
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, v)


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main(argv):
    for s in [int(a) for a in argv] or [128, 512, 1024]:
        rng = np.random.default_rng(s)
        q, k, v = (rng.standard_normal((1, 12, s, D)).astype(np.float16) for _ in range(3))
        fa = regflash.FlashAttention(D)
        first = timed(lambda: fa(q, k, v))
        again = min(timed(lambda: fa(q, k, v)) for _ in range(3))
        ref = min(timed(lambda: numpy_attention(q, k, v)) for _ in range(5))
        print(
            f"S={s}: numpy {ref * 1e3:.1f} ms; model first call {first * 1e3:.0f} ms "
            f"({first / ref:.1f}x), again {again * 1e3:.0f} ms ({again / ref:.1f}x)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
