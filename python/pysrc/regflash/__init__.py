"""regflash from Python: a register-level FlashAttention NPU as an attention function.

``regflash.FlashAttention(head_dim, causal)(q, k, v)`` computes attention the way the NPU
does, bit for bit: on its bit-exact hardware model (``backend="model"``, the default) or on
its RTL through Verilator (``backend="rtl"``, the same bits). Inputs are numpy arrays or
torch tensors (or anything with ``__dlpack__``) of shape (B, H, S, D) (``layout="bhsd"``) or
(B, S, H, D) (``layout="bshd"``), in FP16, FP32 or FP64 (rounded once to the operand format,
as the core reads it; a finite value beyond its range is refused by name).
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
import operator
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import _native
from ._native import RegflashError

__all__ = [
    "FlashAttention",
    "Design",
    "RegflashError",
    "estimate",
    "compare",
    "flash_attn_func",
    "flash_attn_backward",
]

Design = _native.Design

# Causal masks: FlashAttention's (≥ 2.1) bottom-right alignment, which the core masks, and
# torch SDPA's top-left one, which runs as one or two bottom-right problems.
_ALIGNMENTS = ("bottom-right", "top-left")


def _integer(x: Any, name: str, least: int = 0, most: int = 2**32 - 1) -> int:
    """``x`` as an int in [least, most], or a RegflashError that says what is wrong: a whole
    number is required (1.0 is taken, 10.7 is not) and negative or huge ones are refused here,
    not as an OverflowError deep inside."""
    try:
        n = operator.index(x)
    except TypeError:
        try:
            f = float(x)
        except (TypeError, ValueError):
            raise RegflashError(f"{name} = {x!r} is not a number: give a whole number") from None
        if not f.is_integer():
            raise RegflashError(f"{name} = {x!r} is not a whole number: give a whole number")
        n = int(f)
    if not least <= n <= most:
        raise RegflashError(f"{name} = {n} is out of range: give a whole number from {least} to {most}")
    return n


def _check_progress(progress: Any) -> None:
    """A ``progress=`` argument is None, True, False or a callable."""
    if progress not in (None, True, False) and not callable(progress):
        raise RegflashError(
            f"progress = {progress!r}: give a callable taking (done, total), True or False"
        )


def _progress(progress: Any, what: str):
    """The callback the native side calls with (done, total) while it runs, and the tqdm bar
    to close after it: the caller's own callback, or a tqdm bar when tqdm is installed (shown
    after a second, so short calls stay quiet), or none. ``False`` turns it off."""
    _check_progress(progress)
    if progress is False or progress is None and os.environ.get("REGFLASH_PROGRESS") == "0":
        return None, None
    if progress not in (None, True):
        return progress, None
    try:
        from tqdm.auto import tqdm  # optional: only used when installed
    except ImportError:
        return None, None
    bar = tqdm(total=0, desc=f"regflash {what}", delay=1.0, leave=False)

    def tell(done: int, total: int) -> None:
        if total and bar.total != total:
            bar.total = total
        bar.n = min(done, total) if total else done
        bar.refresh()

    return tell, bar


def _watched(progress: Any, what: str, call):
    """``call(callback)`` with the progress callback made from ``progress``; a tqdm bar is
    closed however the call ends."""
    tell, bar = _progress(progress, what)
    try:
        return call(tell)
    finally:
        if bar is not None:
            bar.close()


def _as_numpy(x: Any, name: str):
    """``x`` as a numpy array, and how to give a result back in the caller's type."""
    module = type(x).__module__
    if module.startswith("torch"):
        import torch  # only imported when the caller passes a tensor

        t = x.detach()
        device, dtype = t.device, t.dtype
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)  # exact: numpy has no bfloat16
        elif not t.dtype.is_floating_point:
            raise RegflashError(
                f"{name} holds {t.dtype} values: give float16, bfloat16, float32 or float64 values"
            )
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


class FlashAttention:
    """Attention on a regflash design.

    ``FlashAttention(head_dim, causal=False, *, preset=None, config=None, backend="model",
    variant=None, layout="bhsd", out_dtype=None, threads=None, rescale=None,
    lazy_threshold=None, in_format=None, qk_format=None, progress=None, check=None)``:

    - ``causal``: False; True or ``"bottom-right"`` (FlashAttention's mask: query i of S_q
      sees keys up to i + S_k − S_q); ``"top-left"`` (torch SDPA's ``is_causal``: query i
      sees keys 0..i), run as one or two bottom-right problems.
    - ``progress``: a callable taking (steps done, steps expected), called about every 0.1 s
      during a call; None: a tqdm bar when tqdm is installed (after a second); False: none.
      Ctrl-C stops a call (between heads on the model, within 8,192 cycles on the RTL).

    - ``head_dim``: d, which the design's PE columns are built for. Without ``preset`` or
      ``config`` the smallest built-in preset for it is taken (small: 16, medium: 32,
      npu16: 128; seed is 128 too).
    - ``preset``: a built-in design (``"small"``, ``"medium"``, ``"npu16"``, ``"seed"``), or
      ``config``: a TOML configuration file's path.
    - ``variant``: where S and P live (``"reg2d"``, ``"buf2d"``, ``"reg3d"``, ``"rowfused"``,
      ``"unfused"``, ``"noc2d"``); default the design's own. The fused variants give the same
      bits; rowfused and unfused standard attention's.
    - ``backend``: ``"model"`` (the bit-exact model, with the cycle model's timing) or
      ``"rtl"`` (the generated Verilog, simulated by Verilator; built once and cached).
    - ``layout``: ``"bhsd"`` for (B, H, S, D) tensors, ``"bshd"`` for (B, S, H, D).
    - ``out_dtype``: ``"float16"`` or ``"float32"`` (the core's FP32 output); default the
      query's dtype (float16 stays float16, others are float32).
    - ``threads``: heads run on this many threads (model backend; default all cores).
    - ``check``: True checks every call's output against an f64 attention and a plain FP16
      one by the numerical contract (the report's ``passed``); False skips those references:
      the output is the same bit-exact model's, and the report says ``checked: False``,
      ``passed: False``, its accuracy figures NaN. The default (None) is False on the model
      backend, where the references cost about twice the model itself (docs/python.md,
      Speed), and True on the RTL backend, which always checks.
    - ``rescale``, ``lazy_threshold``: the online softmax's rescaling, ``"pow2"`` (the
      default) or ``"lazy"`` with a threshold 1..15 (default 4), as the config keys
      ``rescale`` and ``lazy_threshold`` (docs/numerics.md).
    - ``in_format``: ``"fp16"`` (the default), ``"bf16"``, ``"fp8e4m3"`` or ``"fp8e5m2"``
      (OCP FP8), as the config key: Q, K and V are rounded to it (nearest even), and P is
      kept in it. FP8 operands are stored at per-tensor power-of-two scales that put each
      tensor's largest magnitude in the format's top binade (FlashAttention-3's descales,
      exact here): the softmax constant and the output take them back, and
      ``self.scales`` names them. numpy has no
      dtype for the last three, so their output is float32: ``out_dtype`` naming the format
      (``"bfloat16"``, ``"float8_e4m3fn"``, ``"float8_e5m2"``) returns the short form (its
      values, as float32), ``"float32"`` (the default) the core's FP32 output.
    - ``qk_format``: ``"int8"`` or ``"int4"``, as the config key: QKᵀ in integers, Q and K
      quantized by regflash as the core reads them (Q per token, K per block of Bc keys after
      subtracting K's mean over the keys; docs/numerics.md), two INT8 or four INT4 products a
      PE cycle. P·V stays in ``in_format``. The report's ``quant_rel_err`` is the
      quantization's own error against f64.
    """

    def __init__(
        self,
        head_dim: int,
        causal: Any = False,
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
        progress: Any = None,
        check: Optional[bool] = None,
    ) -> None:
        if backend not in ("model", "rtl"):
            raise RegflashError(f'unknown backend "{backend}": choose "model" or "rtl"')
        if layout not in ("bhsd", "bshd"):
            raise RegflashError(f'unknown layout "{layout}": choose "bhsd" or "bshd"')
        if isinstance(causal, str):
            if causal not in _ALIGNMENTS:
                raise RegflashError(
                    f'causal = "{causal}": choose True or "bottom-right" (FlashAttention\'s '
                    'alignment), "top-left" (torch SDPA\'s is_causal), or False'
                )
            self.causal, self.alignment = True, causal
        elif causal is None or isinstance(causal, (bool, int, np.bool_)) and causal in (0, 1):
            self.causal, self.alignment = bool(causal), "bottom-right"
        else:
            raise RegflashError(
                f'causal = {causal!r}: choose False, True, "bottom-right" or "top-left"'
            )
        if config is not None:
            config = os.fspath(config)
        self.head_dim = _integer(head_dim, "head_dim", 1)
        self.design = _native.Design(
            self.head_dim, preset, config, variant, rescale,
            None if lazy_threshold is None else _integer(lazy_threshold, "lazy_threshold"),
            in_format,
            qk_format,
        )
        self.backend = backend
        if check is None:
            check = backend == "rtl"
        if not isinstance(check, (bool, np.bool_)):
            raise RegflashError(f"check = {check!r}: give True, False or None")
        if not check and backend != "model":
            raise RegflashError(
                "check=False skips the model backend's accuracy references; an RTL run is "
                'always checked: drop check=False, or use backend="model"'
            )
        self.check = bool(check)
        self.layout = layout
        # The short output's dtype; numpy has only float16's, and reads the others' bits
        # through a table of their values, as float32.
        short = self.design.short_dtype
        self.native_short = self.design.numpy_short
        self.short_table = (
            None if self.native_short
            else np.frombuffer(self.design.short_values(), dtype="<f4")
        )
        self.wide_short = not self.native_short and str(out_dtype) == short
        try:
            self.out_dtype = None if out_dtype is None or self.wide_short else np.dtype(out_dtype)
        except TypeError as e:
            raise RegflashError(f"out_dtype {out_dtype!r} is not a dtype ({e})") from None
        allowed = (np.float16, np.float32) if self.native_short else (np.float32,)
        if self.out_dtype is not None and self.out_dtype not in allowed:
            raise RegflashError(
                f"out_dtype {self.out_dtype} is not an output the core writes: "
                + ("choose float16 or float32" if self.native_short
                   else f'choose "{short}" or float32')
            )
        self.threads = (
            os.cpu_count() or 1 if threads is None else _integer(threads, "threads", 1, 4096)
        )
        _check_progress(progress)  # refused here, not at the first call
        self.progress = progress
        self.report: Optional[Dict[str, Any]] = None
        # The per-tensor scale exponents of the last call's operands (0 but for FP8).
        self.scales: Dict[str, int] = {"q": 0, "k": 0, "v": 0}

    def __repr__(self) -> str:
        causal = repr(self.alignment) if self.causal else "False"
        return (
            f"FlashAttention(head_dim={self.head_dim}, causal={causal}, "
            f"design={self.design.name!r}, variant={self.design.variant!r}, "
            f"backend={self.backend!r}, layout={self.layout!r})"
        )

    def _words(self, a: np.ndarray, name: str) -> np.ndarray:
        """``a`` as the design's operands (uint16 words holding the operand format's bits,
        the same shape): float16, float32 and float64 values rounded to nearest even in one rounding
        (by the Rust side, as the CLI rounds .npy inputs); a finite value the format cannot
        hold is refused, naming the tensor and the element. A format of a narrower range
        than float16's (FP8) stores the tensor at a power-of-two scale that fits it (its
        largest magnitude in the format's top binade, as FlashAttention-3's FP8 descales, but
        exact): its exponent is kept in ``self.scales[name]``."""
        if a.dtype.kind != "f" or a.dtype.itemsize not in (2, 4, 8):
            raise RegflashError(
                f"{name} holds {a.dtype} values: give float16, float32 or float64 values"
            )
        le = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        bits, exp = self.design.operands(le.tobytes(), le.dtype.itemsize, list(a.shape), name)
        self.scales[name] = exp
        return np.frombuffer(bits, dtype="<u2").reshape(a.shape)

    def _heads(self, a: np.ndarray, name: str) -> np.ndarray:
        """A 4-D tensor in the layout as (B·H, S, D) operand bits, contiguous."""
        if a.ndim != 4:
            want = "(B, H, S, D)" if self.layout == "bhsd" else "(B, S, H, D)"
            raise RegflashError(f"{name} has shape {a.shape}: give a 4-D tensor {want}")
        if a.shape[3] != self.head_dim:
            raise RegflashError(
                f"{name} has head dimension {a.shape[3]}, but this FlashAttention is built for "
                f"head_dim = {self.head_dim}"
            )
        w = self._words(a, name)
        if self.layout == "bshd":
            w = w.transpose(0, 2, 1, 3)
        b, h, s, d = w.shape
        return np.ascontiguousarray(w).reshape(b * h, s, d)

    def _run(self, q, k, v, heads, kv_heads, causal, f32, tell):
        """One problem: operand bits (heads, q_len, d) and (kv_heads, k_len, d), ``tell`` the
        progress callback. The output (heads, q_len, d) and the report's JSON."""
        q_len, k_len = q.shape[1], k.shape[1]
        scales = [self.scales[t] for t in ("q", "k", "v")]
        out, report = self.design.run(
            self.backend,
            np.ascontiguousarray(q).tobytes(),
            np.ascontiguousarray(k).tobytes(),
            np.ascontiguousarray(v).tobytes(),
            heads,
            kv_heads,
            q_len,
            k_len,
            causal,
            f32,
            self.threads,
            scales,
            tell,
            self.check,
        )
        o = self._values(out, f32)
        if scales[2]:
            o = o * np.float32(2.0 ** -scales[2])  # V's scale taken back: exact
        return o.reshape(heads, q_len, self.head_dim), report

    def _attend(self, q, k, v, heads, kv_heads, f32, tell):
        """Attention of one problem with this FlashAttention's mask: the output and the list
        of the runs' reports. The core masks bottom-right (row i sees keys up to i + k_len −
        q_len); top-left (row i sees keys up to i) is the same mask on the first q_len keys
        when q_len ≤ k_len, and otherwise the first k_len rows causal on all keys and the
        rest unmasked: two runs, whose rows are independent."""
        q_len, k_len = q.shape[1], k.shape[1]
        if not self.causal or self.alignment == "bottom-right" or q_len == k_len:
            o, r = self._run(q, k, v, heads, kv_heads, self.causal, f32, tell)
            return o, [r]
        if q_len < k_len:
            o, r = self._run(q, k[:, :q_len], v[:, :q_len], heads, kv_heads, True, f32, tell)
            return o, [r]
        top, r1 = self._run(q[:, :k_len], k, v, heads, kv_heads, True, f32, tell)
        rest, r2 = self._run(q[:, k_len:], k, v, heads, kv_heads, False, f32, tell)
        return np.concatenate([top, rest], axis=1), [r1, r2]

    def _report(self, runs: List[str], sequences: bool) -> Dict[str, Any]:
        """The call's report: one run's as it is; several runs' (a varlen batch's sequences,
        a top-left mask's two parts) merged by the Rust side: counts summed, errors the
        worst, ``passed`` only if every run passed; a varlen batch lists its sequences'
        reports under ``sequences``."""
        merged = json.loads(runs[0] if len(runs) == 1 else self.design.merge_reports(runs))
        if sequences:
            merged["sequences"] = [json.loads(r) for r in runs]
        # Which run the figures come from: the model (the schedule's counters, the cycle
        # model's timing) or the RTL under Verilator (its own counters).
        merged["backend"] = self.backend
        merged["causal_alignment"] = self.alignment if self.causal else None
        return merged

    def __call__(self, q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None):
        qa, back, qtype = _as_numpy(q, "q")
        ka, _, _ = _as_numpy(k, "k")
        va, _, _ = _as_numpy(v, "v")
        f32 = self._f32_out(qtype)
        if (cu_seqlens_q is None) != (cu_seqlens_k is None):
            raise RegflashError("give both cu_seqlens_q and cu_seqlens_k, or neither")
        if cu_seqlens_q is not None:
            cu = (cu_seqlens_q, cu_seqlens_k)
            out = _watched(self.progress, "attention",
                           lambda tell: self._varlen(qa, ka, va, *cu, f32, tell))
        else:
            out = _watched(self.progress, "attention",
                           lambda tell: self._batched(qa, ka, va, f32, tell))
        return back(out)

    def _batched(self, qa, ka, va, f32, tell):
        if ka.shape != va.shape:
            raise RegflashError(f"k has shape {ka.shape} but v has {va.shape}: they must match")
        qh, kh, vh = self._heads(qa, "q"), self._heads(ka, "k"), self._heads(va, "v")
        b = qa.shape[0]
        if ka.shape[0] != b:
            raise RegflashError(f"q has batch {b} but k has {ka.shape[0]}: they must match")
        heads, kv_heads = qh.shape[0], kh.shape[0]
        o, runs = self._attend(qh, kh, vh, heads, kv_heads, f32, tell)
        self.report = self._report(runs, False)
        o = o.reshape(b, heads // b, qh.shape[1], self.head_dim)
        if self.layout == "bshd":
            o = o.transpose(0, 2, 1, 3)
        return np.ascontiguousarray(o)

    @staticmethod
    def _offsets(cu: Any, name: str) -> List[int]:
        """A cu_seqlens list as ints: whole numbers only (10.7 is refused, not truncated)."""
        a = np.asarray(cu)
        if a.ndim != 1:
            raise RegflashError(f"{name} has shape {a.shape}: give a 1-D list of offsets")
        return [_integer(x, f"{name}[{i}]", 0, 2**62) for i, x in enumerate(a.tolist())]

    def _f32_out(self, qtype) -> bool:
        """Whether a call on a query of dtype ``qtype`` returns the core's FP32 output: as
        ``out_dtype`` asks, by default for anything but float16 queries on a float16 design."""
        out_dtype = self.out_dtype
        if out_dtype is None and not self.wide_short:
            short = str(qtype).endswith("float16") and self.native_short
            out_dtype = np.dtype(np.float16) if short else np.dtype(np.float32)
        return out_dtype == np.float32

    def _values(self, raw: bytes, f32: bool) -> np.ndarray:
        """Output bytes as values: float32, float16, or the short format's values (as
        float32) through its table where numpy has no dtype for it."""
        if f32:
            return np.frombuffer(raw, dtype="<f4")
        if self.native_short:
            return np.frombuffer(raw, dtype="<f2")
        return self.short_table[np.frombuffer(raw, dtype="<u2")]

    def _varlen_shapes(self, named) -> None:
        """A varlen batch's (name, tensor) pairs are (total, H, D) tensors, and its K and V
        (named "k" and "v") match."""
        for name, a in named:
            if a.ndim != 3 or a.shape[2] != self.head_dim:
                raise RegflashError(
                    f"{name} has shape {a.shape}: a varlen batch takes (total, H, "
                    f"{self.head_dim}) tensors"
                )
        t = dict(named)
        if t["k"].shape != t["v"].shape:
            raise RegflashError(
                f"k has shape {t['k'].shape} but v has {t['v'].shape}: a varlen batch's K and V "
                "rows and heads must match"
            )

    @classmethod
    def _sequences(cls, cu_q, cu_k, total_q: int, total_k: int):
        """A varlen batch's offset lists as ints, checked: as many of each, at least two, each
        rising from 0 to its tensor's rows."""
        cu_q = cls._offsets(cu_q, "cu_seqlens_q")
        cu_k = cls._offsets(cu_k, "cu_seqlens_k")
        if len(cu_q) != len(cu_k) or len(cu_q) < 2:
            raise RegflashError(
                f"cu_seqlens_q has {len(cu_q)} offsets and cu_seqlens_k {len(cu_k)}: "
                "give one more offset than sequences in each (at least one sequence)"
            )
        for name, cu, total in (("cu_seqlens_q", cu_q, total_q), ("cu_seqlens_k", cu_k, total_k)):
            if cu[0] != 0 or cu[-1] != total or any(b < a for a, b in zip(cu, cu[1:])):
                raise RegflashError(
                    f"{name} = {cu} must rise from 0 to the tensor's {total} rows"
                )
        return cu_q, cu_k

    def _varlen(self, q, k, v, cu_q, cu_k, f32, tell):
        """Varlen: q (total_q, H, D), k and v (total_k, H_kv, D); sequence i's queries are rows
        cu_q[i] .. cu_q[i + 1]. Each sequence runs on its own (the SoC's BATCH does the same)."""
        self._varlen_shapes((("q", q), ("k", k), ("v", v)))
        cu_q, cu_k = self._sequences(cu_q, cu_k, q.shape[0], k.shape[0])
        # Every value is rounded (and checked) once, where the caller's indices name it.
        qw, kw, vw = self._words(q, "q"), self._words(k, "k"), self._words(v, "v")
        heads, kv_heads = q.shape[1], k.shape[1]
        short = np.float16 if self.native_short else np.float32
        out = np.zeros((q.shape[0], heads, self.head_dim), np.float32 if f32 else short)
        runs: List[str] = []
        for i in range(len(cu_q) - 1):
            (q0, q1), (k0, k1) = (cu_q[i], cu_q[i + 1]), (cu_k[i], cu_k[i + 1])
            if q1 == q0:
                continue
            qs, ks, vs = (np.ascontiguousarray(a[lo:hi].transpose(1, 0, 2))
                          for a, lo, hi in ((qw, q0, q1), (kw, k0, k1), (vw, k0, k1)))
            o, r = self._attend(qs, ks, vs, heads, kv_heads, f32, tell)
            out[q0:q1] = o.transpose(1, 0, 2)
            runs.extend(r)
        if not runs:
            raise RegflashError("the varlen batch has no query rows: nothing to attend")
        self.report = self._report(runs, True)
        return out


def flash_attn_func(q, k, v, causal: Any = False, *, layout: str = "bshd", **kwargs):
    """FlashAttention's ``flash_attn_func(q, k, v, causal)`` on a regflash design's bit-exact
    model (or its RTL with ``backend="rtl"``): the output, shaped like ``q``. The layout is
    FlashAttention's (B, S, H, D) unless ``layout="bhsd"``; the causal mask is bottom-right
    aligned, as FlashAttention's (≥ 2.1). Every other keyword is ``FlashAttention``'s
    (``preset``, ``config``, ``variant``, ``in_format``, ``out_dtype``, ``threads``, ...).
    Its gradients: ``flash_attn_backward``."""
    qa, _, _ = _as_numpy(q, "q")
    if qa.ndim < 1:
        raise RegflashError("q must be a 4-D tensor")
    return FlashAttention(qa.shape[-1], causal, layout=layout, **kwargs)(q, k, v)


def flash_attn_backward(
    dout,
    q,
    k,
    v,
    causal: Any = False,
    *,
    layout: str = "bshd",
    preset: Optional[str] = None,
    config: Optional[str] = None,
    variant: Optional[str] = None,
    in_format: Optional[str] = None,
    out_dtype: Any = None,
    threads: Optional[int] = None,
    check: bool = True,
    report: bool = False,
    cu_seqlens_q=None,
    cu_seqlens_k=None,
):
    """The gradients (dq, dk, dv) of ``flash_attn_func(q, k, v, causal)`` for the upstream
    gradient ``dout`` (shaped like the output), on the design's bit-exact model of
    FlashAttention-2's backward pass (docs/backward.md): S and P recomputed from the forward's
    saved log-sum-exp, dV and dK accumulated per K/V block, dQ through an FP32 accumulator;
    grouped-query K/V heads get their group's summed gradients. Each gradient has its
    tensor's shape and the caller's type; its dtype is ``out_dtype``, default float16 for
    float16 inputs on an FP16 design and float32 otherwise.

    ``check`` (default True) holds every gradient to an f64 backward and a plain FP16 (BF16)
    one by FlashAttention's criterion (within twice the plain one's error plus one ulp) and
    raises ``RegflashError`` otherwise. ``report=True`` also returns the run's report (MACs,
    blocks, each gradient's error and bound). No design's RTL runs the backward yet: this is
    the arithmetic it is to match.

    Varlen batches take ``cu_seqlens_q`` / ``cu_seqlens_k`` with (total, H, D) tensors, as
    FlashAttention's varlen functions do: each sequence's gradients are its own problem's
    (its rows of dq, dk and dv), and the report lists the sequences' reports under
    ``sequences``, ``passed`` only if every one passed."""
    if layout not in ("bhsd", "bshd"):
        raise RegflashError(f'unknown layout "{layout}": choose "bhsd" or "bshd"')
    if isinstance(causal, str) and causal != "bottom-right":
        raise RegflashError(
            f'causal = "{causal}": the backward masks as FlashAttention does, bottom-right '
            '(True or "bottom-right"), or not at all (False)'
        )
    if not isinstance(check, (bool, np.bool_)):
        raise RegflashError(f"check = {check!r}: give True or False")
    qa, back_q, qtype = _as_numpy(q, "q")
    ka, back_k, _ = _as_numpy(k, "k")
    va, back_v, _ = _as_numpy(v, "v")
    da, _, _ = _as_numpy(dout, "dout")
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise RegflashError("give both cu_seqlens_q and cu_seqlens_k, or neither")
    if cu_seqlens_q is not None:
        grads = _varlen_backward(
            (da, qa, ka, va), (cu_seqlens_q, cu_seqlens_k), bool(causal), qtype,
            dict(preset=preset, config=config, variant=variant, out_dtype=out_dtype,
                 threads=threads, in_format=in_format),
            bool(check),
        )
        out = (back_q(grads[0]), back_k(grads[1]), back_v(grads[2]))
        return (out + (grads[3],)) if report else out
    if qa.ndim != 4:
        raise RegflashError(f"q has shape {qa.shape}: give a 4-D tensor")
    if da.shape != qa.shape:
        raise RegflashError(
            f"dout has shape {da.shape} but q has {qa.shape}: dout is the gradient of the "
            "output, which is shaped like q"
        )
    if ka.shape != va.shape:
        raise RegflashError(f"k has shape {ka.shape} but v has {va.shape}: they must match")
    fa = _backward_attention(
        qa.shape[-1], bool(causal), preset=preset, config=config, variant=variant,
        layout=layout, out_dtype=out_dtype, threads=threads, in_format=in_format,
    )
    qh, kh, vh, dh = (fa._heads(a, n) for a, n in ((qa, "q"), (ka, "k"), (va, "v"), (da, "dout")))
    b = qa.shape[0]
    if ka.shape[0] != b:
        raise RegflashError(f"q has batch {b} but k has {ka.shape[0]}: they must match")
    heads, kv_heads = qh.shape[0], kh.shape[0]
    if heads % kv_heads:
        raise RegflashError(
            f"q has {heads // b} heads and k {kv_heads // b}: the K/V heads must divide the "
            "query heads (grouped-query attention)"
        )
    f32 = fa._f32_out(qtype)
    dq, dk, dv, rep = fa.design.backward(
        qh.tobytes(), kh.tobytes(), vh.tobytes(), dh.tobytes(),
        heads, kv_heads, qh.shape[1], kh.shape[1], fa.causal, f32, fa.threads, bool(check),
    )

    def shaped(raw: bytes, like: np.ndarray) -> np.ndarray:
        n, s = like.shape[0], like.shape[1]
        a = fa._values(raw, f32).reshape(b, n // b, s, fa.head_dim)
        if layout == "bshd":
            a = a.transpose(0, 2, 1, 3)
        return np.ascontiguousarray(a)

    grads = (back_q(shaped(dq, qh)), back_k(shaped(dk, kh)), back_v(shaped(dv, vh)))
    return (grads + (json.loads(rep),)) if report else grads


def _backward_attention(head_dim: int, causal: bool, **design) -> "FlashAttention":
    """The FlashAttention whose design, conversions and output choices a backward call uses,
    refused unless its operands are FP16 or BF16 (the backward's contract)."""
    fa = FlashAttention(head_dim, causal, **design)
    if fa.design.in_format not in ("fp16", "bf16"):
        raise RegflashError(
            f"the backward pass runs on fp16 or bf16 operands; this design's in_format is "
            f'"{fa.design.in_format}": give in_format="fp16" or "bf16"'
        )
    return fa


def _varlen_backward(tensors, cu, causal, qtype, design, check):
    """``flash_attn_backward`` of a varlen batch: dout and q (total_q, H, D), k and v
    (total_k, H_kv, D), each sequence's rows between its offsets run as one problem. The
    gradients as float arrays of their tensors' shapes, and the report."""
    da, qa, ka, va = tensors
    if qa.ndim < 1:
        raise RegflashError("q must be a (total, H, D) tensor")
    fa = _backward_attention(qa.shape[-1], causal, **design)
    fa._varlen_shapes((("dout", da), ("q", qa), ("k", ka), ("v", va)))
    if da.shape != qa.shape:
        raise RegflashError(f"dout has shape {da.shape} but q has {qa.shape}: they must match")
    cu_q, cu_k = FlashAttention._sequences(cu[0], cu[1], qa.shape[0], ka.shape[0])
    heads, kv_heads = qa.shape[1], ka.shape[1]
    if heads % kv_heads:
        raise RegflashError(
            f"q has {heads} heads and k {kv_heads}: the K/V heads must divide the query heads"
        )
    words = [fa._words(a, n) for a, n in ((da, "dout"), (qa, "q"), (ka, "k"), (va, "v"))]
    f32 = fa._f32_out(qtype)
    dtype = np.float32 if f32 or not fa.native_short else np.float16
    grads = [np.zeros(a.shape, dtype) for a in (qa, ka, va)]
    reports = []
    for i in range(len(cu_q) - 1):
        (q0, q1), (k0, k1) = (cu_q[i], cu_q[i + 1]), (cu_k[i], cu_k[i + 1])
        if q1 == q0:
            continue
        if k1 == k0:
            raise RegflashError(f"sequence {i} has queries but no keys: give it at least one")
        d, qs, ks, vs = (
            np.ascontiguousarray(w[lo:hi].transpose(1, 0, 2))
            for w, lo, hi in zip(words, (q0, q0, k0, k0), (q1, q1, k1, k1))
        )
        dq, dk, dv, rep = fa.design.backward(
            qs.tobytes(), ks.tobytes(), vs.tobytes(), d.tobytes(),
            heads, kv_heads, q1 - q0, k1 - k0, fa.causal, f32, fa.threads, check,
        )
        for g, raw, lo, hi, h in ((0, dq, q0, q1, heads), (1, dk, k0, k1, kv_heads), (2, dv, k0, k1, kv_heads)):
            grads[g][lo:hi] = fa._values(raw, f32).reshape(h, hi - lo, fa.head_dim).transpose(1, 0, 2)
        reports.append(json.loads(rep))
    if not reports:
        raise RegflashError("the varlen batch has no query rows: nothing to differentiate")
    merged = {
        "passed": all(r["passed"] for r in reports),
        "checked": check,
        "macs": sum(r["macs"] for r in reports),
        "sequences": reports,
    }
    return grads[0], grads[1], grads[2], merged


def _lengths(seq: Any) -> List[int]:
    """``seq`` (one length or several) as a list of whole numbers of at least 1."""
    seq = [seq] if np.ndim(seq) == 0 else list(np.asarray(seq).reshape(-1).tolist())
    if not seq:
        raise RegflashError("seq is empty: give one or more sequence lengths")
    return [_integer(s, "seq", 1, 2**40) for s in seq]


def estimate(
    seq: Any,
    *,
    head_dim: int = 128,
    preset: Optional[str] = None,
    config: Optional[str] = None,
    variant: Optional[str] = None,
    heads: int = 1,
    causal: bool = False,
    progress: Any = None,
) -> Dict[str, Any]:
    """The cycle model's and the energy table's figures for sequences of ``seq`` tokens, as
    ``regflash estimate --report`` gives them: ``{"design": ..., "variant": ..., "points":
    [one dict per length: cycles, utilization, seconds, tokens_per_second, bytes, counters,
    energy, method]}``. ``progress``: a callable taking (points done, points), True or False
    (default: a tqdm bar when tqdm is installed)."""
    seq = _lengths(seq)
    heads = _integer(heads, "heads", 1)
    d = _native.Design(
        _integer(head_dim, "head_dim", 1), preset,
        None if config is None else os.fspath(config), variant,
    )
    points = _watched(progress, "estimate", lambda tell: d.estimate(seq, heads, bool(causal), tell))
    return {"design": d.name, "variant": d.variant, "points": json.loads(points)}


def compare(
    seq: Any,
    *,
    head_dim: int = 16,
    preset: Optional[str] = None,
    config: Optional[str] = None,
    causal: bool = False,
    heads: int = 1,
    kv_heads: Optional[int] = None,
    max_sim_seq: int = 4096,
    glb: str = "config",
    claims: bool = False,
    spill_keys: Optional[int] = None,
    progress: Any = None,
    batch: int = 1,
) -> Dict[str, Any]:
    """``regflash compare`` as a dict: every variant (buf2d, 3-D buffered, reg2d, reg3d, reg3d
    iso-PE, rowfused, rowfused (spill), unfused, noc2d) on the design's array at each length of
    ``seq``: lengths up to ``max_sim_seq`` simulated on the RTL (bit-checked: the row's
    ``passed``), longer ones from the schedule and the cycle model (``passed`` None). ``glb``:
    the design's global buffer ("config"), none, or both. Returns ``{"design", "rows": [one
    dict per design and length: cycles, counters, energy, speedup_vs_buf2d, energy_vs_buf2d
    (this design's energy / buf2d's), energy_reduction_vs_buf2d (1 − that), source, passed],
    "claims": [the claims table's rows when claims=True]}``. ``kv_heads``: K/V heads for
    grouped-query attention (a divisor of ``heads``; default ``heads``). ``batch``: sequences of
    ``heads`` heads each, run one after another (each on its own K/V; the rows' tokens are the
    batch's). ``progress``: a callable taking
    (cycles simulated, cycles expected), True or False (default: tqdm when installed)."""
    seq = _lengths(seq)
    d = _native.Design(_integer(head_dim, "head_dim", 1), preset, None if config is None else os.fspath(config), None)
    args = (
        seq,
        bool(causal),
        _integer(heads, "heads", 1),
        _integer(max_sim_seq, "max_sim_seq", 0, 2**40),
        glb,
        bool(claims),
        None if spill_keys is None else _integer(spill_keys, "spill_keys"),
    )
    kv = None if kv_heads is None else _integer(kv_heads, "kv_heads", 1)
    b = _integer(batch, "batch", 1)
    out = json.loads(_watched(progress, "compare", lambda tell: d.compare(*args, tell, kv, b)))
    out["design"] = d.name
    return out
