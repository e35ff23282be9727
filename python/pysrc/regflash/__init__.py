"""regflash from Python: a register-level FlashAttention NPU as an attention function.

``regflash.FlashAttention(head_dim, causal)(q, k, v)`` computes attention the way the NPU
does, bit for bit: on its bit-exact hardware model (``backend="model"``, the default) or on
its RTL through Verilator (``backend="rtl"``, the same bits). Inputs are numpy arrays or
torch tensors (or anything with ``__dlpack__``) of shape (B, H, S, D) (``layout="bhsd"``) or
(B, S, H, D) (``layout="bshd"``), in FP16 or FP32 (rounded to FP16, as the core reads them).
The result has the caller's type and layout. After a call, ``.report`` holds the run's cycles,
counters, energy and accuracy against the f64 reference, as ``regflash sim --report`` gives
them.

Grouped-query attention follows from K and V having fewer heads than Q (they must divide
it). Varlen batches take ``cu_seqlens_q`` / ``cu_seqlens_k`` with tensors of shape
(total, H, D), as FlashAttention's varlen function does.

Every error is a ``regflash.RegflashError`` carrying the message the CLI would print.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import _native
from ._native import RegflashError

__all__ = ["FlashAttention", "Design", "RegflashError", "estimate", "compare"]

Design = _native.Design

# FP16's largest finite value, and the least finite FP32 magnitude that rounds past it.
_F16_MAX = 65504.0
_F16_OVERFLOW = 65520.0


def _as_numpy(x: Any, name: str):
    """``x`` as a numpy array, and how to give a result back in the caller's type."""
    module = type(x).__module__
    if module.startswith("torch"):
        import torch  # only imported when the caller passes a tensor

        t = x.detach()
        device, dtype = t.device, t.dtype
        if t.dtype not in (torch.float16, torch.float32):
            t = t.to(torch.float32)
        t = t.cpu().contiguous()

        def back(a: np.ndarray):
            return torch.from_numpy(np.ascontiguousarray(a)).to(device=device)

        return np.from_dlpack(t), back, dtype
    if isinstance(x, np.ndarray):
        return x, (lambda a: a), x.dtype
    if hasattr(x, "__dlpack__"):
        try:
            a = np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            raise RegflashError(
                f"{name} ({type(x).__name__}) cannot be read through DLPack on the CPU ({e}): "
                "move it to host memory first"
            ) from e
        return a, (lambda r: r), a.dtype
    if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        a = np.asarray(x)
        return a, (lambda r: r), a.dtype
    raise RegflashError(
        f"{name} must be a numpy array, a torch tensor or an object with __dlpack__, "
        f"not {type(x).__name__}"
    )


def _fp16(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` in FP16: FP16 as is, other floats rounded to nearest even; a finite value FP16
    cannot hold is refused, naming the tensor and the place."""
    if a.dtype == np.float16:
        return a
    if a.dtype.kind != "f":
        raise RegflashError(
            f"{name} holds {a.dtype} values: give float16 or float32 (or float64) values"
        )
    wide = np.asarray(a, dtype=np.float64)
    big = np.isfinite(wide) & (np.abs(wide) >= _F16_OVERFLOW)
    if big.any():
        where = tuple(int(i) for i in np.argwhere(big)[0])
        raise RegflashError(
            f"{name}{list(where)} = {wide[where]!r} is beyond FP16's range (±{_F16_MAX:g}), "
            "which the core reads: scale the input, or clamp it to ±65504"
        )
    return a.astype(np.float16)


def _bf16_bits(a: np.ndarray, name: str) -> np.ndarray:
    """``a``'s values rounded to nearest even in BF16, as uint16 bits (NaN: 0x7FC0). BF16 has
    FP32's range, so only values beyond FP32's (float64 inputs) can overflow, to ±Inf, as the
    rounding rule says."""
    if a.dtype.kind != "f":
        raise RegflashError(
            f"{name} holds {a.dtype} values: give float16, float32 (or float64) values"
        )
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    out = rounded.astype(np.uint16)
    out[np.isnan(a)] = 0x7FC0
    return out


def _widen_bf16(bits: np.ndarray) -> np.ndarray:
    """BF16 bits as float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


class FlashAttention:
    """Attention on a regflash design.

    ``FlashAttention(head_dim, causal=False, *, preset=None, config=None, backend="model",
    variant=None, layout="bhsd", out_dtype=None, threads=None)``:

    - ``head_dim``: d, which the design's PE columns are built for. Without ``preset`` or
      ``config`` the smallest built-in preset for it is taken (small: 16, medium: 32,
      npu16: 128; seed is 128 too).
    - ``preset``: a built-in design (``"small"``, ``"medium"``, ``"npu16"``, ``"seed"``), or
      ``config``: a TOML configuration file's path.
    - ``variant``: where S and P live (``"reg2d"``, ``"buf2d"``, ``"reg3d"``, ``"rowfused"``,
      ``"unfused"``); default the design's own. The fused variants give the same bits;
      rowfused and unfused standard attention's.
    - ``backend``: ``"model"`` (the bit-exact model, with the cycle model's timing) or
      ``"rtl"`` (the generated Verilog, simulated by Verilator; built once and cached).
    - ``layout``: ``"bhsd"`` for (B, H, S, D) tensors, ``"bshd"`` for (B, S, H, D).
    - ``out_dtype``: ``"float16"`` or ``"float32"`` (the core's FP32 output); default the
      query's dtype (float16 stays float16, others are float32).
    - ``threads``: heads run on this many threads (model backend; default all cores).
    - ``rescale``, ``lazy_threshold``: the online softmax's rescaling, ``"pow2"`` (the
      default) or ``"lazy"`` with a threshold 1..15 (default 4), as the config keys
      ``rescale`` and ``lazy_threshold`` (docs/numerics.md).
    - ``in_format``: ``"fp16"`` (the default) or ``"bf16"``, as the config key: Q, K and V
      are rounded to it (nearest even), and P is kept in it. With ``"bf16"`` the output is
      float32: ``out_dtype="bfloat16"`` returns the short form (BF16 values, as float32),
      ``"float32"`` (the default) the core's FP32 output.
    - ``qk_format``: ``"int8"`` or ``"int4"``, as the config key: QKᵀ in integers, Q and K
      quantized by regflash as the core reads them (Q per token, K per block of Bc keys after
      subtracting K's mean over the keys; docs/numerics.md), two INT8 or four INT4 products a
      PE cycle. P·V stays in ``in_format``. The report's ``quant_rel_err`` is the
      quantization's own error against f64.
    """

    def __init__(
        self,
        head_dim: int,
        causal: bool = False,
        *,
        preset: Optional[str] = None,
        config: Optional[str] = None,
        backend: str = "model",
        variant: Optional[str] = None,
        layout: str = "bhsd",
        out_dtype: Any = None,
        threads: Optional[int] = None,
        rescale: Optional[str] = None,
        lazy_threshold: Optional[int] = None,
        in_format: Optional[str] = None,
        qk_format: Optional[str] = None,
    ) -> None:
        if backend not in ("model", "rtl"):
            raise RegflashError(f'unknown backend "{backend}": choose "model" or "rtl"')
        if layout not in ("bhsd", "bshd"):
            raise RegflashError(f'unknown layout "{layout}": choose "bhsd" or "bshd"')
        if config is not None:
            config = os.fspath(config)
        self.design = _native.Design(
            int(head_dim), preset, config, variant, rescale,
            None if lazy_threshold is None else int(lazy_threshold),
            in_format,
            qk_format,
        )
        self.bf16 = self.design.in_format == "bf16"
        self.head_dim = int(head_dim)
        self.causal = bool(causal)
        self.backend = backend
        self.layout = layout
        # BF16's short form: numpy has no bfloat16, so it is returned as float32 values.
        self.short_bf16 = self.bf16 and str(out_dtype) == "bfloat16"
        self.out_dtype = None if out_dtype is None or self.short_bf16 else np.dtype(out_dtype)
        allowed = (np.float32,) if self.bf16 else (np.float16, np.float32)
        if self.out_dtype is not None and self.out_dtype not in allowed:
            raise RegflashError(
                f"out_dtype {self.out_dtype} is not an output the core writes: "
                + ('choose "bfloat16" or float32' if self.bf16 else "choose float16 or float32")
            )
        self.threads = int(threads) if threads else (os.cpu_count() or 1)
        self.report: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        return (
            f"FlashAttention(head_dim={self.head_dim}, causal={self.causal}, "
            f"design={self.design.name!r}, variant={self.design.variant!r}, "
            f"backend={self.backend!r}, layout={self.layout!r})"
        )

    def _heads(self, a: np.ndarray, name: str) -> np.ndarray:
        """A 4-D tensor in the layout as (B·H, S, D) FP16, contiguous."""
        if a.ndim != 4:
            want = "(B, H, S, D)" if self.layout == "bhsd" else "(B, S, H, D)"
            raise RegflashError(f"{name} has shape {a.shape}: give a 4-D tensor {want}")
        if self.layout == "bshd":
            a = a.transpose(0, 2, 1, 3)
        if a.shape[3] != self.head_dim:
            raise RegflashError(
                f"{name} has head dimension {a.shape[3]}, but this FlashAttention is built for "
                f"head_dim = {self.head_dim}"
            )
        b, h, s, d = a.shape
        return np.ascontiguousarray(self._words(a, name)).reshape(b * h, s, d)

    def _words(self, a: np.ndarray, name: str) -> np.ndarray:
        """``a`` as the design's 16-bit operands: FP16 values, or BF16 bits."""
        return _bf16_bits(a, name) if self.bf16 else _fp16(a, name)

    def _run(self, q, k, v, heads, kv_heads, q_len, k_len, f32):
        out, report = self.design.run(
            self.backend,
            q.tobytes(),
            k.tobytes(),
            v.tobytes(),
            heads,
            kv_heads,
            q_len,
            k_len,
            self.causal,
            f32,
            self.threads,
        )
        report = json.loads(report)
        # Which run the figures come from: the model (the schedule's counters, the cycle
        # model's timing) or the RTL under Verilator (its own counters).
        report["backend"] = self.backend
        if f32:
            o = np.frombuffer(out, dtype=np.float32)
        elif self.bf16:
            o = _widen_bf16(np.frombuffer(out, dtype=np.uint16))
        else:
            o = np.frombuffer(out, dtype=np.float16)
        return o.reshape(heads, q_len, self.head_dim), report

    def __call__(self, q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None):
        qa, back, qtype = _as_numpy(q, "q")
        ka, _, _ = _as_numpy(k, "k")
        va, _, _ = _as_numpy(v, "v")
        out_dtype = self.out_dtype
        if out_dtype is None and not self.short_bf16:
            short = str(qtype).endswith("float16") and not self.bf16
            out_dtype = np.dtype(np.float16) if short else np.dtype(np.float32)
        f32 = out_dtype == np.float32
        if (cu_seqlens_q is None) != (cu_seqlens_k is None):
            raise RegflashError("give both cu_seqlens_q and cu_seqlens_k, or neither")
        if cu_seqlens_q is not None:
            out = self._varlen(qa, ka, va, cu_seqlens_q, cu_seqlens_k, f32)
            return back(out)
        if ka.shape != va.shape:
            raise RegflashError(f"k has shape {ka.shape} but v has {va.shape}: they must match")
        qh, kh, vh = self._heads(qa, "q"), self._heads(ka, "k"), self._heads(va, "v")
        b = qa.shape[0]
        if ka.shape[0] != b:
            raise RegflashError(f"q has batch {b} but k has {ka.shape[0]}: they must match")
        heads, kv_heads = qh.shape[0], kh.shape[0]
        o, self.report = self._run(qh, kh, vh, heads, kv_heads, qh.shape[1], kh.shape[1], f32)
        o = o.reshape(b, heads // b, qh.shape[1], self.head_dim)
        if self.layout == "bshd":
            o = o.transpose(0, 2, 1, 3)
        return back(np.ascontiguousarray(o))

    def _varlen(self, q, k, v, cu_q, cu_k, f32):
        """Varlen: q (total_q, H, D), k and v (total_k, H_kv, D); sequence i's queries are rows
        cu_q[i] .. cu_q[i + 1]. Each sequence runs on its own (the SoC's BATCH does the same)."""
        cu_q = [int(x) for x in np.asarray(cu_q).reshape(-1)]
        cu_k = [int(x) for x in np.asarray(cu_k).reshape(-1)]
        for name, a in (("q", q), ("k", k), ("v", v)):
            if a.ndim != 3 or a.shape[2] != self.head_dim:
                raise RegflashError(
                    f"{name} has shape {a.shape}: a varlen batch takes (total, H, "
                    f"{self.head_dim}) tensors"
                )
        if len(cu_q) != len(cu_k) or len(cu_q) < 1:
            raise RegflashError(
                f"cu_seqlens_q has {len(cu_q)} offsets and cu_seqlens_k {len(cu_k)}: "
                "give one more offset than sequences in each"
            )
        for name, cu, total in (("cu_seqlens_q", cu_q, q.shape[0]), ("cu_seqlens_k", cu_k, k.shape[0])):
            if cu[0] != 0 or cu[-1] != total or any(b < a for a, b in zip(cu, cu[1:])):
                raise RegflashError(
                    f"{name} = {cu} must rise from 0 to the tensor's {total} rows"
                )
        heads, kv_heads = q.shape[1], k.shape[1]
        short = np.float32 if self.bf16 else np.float16
        out = np.zeros((q.shape[0], heads, self.head_dim), np.float32 if f32 else short)
        reports: List[Dict[str, Any]] = []
        for i in range(len(cu_q) - 1):
            (q0, q1), (k0, k1) = (cu_q[i], cu_q[i + 1]), (cu_k[i], cu_k[i + 1])
            if q1 == q0:
                continue
            def per_head(a, lo, hi, name):
                return np.ascontiguousarray(self._words(a[lo:hi], name).transpose(1, 0, 2))
            qs, ks, vs = per_head(q, q0, q1, "q"), per_head(k, k0, k1, "k"), per_head(v, k0, k1, "v")
            o, r = self._run(qs, ks, vs, heads, kv_heads, q1 - q0, k1 - k0, f32)
            out[q0:q1] = o.transpose(1, 0, 2)
            reports.append(r)
        self.report = {
            "sequences": reports,
            "cycles": sum(r["cycles"] for r in reports),
            "passed": all(r["passed"] for r in reports),
        }
        return out


def estimate(
    seq: Sequence[int],
    *,
    head_dim: int = 128,
    preset: Optional[str] = None,
    config: Optional[str] = None,
    variant: Optional[str] = None,
    heads: int = 1,
    causal: bool = False,
) -> Dict[str, Any]:
    """The cycle model's and the energy table's figures for sequences of ``seq`` tokens, as
    ``regflash estimate --report`` gives them: ``{"design": ..., "variant": ..., "points":
    [one dict per length: cycles, utilization, seconds, tokens_per_second, bytes, counters,
    energy, method]}``."""
    if isinstance(seq, int):
        seq = [seq]
    d = _native.Design(int(head_dim), preset, None if config is None else os.fspath(config), variant)
    points = json.loads(d.estimate([int(s) for s in seq], int(heads), bool(causal)))
    return {"design": d.name, "variant": d.variant, "points": points}


def compare(
    seq: Sequence[int],
    *,
    head_dim: int = 16,
    preset: Optional[str] = None,
    config: Optional[str] = None,
    causal: bool = False,
    heads: int = 1,
    max_sim_seq: int = 4096,
    glb: str = "config",
    claims: bool = False,
    spill_keys: Optional[int] = None,
) -> Dict[str, Any]:
    """``regflash compare`` as a dict: every variant (buf2d, 3-D buffered, reg2d, reg3d, reg3d
    iso-PE, rowfused, rowfused (spill), unfused) on the design's array at each length of
    ``seq``: lengths up to ``max_sim_seq`` simulated on the RTL (bit-checked), longer ones from
    the schedule and the cycle model. ``glb``: the design's global buffer ("config"), none, or
    both. Returns ``{"design", "rows": [one dict per design and length: cycles, counters,
    energy, speedup and energy reduction against buf2d, source], "claims": [the claims table's
    rows when claims=True]}``."""
    if isinstance(seq, int):
        seq = [seq]
    d = _native.Design(int(head_dim), preset, None if config is None else os.fspath(config), None)
    out = json.loads(
        d.compare(
            [int(s) for s in seq],
            bool(causal),
            int(heads),
            int(max_sim_seq),
            glb,
            bool(claims),
            None if spill_keys is None else int(spill_keys),
        )
    )
    out["design"] = d.name
    return out
