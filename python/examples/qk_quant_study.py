"""A design study for INT8/INT4 QKᵀ: which scale granularity keeps attention's error
small on real Q/K/V, before the format is built in the model and the RTL.

Not regflash's arithmetic: numpy, with Q and K rounded to FP16 (the core's input format), then
quantized symmetrically to INT8 or INT4 (round to nearest, clamp), S = the integer dot product
times both scales times 1/√d, the softmax and P·V in f64. The error is against the same
attention with FP16 Q and K (unquantized), so it is the quantizer's alone.

    $PY python/examples/qk_quant_study.py

Inputs: all-MiniLM-L6-v2's Q/K/V of all six layers on the 32 sentences of minilm.py (its
encoder, FP32 attention), and three hard cases: the same with four K channels scaled ×20 or
offset by 20 max|K| (outlier channels: spread, or a bias every token shares), and random rows
4,096 long. Granularities: per tensor, per token (a
scale per row of Q and of K), per block (a scale per 16 rows, `medium`'s Br = Bc), and per
block after subtracting K's mean over the tokens (SageAttention's smoothing: each query's
scores shift by one constant, which the softmax ignores), and Q per token with K per block,
smoothed: the granularity whose scales fold into the row engine's existing multiply by C (a
query row's scale per row, a K block's per block), with no multiply per score. For the embeddings, the whole
encoder runs with each quantizer and the cosine against FP32 is given.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from minilm import SENTENCES, MiniLM, fp32_attention  # noqa: E402

BLOCK = 16


def quantize(x: np.ndarray, bits: int, groups: np.ndarray) -> np.ndarray:
    """x (rows, d) quantized symmetrically with one scale per group of rows (`groups` gives
    each row's group), returned dequantized (the integers times their scale)."""
    top = 2 ** (bits - 1) - 1
    out = np.empty_like(x)
    for g in np.unique(groups):
        rows = groups == g
        m = np.abs(x[rows]).max()
        scale = m / top if m > 0 else 1.0
        out[rows] = np.clip(np.rint(x[rows] / scale), -top, top) * scale
    return out


def granularity(name: str, n: int) -> np.ndarray:
    if name == "tensor":
        return np.zeros(n, dtype=int)
    if name == "token":
        return np.arange(n)
    return np.arange(n) // BLOCK  # block, block+smooth


def attention(q, k, v):
    """One head: (n, d) each, f64 softmax."""
    s = q @ k.T / math.sqrt(q.shape[1])
    s -= s.max(1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(1, keepdims=True)) @ v


def quantized(q, k, v, bits: int, how: str):
    q, k, v = (x.astype(np.float16).astype(np.float64) for x in (q, k, v))
    if how == "none":
        return attention(q, k, v)
    if how.endswith("smooth"):
        k = k - k.mean(0, keepdims=True)
    q_how, k_how = ("token", "block") if how == "q token, k block+smooth" else (how, how)
    qq = quantize(q, bits, granularity(q_how, len(q)))
    kq = quantize(k, bits, granularity(k_how, len(k)))
    return attention(qq, kq, v)


HOWS = ["tensor", "token", "block", "block+smooth", "q token, k block+smooth"]


def study(heads, bits: int):
    """Max |O − O_fp16| / max |V| over the heads, per granularity."""
    rows = {}
    for how in HOWS:
        worst = 0.0
        for q, k, v in heads:
            ref = quantized(q, k, v, bits, "none")
            got = quantized(q, k, v, bits, how)
            worst = max(worst, np.abs(got - ref).max() / np.abs(v).max())
        rows[how] = worst
    return rows


def main() -> int:
    m = MiniLM()
    captured = []

    def capture(q, k, v, cu):
        for a, b in zip(cu, cu[1:]):
            for h in range(q.shape[1]):
                captured.append((q[a:b, h], k[a:b, h], v[a:b, h]))
        return fp32_attention(q, k, v, cu)

    ref = m.embed(SENTENCES, capture)
    # Outlier channels two ways: four K channels scaled (a spread no shift removes), and four
    # K channels offset by a constant shared by every token (a bias, as LLMs' outlier channels
    # are, which smoothing removes).
    scaled, biased = [], []
    for q, k, v in captured:
        ks, kb = k.copy(), k.copy()
        ks[:, :4] *= 20
        kb[:, :4] += 20 * np.abs(k).max()
        scaled.append((q, ks, v))
        biased.append((q, kb, v))
    rng = np.random.default_rng(0)
    long_rows = [tuple(rng.standard_normal((4096, 32)) for _ in range(3)) for _ in range(2)]
    cases = [
        ("MiniLM Q/K/V (6 layers x 12 heads x 32 sentences)", captured),
        ("MiniLM, four K channels x20", scaled),
        ("MiniLM, four K channels + 20 max|K| (a bias)", biased),
        ("random N(0,1), 4,096 keys", long_rows),
    ]
    print("max |O - O_fp16| / max |V|, quantized Q and K against FP16 Q and K\n")
    print("| inputs | bits | " + " | ".join(HOWS) + " |")
    print("|---|---:|" + "---:|" * len(HOWS))
    for name, heads in cases:
        for bits in (8, 4):
            r = study(heads, bits)
            print(f"| {name} | {bits} | " + " | ".join(f"{r[h]:.2e}" for h in HOWS) + " |")

    print("\nall-MiniLM-L6-v2 embeddings with every attention's Q and K quantized, against FP32\n")
    print("| bits | granularity | min cosine | same nearest neighbour |")
    print("|---:|---|---:|---:|")
    ref_nn = np.argsort(-(ref @ ref.T - 2 * np.eye(len(ref))), axis=1)[:, 0]
    for bits in (8, 4):
        for how in HOWS:

            def attend(q, k, v, cu, bits=bits, how=how):
                out = np.empty_like(q)
                for a, b in zip(cu, cu[1:]):
                    for h in range(q.shape[1]):
                        out[a:b, h] = quantized(q[a:b, h], k[a:b, h], v[a:b, h], bits, how)
                return out

            e = m.embed(SENTENCES, attend)
            nn = np.argsort(-(e @ e.T - 2 * np.eye(len(e))), axis=1)[:, 0]
            cos = (ref * e).sum(1).min()
            print(f"| {bits} | {how} | {cos:.5f} | {int((nn == ref_nn).sum())} of {len(e)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
