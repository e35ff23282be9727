"""regflash's Python API: the model backend against an independent f64 reference and the
error contract, its layouts, grouped-query and varlen batches against their definitions, the
RTL backend bit for bit against the model, the inputs it refuses, estimate, and the backward
pass's gradients against an f64 backward and central differences."""

import numpy as np
import pytest

import regflash


def reference(q, k, v, causal):
    """Standard attention in f64 on (B, H, S, D) tensors, K/V heads shared by groups of Q
    heads; a causal row sees keys up to its diagonal (bottom-right aligned)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        seen = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        s = np.where(seen, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    den = p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, v) / np.where(den > 0, den, 1.0)


def tensors(shape_q, shape_kv, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(shape_q).astype(np.float16)
    k = rng.standard_normal(shape_kv).astype(np.float16)
    v = rng.standard_normal(shape_kv).astype(np.float16)
    return q, k, v


@pytest.mark.parametrize("causal", [False, True])
def test_model_meets_the_error_contract_against_an_independent_reference(causal):
    # medium: d = 32 (MiniLM's head dimension); 70 queries over 90 keys, a partial tile.
    q, k, v = tensors((2, 3, 70, 32), (2, 3, 90, 32), 1)
    fa = regflash.FlashAttention(32, causal, check=True)
    out = fa(q, k, v)
    assert out.dtype == np.float16 and out.shape == q.shape
    err = np.abs(out.astype(np.float64) - reference(q, k, v, causal)).max()
    r = fa.report
    assert r["passed"] and r["bit_exact"] and r["preset"] == "medium"
    # The report's error is this error, measured by the Rust side's own f64 reference.
    assert err == pytest.approx(r["max_abs_err"], rel=1e-9, abs=1e-12)
    assert 0 < err <= r["max_abs_err_bound"] < 5e-3
    # Cycles and counters from the cycle model and the schedule; energy from the table.
    assert r["cycles"] >= r["ideal_cycles"] > 0
    assert r["counters"]["macs"] > 0 and r["energy"]["total_pj"] > 0


def test_lazy_rescaling_keeps_the_contract_and_counts_its_rescales():
    # A stale max changes weights by powers of two: within the contract, close to pow2's
    # output, with fewer rescales and the blocks run against a stale max counted.
    q, k, v = tensors((1, 2, 48, 16), (1, 2, 48, 16), 5)
    pow2 = regflash.FlashAttention(16, out_dtype="float32", check=True)
    lazy = regflash.FlashAttention(16, out_dtype="float32", rescale="lazy", lazy_threshold=4, check=True)
    a, b = pow2(q, k, v), lazy(q, k, v)
    r, r2 = pow2.report, lazy.report
    assert r2["passed"] and r2["rescale"] == "lazy, threshold 4" and r["rescale"] == "pow2"
    assert np.abs(a - b).max() <= 1e-5
    assert r2["counters"]["rescales"] < r["counters"]["rescales"]
    assert r2["counters"]["rescales_avoided"] > 0 == r["counters"]["rescales_avoided"]


def test_bf16_operands_round_inputs_to_bf16_and_keep_bf16s_contract():
    # in_format="bf16": inputs rounded to BF16 (nearest even) in Python, the run within BF16's
    # contract; the short output holds BF16 values (low 16 bits zero); the same BF16 values
    # given as float32 give the same output bits; FP16-only output dtypes are refused.
    q, k, v = tensors((1, 2, 40, 16), (1, 2, 40, 16), 4)
    q32, k32, v32 = (x.astype(np.float32) * 3.0 for x in (q, k, v))
    fa = regflash.FlashAttention(16, in_format="bf16", check=True)
    o = fa(q32, k32, v32)
    assert fa.report["passed"] and fa.report["in_format"] == "bf16" and o.dtype == np.float32
    short = regflash.FlashAttention(16, in_format="bf16", out_dtype="bfloat16")(q32, k32, v32)
    assert short.dtype == np.float32 and not (short.view(np.uint32) & 0xFFFF).any()
    assert np.abs(short - o).max() <= 2.0 ** -8 * np.abs(o).max()
    rounded = [((x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) & 0xFFFF0000).view(np.float32) for x in (q32, k32, v32)]
    assert np.array_equal(fa(*rounded).view(np.uint32), o.view(np.uint32))
    fp16 = regflash.FlashAttention(16, out_dtype="float32")(q32, k32, v32)
    assert np.abs(fp16 - o).max() > 0  # a different arithmetic, not the FP16 design
    with pytest.raises(regflash.RegflashError, match="bfloat16"):
        regflash.FlashAttention(16, in_format="bf16", out_dtype="float16")


def fp8_magnitudes(fmt):
    """Every finite magnitude of an OCP FP8 format, from its definition: subnormals k·2^(1−bias−m),
    normals (1 + j/2^m)·2^(e−bias); E4M3's all-ones exponent holds normals but for its NaN code."""
    e_bits, m, bias, top = (4, 3, 7, 15) if fmt == "fp8e4m3" else (5, 2, 15, 30)
    sub = [k * 2.0 ** (1 - bias - m) for k in range(2**m)]
    norm = [(1 + j / 2**m) * 2.0 ** (e - bias) for e in range(1, top + 1) for j in range(2**m)
            if not (fmt == "fp8e4m3" and e == top and j == 2**m - 1)]
    return np.array(sorted(set(sub + norm)))


@pytest.mark.parametrize("fmt,dtype,largest", [("fp8e4m3", "float8_e4m3fn", 448.0),
                                                ("fp8e5m2", "float8_e5m2", 57344.0)])
def test_fp8_operands_run_within_their_contract(fmt, dtype, largest):
    # in_format="fp8e4m3"/"fp8e5m2": each tensor stored at the power-of-two scale that puts
    # its largest magnitude in the format's top binade; the run within the format's contract;
    # the short output (out_dtype naming the format) is the format's values at V's scale.
    q, k, v = tensors((1, 2, 40, 16), (1, 2, 40, 16), 5)
    fa = regflash.FlashAttention(16, in_format=fmt, check=True)
    o = fa(q, k, v)
    assert fa.report["passed"] and fa.report["in_format"] == fmt and o.dtype == np.float32
    assert fa.report["out_format"] == "f32"
    for name, x in (("q", q), ("k", k), ("v", v)):
        top = np.abs(x.astype(np.float64)).max() * 2.0 ** fa.scales[name]
        assert largest / 2 < top <= largest, (name, fa.scales)
    assert fa.report["operand_scales"] == [fa.scales[t] for t in ("q", "k", "v")]
    short = regflash.FlashAttention(16, in_format=fmt, out_dtype=dtype)
    s = short(q, k, v)
    mags = fp8_magnitudes(fmt)
    assert mags[-1] == largest and s.dtype == np.float32
    assert np.isin(np.abs(s.astype(np.float64) * 2.0 ** short.scales["v"]), mags).all()
    assert np.abs(s - o).max() <= 2.0 ** -2 * np.abs(o).max()
    # V a million times larger is the same problem at another scale: the output a million
    # times larger, exactly (the scales are powers of two); Q that large (a one-hot softmax)
    # runs within the contract too.
    big = fa(q, k, v.astype(np.float64) * 2.0**20)
    assert fa.report["passed"] and np.array_equal(big, o * np.float32(2.0**20))
    fa(q.astype(np.float64) * 2.0**20, k, v)
    assert fa.report["passed"] and fa.scales["q"] == fa.report["operand_scales"][0]
    # Operands already in the format (picked from its values) run bit for bit the same
    # whatever the float type they arrive in.
    rng = np.random.default_rng(3)
    x = rng.choice(np.concatenate([mags[:40], -mags[:40]]), size=(1, 1, 24, 16))
    assert np.array_equal(fa(x, x, x), fa(x.astype(np.float32), x, x.astype(np.float64)))
    with pytest.raises(regflash.RegflashError, match=dtype):
        regflash.FlashAttention(16, in_format=fmt, out_dtype="float16")


def quantized(x, rows, top):
    """Symmetric quantization of each group of `rows` rows (the last axis whole): round half
    to even, clamp to ±top, the scale max|x| / top in float32 (1 for a zero group)."""
    g = x.reshape(-1, rows * x.shape[-1])
    amax = np.abs(g).max(axis=1, keepdims=True)
    scale = np.where(amax == 0, 1.0, amax / top).astype(np.float32).astype(np.float64)
    return (np.clip(np.rint(g / scale), -top, top) * scale).reshape(x.shape)


@pytest.mark.parametrize("qk_format,top", [("int8", 127), ("int4", 7)])
def test_integer_qk_is_exact_attention_on_an_independent_quantization(qk_format, top):
    # qk_format: Q per token, K per block of Bc = 8 keys after subtracting K's mean over the
    # keys (which the softmax cancels), here quantized by numpy. The output is exact attention
    # on those values within FP16's contract; the report's two errors are these two errors;
    # the RTL gives the model's bits.
    q, k, v = tensors((1, 2, 40, 16), (1, 2, 40, 16), 6)
    fa = regflash.FlashAttention(16, qk_format=qk_format, out_dtype="float32", check=True)
    out = fa(q, k, v).astype(np.float64)
    r = fa.report
    assert r["passed"] and r["qk_format"] == qk_format and fa.design.qk_format == qk_format
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    dq = np.stack([quantized(q64[0, h], 1, top) for h in range(2)])[None]
    smooth = k64 - k64.mean(axis=2, keepdims=True)
    dk = np.stack([quantized(smooth[0, h], 8, top) for h in range(2)])[None]
    vmax = np.abs(v.astype(np.float64)).max()
    on_quantized = np.abs(out - reference(dq, dk, v, False)).max() / vmax
    on_original = np.abs(out - reference(q, k, v, False)).max() / vmax
    assert on_quantized <= 1e-3 and on_quantized == pytest.approx(r["max_rel_err"], rel=1e-6)
    assert on_original == pytest.approx(r["quant_rel_err"], rel=1e-6)
    assert on_original > on_quantized
    if qk_format == "int8":
        rtl = regflash.FlashAttention(16, qk_format="int8", out_dtype="float32", backend="rtl")
        assert np.array_equal(rtl(q, k, v).view(np.uint32), fa(q, k, v).view(np.uint32))
        assert rtl.report["cycles"] == fa.report["cycles"]
    with pytest.raises(regflash.RegflashError, match="not a supported QK format"):
        regflash.FlashAttention(16, qk_format="int2")


def test_layouts_and_out_dtype():
    q, k, v = tensors((1, 2, 40, 16), (1, 2, 40, 16), 2)
    bhsd = regflash.FlashAttention(16)(q, k, v)
    t = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    bshd = regflash.FlashAttention(16, layout="bshd")(t(q), t(k), t(v))
    assert np.array_equal(t(bshd).view(np.uint16), bhsd.view(np.uint16))
    # FP32 inputs are rounded to FP16 as the core reads them, and give FP32 outputs (the
    # core's FP32 output mode), which round to the FP16 outputs' neighbourhood.
    wide = regflash.FlashAttention(16)(q.astype(np.float32), k, v)
    assert wide.dtype == np.float32
    assert np.abs(wide - bhsd.astype(np.float32)).max() <= 1e-3


def test_grouped_query_attention_is_shared_kv_heads():
    q, k, v = tensors((1, 4, 24, 16), (1, 2, 32, 16), 3)
    fa = regflash.FlashAttention(16, True)
    shared = fa(q, k, v)
    assert fa.report["kv_heads"] == 2
    full = fa(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))
    assert np.array_equal(shared.view(np.uint16), full.view(np.uint16))


def test_varlen_batch_is_its_sequences_one_by_one():
    rng = np.random.default_rng(4)
    lens_q, lens_k = [5, 0, 17], [9, 3, 17]
    q = rng.standard_normal((sum(lens_q), 2, 16)).astype(np.float16)
    k = rng.standard_normal((sum(lens_k), 2, 16)).astype(np.float16)
    v = rng.standard_normal((sum(lens_k), 2, 16)).astype(np.float16)
    cu_q, cu_k = np.cumsum([0] + lens_q), np.cumsum([0] + lens_k)
    fa = regflash.FlashAttention(16, True, check=True)
    out = fa(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    assert fa.report["passed"] and len(fa.report["sequences"]) == 2
    for i in range(3):
        if lens_q[i] == 0:
            continue
        one = lambda x, cu: x[cu[i] : cu[i + 1]].transpose(1, 0, 2)[None]
        want = fa(one(q, cu_q), one(k, cu_k), one(v, cu_k))[0].transpose(1, 0, 2)
        assert np.array_equal(out[cu_q[i] : cu_q[i + 1]].view(np.uint16), want.view(np.uint16))


def test_dlpack_inputs_are_taken():
    class Producer:
        """Something that is not a numpy array but speaks DLPack (as a torch tensor does)."""

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    q, k, v = tensors((1, 1, 12, 16), (1, 1, 12, 16), 5)
    fa = regflash.FlashAttention(16)
    want = fa(q, k, v)
    got = fa(Producer(q), Producer(k), Producer(v))
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))

    class OnDevice(Producer):
        """A tensor in memory the host cannot read (as on a GPU)."""

        def __dlpack__(self, **kw):
            raise BufferError("the tensor is on device cuda:0")

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(regflash.RegflashError, match="move it to host memory"):
        fa(OnDevice(q), k, v)


def test_rtl_backend_is_bit_identical_to_the_model():
    # small (d = 16): grouped-query and causal, a partial tile; the Verilator build is cached.
    q, k, v = tensors((1, 2, 20, 16), (1, 1, 24, 16), 6)
    model = regflash.FlashAttention(16, True)
    rtl = regflash.FlashAttention(16, True, backend="rtl")
    a, b = model(q, k, v), rtl(q, k, v)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    # The RTL's counters are the model's: the schedule and the cycle model are exact.
    assert rtl.report["passed"] and rtl.report["counters"] == model.report["counters"]
    assert (model.report["backend"], rtl.report["backend"]) == ("model", "rtl")


@pytest.mark.parametrize(
    "make, want",
    [
        (lambda: regflash.FlashAttention(24), "no built-in preset is built for head_dim = 24"),
        (
            lambda: regflash.FlashAttention(16, preset="medium"),
            "medium is built for head_dim = 32",
        ),
        (lambda: regflash.FlashAttention(16, variant="reg4d"), "unknown variant `reg4d`"),
        (lambda: regflash.FlashAttention(16, backend="gpu"), 'unknown backend "gpu"'),
        (lambda: regflash.FlashAttention(16, config="/nonexistent.toml"), "cannot read config"),
        (
            lambda: regflash.FlashAttention(16, rescale="always"),
            'rescale = "always" \\(a floating-point running max',
        ),
        (
            lambda: regflash.FlashAttention(16, rescale="lazy", lazy_threshold=16),
            "lazy_threshold = 16 is out of range",
        ),
    ],
)
def test_bad_designs_are_refused_with_the_reason(make, want):
    with pytest.raises(regflash.RegflashError, match=want):
        make()


def test_bad_inputs_are_refused_with_the_reason():
    q, k, v = tensors((1, 2, 8, 16), (1, 2, 8, 16), 7)
    fa = regflash.FlashAttention(16)
    cases = [
        ((q[0], k, v), "give a 4-D tensor"),
        ((q, k[..., :8], v[..., :8]), "head dimension 8"),
        ((q, k, v[:, :, :4]), "they must match"),
        ((q, k[:, :1].repeat(3, 1), v[:, :1].repeat(3, 1)), "K/V heads"),
        ((q.astype(np.float32) * 1e5, k, v), r"q\[0, 0, 0, \d+\] = \S+ is outside the FP16 range"),
        ((q.astype(np.int32), k, v), "give float16, float32 or float64"),
    ]
    for args, want in cases:
        with pytest.raises(regflash.RegflashError, match=want):
            fa(*args)


def test_bf16_values_are_rounded_once_and_never_silently_overflow():
    # A float64 value beyond BF16's range is refused by name, as FP16's are: rounded to ±Inf
    # it made an all-NaN output that passed against a reference of the same ±Inf inputs.
    fa = regflash.FlashAttention(32, in_format="bf16", check=True)
    big = np.full((1, 1, 8, 32), 1e300)
    with pytest.raises(regflash.RegflashError, match=r"q\[0, 0, 0, 0\] = 1e300 is outside the BF16"):
        fa(big, np.ones_like(big), np.ones_like(big))
    # float64 rounds to BF16 in one step: 1 + 2^-8 + 2^-30 is above the tie between 1 and
    # 1 + 2^-7, so 1 + 2^-7 (through float32 it became the tie, and even: 1.0). Attention
    # over equal values of V returns that value.
    v = np.full((1, 1, 8, 32), 1 + 2.0**-8 + 2.0**-30)
    out = fa(np.zeros_like(v), np.zeros_like(v), v)
    assert fa.report["passed"] and np.all(out == 1 + 2.0**-7)


def test_nan_inputs_count_their_nan_outputs():
    # A NaN key makes every score it touches NaN, as the f64 reference does: the contract
    # holds, and the report counts the NaN outputs (none of them where the reference is
    # finite).
    q, k, v = tensors((1, 1, 8, 16), (1, 1, 8, 16), 8)
    k[0, 0, 3, 5] = np.nan
    fa = regflash.FlashAttention(16, check=True)
    out = fa(q, k, v)
    r = fa.report
    assert r["passed"] and r["nonfinite_outputs"] == np.isnan(out).sum() > 0
    assert r["nonfinite_where_finite"] == 0


@pytest.mark.parametrize(
    "call, want",
    [
        (lambda: regflash.FlashAttention(-1), "head_dim = -1 is out of range"),
        (lambda: regflash.FlashAttention(16.5), "head_dim = 16.5 is not a whole number"),
        (lambda: regflash.FlashAttention(16, threads=-1), "threads = -1 is out of range"),
        (lambda: regflash.FlashAttention(16, causal="sdpa"), 'causal = "sdpa"'),
        (lambda: regflash.FlashAttention(16, progress=3), "progress = 3"),
        (lambda: regflash.estimate([-5]), "seq = -5 is out of range"),
        (lambda: regflash.estimate([]), "seq is empty"),
        (lambda: regflash.compare([64], heads=0), "heads = 0 is out of range"),
    ],
)
def test_bad_numbers_are_regflash_errors(call, want):
    with pytest.raises(regflash.RegflashError, match=want):
        call()


def test_varlen_refuses_inconsistent_inputs_and_reports_the_whole_batch():
    rng = np.random.default_rng(9)
    q = rng.standard_normal((20, 2, 16)).astype(np.float16)
    k = rng.standard_normal((20, 2, 16)).astype(np.float16)
    fa = regflash.FlashAttention(16, check=True)
    cu = [0, 10, 20]
    with pytest.raises(regflash.RegflashError, match="K and V rows and heads must match"):
        fa(q, k, np.concatenate([k, k[:5]]), cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(regflash.RegflashError, match=r"cu_seqlens_k\[1\] = 10.7 is not a whole"):
        fa(q, k, k, cu_seqlens_q=cu, cu_seqlens_k=[0, 10.7, 20])
    out = fa(q, k, k, cu_seqlens_q=cu, cu_seqlens_k=[0, 4, 20])
    r, seqs = fa.report, fa.report["sequences"]
    # The documented keys, for the batch: lengths and counts summed, errors the worst.
    assert r["passed"] and r["seqlens"] == [[10, 4], [10, 16]] and r["seq_len"] == 20
    assert r["cycles"] == sum(s["cycles"] for s in seqs)
    assert r["counters"]["macs"] == sum(s["counters"]["macs"] for s in seqs)
    assert r["max_abs_err"] == max(s["max_abs_err"] for s in seqs) > 0
    want = np.concatenate([reference(q[a:b].transpose(1, 0, 2)[None], k[c:d].transpose(1, 0, 2)[None],
                                     k[c:d].transpose(1, 0, 2)[None], False)[0].transpose(1, 0, 2)
                           for (a, b), (c, d) in (((0, 10), (0, 4)), ((10, 20), (4, 20)))])
    assert np.abs(out - want).max() == pytest.approx(r["max_abs_err"], rel=1e-9)


@pytest.mark.parametrize("sq, sk", [(5, 19), (19, 5), (12, 12)])
def test_causal_alignment_top_left_is_torch_sdpas(sq, sk):
    # causal="top-left": row i sees keys 0..i (torch SDPA's is_causal); True and
    # "bottom-right" keep FlashAttention's (row i sees keys up to i + sk - sq).
    rng = np.random.default_rng(sq * 100 + sk)
    q = rng.standard_normal((1, 2, sq, 16)).astype(np.float16)
    k = rng.standard_normal((1, 2, sk, 16)).astype(np.float16)
    v = rng.standard_normal((1, 2, sk, 16)).astype(np.float16)
    top = regflash.FlashAttention(16, causal="top-left", out_dtype="float32", check=True)
    out = top(q, k, v)
    pad = max(sq - sk, 0)  # the reference's bottom-right mask shifted to the top left
    qpad = np.concatenate([q, np.zeros((1, 2, sk - sq, 16), q.dtype)], 2) if sk > sq else q
    want = reference(qpad, k, v, True)[:, :, :sq] if sk > sq else reference(
        q, np.concatenate([k, np.zeros((1, 2, pad, 16), k.dtype)], 2),
        np.concatenate([v, np.zeros((1, 2, pad, 16), v.dtype)], 2), True)
    if sq > sk:  # rows past the keys see every key: the padded keys must not count
        want[:, :, sk:] = reference(q[:, :, sk:], k, v, False)
    assert top.report["passed"] and top.report["causal_alignment"] == "top-left"
    assert np.abs(out - want).max() <= top.report["max_abs_err_bound"]
    bottom = regflash.FlashAttention(16, causal="bottom-right", out_dtype="float32", check=True)
    assert np.array_equal(bottom(q, k, v), regflash.FlashAttention(16, True, out_dtype="float32")(q, k, v))
    assert np.abs(bottom(q, k, v) - reference(q, k, v, True)).max() <= bottom.report["max_abs_err_bound"]
    assert (sq == sk) == np.array_equal(bottom(q, k, v), out)


def test_an_interrupt_stops_the_run_and_progress_is_reported():
    # Ctrl-C (here interrupt_main, from the progress callback) stops a run between heads and
    # is raised then, not when the run would have ended; an uninterrupted run reports every
    # step done.
    # A shell's background job starts with SIGINT ignored, and then Python installs no
    # handler and interrupt_main does nothing: the test installs Python's own for its run.
    import _thread
    import signal

    q, k, v = tensors((1, 32, 256, 16), (1, 32, 256, 16), 10)
    seen = []

    def interrupt(done, total):
        seen.append((done, total))
        if len(seen) == 1:
            _thread.interrupt_main()

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            regflash.FlashAttention(16, threads=1, progress=interrupt, check=True)(q, k, v)
    finally:
        signal.signal(signal.SIGINT, before)
    assert seen[-1][0] < seen[-1][1] == 64  # two steps a head: the model, the references
    steps = []
    fa = regflash.FlashAttention(16, progress=lambda d, t: steps.append((d, t)), check=True)
    fa(q, k, v)
    assert fa.report["passed"] and steps[-1] == (64, 64)


def test_an_unchecked_run_gives_the_same_bits_and_says_it_was_not_checked():
    # The model backend's default, check=False, skips the references, not the model: the same
    # output, a report that claims nothing (also when a top-left mask merges two runs); the
    # RTL backend always checks.
    q, k, v = tensors((1, 2, 40, 16), (1, 2, 24, 16), 4)
    for causal in (False, "top-left"):
        checked = regflash.FlashAttention(16, causal=causal, out_dtype="float32", check=True)
        unchecked = regflash.FlashAttention(16, causal=causal, out_dtype="float32")
        assert np.array_equal(checked(q, k, v), unchecked(q, k, v))
        assert checked.report["passed"] and checked.report["checked"]
        r = unchecked.report
        assert not r["checked"] and not r["passed"] and not r["accuracy_ok"]
        assert any("not checked" in f for f in r["failures"]), r["failures"]
        assert np.isnan(float(r["max_abs_err"])) and np.isnan(float(r["max_abs_err_bound"]))
        assert r["bit_exact"] and r["counters"] == checked.report["counters"]
    with pytest.raises(regflash.RegflashError, match="always checked"):
        regflash.FlashAttention(16, backend="rtl", check=False)
    assert regflash.FlashAttention(16, backend="rtl").check
    with pytest.raises(regflash.RegflashError, match="check = 'no'"):
        regflash.FlashAttention(16, check="no")


def test_estimate_returns_the_cycle_model_figures():
    e = regflash.estimate([1024, 4096], head_dim=128, preset="seed", variant="reg3d")
    assert e["design"] == "seed" and e["variant"] == "reg3d"
    a, b = e["points"]
    assert (a["seq_len"], b["seq_len"]) == (1024, 4096)
    # Non-causal: the work grows as the square of the length (16×); the cycles a little
    # less (a tile's fixed costs weigh less at 4,096).
    assert 14 < b["cycles"] / a["cycles"] <= 16
    assert 0 < a["utilization"] <= 1 and a["energy"]["total_pj"] > 0


def test_compare_shares_kv_heads_and_refuses_a_group_that_does_not_divide():
    # npu16 (a GLB), from the model: two query heads on one K/V head read K and V once.
    mha = regflash.compare([512], preset="npu16", head_dim=128, heads=2, max_sim_seq=0)
    gqa = regflash.compare([512], preset="npu16", head_dim=128, heads=2, kv_heads=1, max_sim_seq=0)
    for a, b in zip(mha["rows"], gqa["rows"]):
        assert (a["kv_heads"], b["kv_heads"]) == (2, 1)
        assert b["counters"]["read_beats"] < a["counters"]["read_beats"], a["design"]
    with pytest.raises(regflash.RegflashError, match="must divide"):
        regflash.compare([512], preset="npu16", head_dim=128, heads=2, kv_heads=3, max_sim_seq=0)
    # A batch of two such sequences: each reads its own K/V head.
    two = regflash.compare([512], preset="npu16", head_dim=128, heads=2, kv_heads=1, batch=2, max_sim_seq=0)
    for a, b in zip(gqa["rows"], two["rows"]):
        assert b["kv_heads"] == 2 and b["tokens"] == 2 * a["tokens"]
        assert b["counters"]["read_beats"] == 2 * a["counters"]["read_beats"], a["design"]
    with pytest.raises(regflash.RegflashError, match="batch = 0 is out of range"):
        regflash.compare([512], preset="npu16", head_dim=128, batch=0, max_sim_seq=0)


def test_compare_returns_every_design_and_the_claims():
    # small: 64 tokens simulated on the RTL (bit-checked), 2,048 from the schedule and the
    # cycle model; rowfused (spill) with S arrays of 32 keys.
    c = regflash.compare([64, 2048], head_dim=16, max_sim_seq=64, claims=True, spill_keys=32)
    rows = c["rows"]
    designs = [r["design"] for r in rows[:9]]
    assert designs == [
        "buf2d",
        "3-D buffered",
        "reg2d",
        "reg3d",
        "reg3d iso-PE",
        "rowfused",
        "rowfused (spill)",
        "unfused",
        "noc2d",
    ]
    assert [r["source"] for r in rows] == ["rtl"] * 9 + ["model"] * 9
    assert all(r["report"]["passed"] and r["passed"] for r in rows[:9])
    assert all(r["passed"] is None for r in rows[9:])  # no data runs through the cycle model
    assert all(r["energy_reduction_vs_buf2d"] == pytest.approx(1 - r["energy_vs_buf2d"]) for r in rows)
    spill, sized = rows[9 + 6], rows[9 + 5]
    # At 2,048 keys the spill sends 252 of a row's 256 blocks out and back.
    assert spill["counters"]["write_beats"] > sized["counters"]["write_beats"]
    verdicts = [r["verdict"] for r in c["claims"]]
    assert len(verdicts) >= 11
    assert all(
        v.startswith(("reproduced", "not reproduced", "not measured", "against "))
        for v in verdicts
    )


def reference_grads(q, k, v, dout, causal):
    """The exact gradients of ``reference`` in f64 on (B, H, S, D) tensors: dV = Pᵀ dO,
    dP = dO Vᵀ, dS = P ∘ (dP − rowsum(dP ∘ P)), dQ = dS K / √d, dK = dSᵀ Q / √d; grouped
    K/V heads sum their group's."""
    q, k, v, dout = (x.astype(np.float64) for x in (q, k, v, dout))
    group = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(q.shape[-1])
    s = np.einsum("bhqd,bhkd->bhqk", q, kk) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        seen = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        s = np.where(seen, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    den = p.sum(-1, keepdims=True)
    p = p / np.where(den > 0, den, 1.0)
    dv = np.einsum("bhqk,bhqd->bhkd", p, dout)
    dp = np.einsum("bhqd,bhkd->bhqk", dout, vv)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bhkd->bhqd", ds, kk) * scale
    dk = np.einsum("bhqk,bhqd->bhkd", ds, q) * scale
    fold = lambda x: x.reshape(x.shape[0], k.shape[1], group, *x.shape[2:]).sum(2)
    return dq, fold(dk), fold(dv)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_gradients_against_f64_and_finite_differences(causal):
    # FlashAttention's layout (B, S, H, D), GQA (4 query heads on 2 K/V heads), medium (d =
    # 32), 40 queries over 56 keys: partial tiles and blocks.
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 40, 4, 32)).astype(np.float16)
    k = rng.standard_normal((1, 56, 2, 32)).astype(np.float16)
    v = rng.standard_normal((1, 56, 2, 32)).astype(np.float16)
    dout = rng.standard_normal((1, 40, 4, 32)).astype(np.float16)
    dq, dk, dv, rep = regflash.flash_attn_backward(
        dout, q, k, v, causal, out_dtype="float32", report=True
    )
    assert rep["passed"] and rep["checked"] and rep["kv_heads"] == 2
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert dq.dtype == np.float32
    # Against an f64 backward written here: within two FP16 ulps of each gradient's scale
    # (measured: 2.3e-4 to 4.2e-4 of it).
    to_bhsd = lambda x: x.transpose(0, 2, 1, 3)
    want = reference_grads(*(to_bhsd(x) for x in (q, k, v, dout)), causal)
    for got, w, name in zip((dq, dk, dv), want, "qkv"):
        w = to_bhsd(w)
        scale = np.abs(w).max()
        err = np.abs(got - w).max()
        assert err <= 2 * 2.0 ** -11 * scale, f"d{name}: {err} at scale {scale}"
    # The report's errors are within their bounds, and here below the plain FP16 backward's.
    for g in ("dq", "dk", "dv"):
        assert rep[g]["max_abs_err"] <= min(rep[g]["bound"], rep[g]["plain_err"])
    # Central differences of L = Σ dout ∘ attention(q, k, v) in f64, at a few elements of
    # each input, against regflash's gradients.
    loss = lambda q_, k_, v_: float((reference(q_, k_, v_, causal) * to_bhsd(dout)).sum())
    base = [to_bhsd(x).astype(np.float64) for x in (q, k, v)]
    eps = 1e-4
    for which, grad in enumerate((dq, dk, dv)):
        g = to_bhsd(grad)
        for at in [(0, 1, 3, 5), (0, 1, 17, 31), (0, 0, 0, 0)]:
            xs = [x.copy() for x in base]
            xs[which][at] += eps
            up = loss(*xs)
            xs[which][at] -= 2 * eps
            fd = (up - loss(*xs)) / (2 * eps)
            # (measured: within 1e-4)
            assert abs(fd - g[at]) <= 2e-3 * max(1.0, abs(fd)), (which, at, fd, g[at])


def test_flash_attn_func_and_backward_refuse_what_they_cannot_run():
    q = np.zeros((1, 8, 2, 16), np.float16)
    out = regflash.flash_attn_func(q, q, q, causal=True)
    assert out.shape == q.shape and out.dtype == np.float16
    dq, dk, dv = regflash.flash_attn_backward(q, q, q, q)
    assert dq.dtype == np.float16 and not dq.any() and not dk.any() and not dv.any()
    with pytest.raises(regflash.RegflashError, match="dout has shape"):
        regflash.flash_attn_backward(q[:, :4], q, q, q)
    with pytest.raises(regflash.RegflashError, match="bottom-right"):
        regflash.flash_attn_backward(q, q, q, q, causal="top-left")
    with pytest.raises(regflash.RegflashError, match="fp16 or bf16"):
        regflash.flash_attn_backward(q, q, q, q, in_format="fp8e4m3")


def test_varlen_backward_is_its_sequences_one_by_one():
    # Three sequences (one with no queries) of a varlen batch, GQA, causal: each sequence's
    # rows of dq, dk and dv equal that sequence's own call, bit for bit.
    rng = np.random.default_rng(3)
    cu_q, cu_k = [0, 9, 9, 30], [0, 12, 20, 45]
    q = rng.standard_normal((30, 4, 16)).astype(np.float16)
    k = rng.standard_normal((45, 2, 16)).astype(np.float16)
    v = rng.standard_normal((45, 2, 16)).astype(np.float16)
    dout = rng.standard_normal((30, 4, 16)).astype(np.float16)
    dq, dk, dv, rep = regflash.flash_attn_backward(
        dout, q, k, v, True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, report=True
    )
    assert rep["passed"] and len(rep["sequences"]) == 2
    for (q0, q1), (k0, k1) in zip(zip(cu_q, cu_q[1:]), zip(cu_k, cu_k[1:])):
        if q1 == q0:
            assert not dk[k0:k1].any() and not dv[k0:k1].any()
            continue
        one = regflash.flash_attn_backward(
            dout[None, q0:q1], q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], True
        )
        for got, want in zip((dq[q0:q1], dk[k0:k1], dv[k0:k1]), one):
            assert np.array_equal(got.view(np.uint16), want[0].view(np.uint16))
    with pytest.raises(regflash.RegflashError, match="must rise from 0"):
        regflash.flash_attn_backward(dout, q, k, v, cu_seqlens_q=[0, 40], cu_seqlens_k=[0, 45])
