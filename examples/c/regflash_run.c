/* A minimal bare-metal driver for regflash_top, written against the generated regflash.h
 * (`regflash gen --out build/` writes it beside the Verilog). It programs one problem, starts
 * it, waits for DONE (by polling; with IRQ_ENABLE set, an interrupt handler would call
 * regflash_finish instead), checks STATUS and reads every counter. `base` is where the SoC maps
 * the AXI4-Lite window. tests/soc.rs compiles it with REGFLASH_IO_HOOKS into the Verilator
 * testbench and runs regflash_run on the simulated top. */
#include <stdint.h>

#include "regflash.h"

/* Tensors: heads x len x head_dim, FP16 (O: FP16, or FP32 with out_f32), row-major (heads,
 * len, d); kv_heads K/V heads shared by the query heads in groups (grouped-query attention). */
struct regflash_problem {
    uint64_t q, k, v, o;
    uint32_t heads, kv_heads, q_len, k_len;
    int causal, out_f32;
};

static void regflash_write64(volatile void *base, uint32_t lo, uint64_t v) {
    regflash_write(base, lo, (uint32_t)v);
    regflash_write(base, lo + 4u, (uint32_t)(v >> 32));
}

/* 0 if `base` holds a regflash core generated with this header. */
int regflash_probe(volatile void *base) {
    if (regflash_read(base, REGFLASH_ID) != REGFLASH_MAGIC) return -1;
    uint32_t dim = regflash_read(base, REGFLASH_ID_DIM);
    uint32_t d = (dim & REGFLASH_ID_DIM_HEAD_DIM_MASK) >> REGFLASH_ID_DIM_HEAD_DIM_SHIFT;
    return d == REGFLASH_CFG_HEAD_DIM ? 0 : -2;
}

void regflash_start(volatile void *base, const struct regflash_problem *p, int irq) {
    uint64_t row = 2u * REGFLASH_CFG_HEAD_DIM;
    uint64_t o_row = (p->out_f32 ? 4u : 2u) * REGFLASH_CFG_HEAD_DIM;
    regflash_write64(base, REGFLASH_Q_ADDR_LO, p->q);
    regflash_write64(base, REGFLASH_K_ADDR_LO, p->k);
    regflash_write64(base, REGFLASH_V_ADDR_LO, p->v);
    regflash_write64(base, REGFLASH_O_ADDR_LO, p->o);
    /* (heads, len, d): a row after the other, a head after the other. */
    regflash_write64(base, REGFLASH_Q_ROW_STRIDE_LO, row);
    regflash_write64(base, REGFLASH_Q_HEAD_STRIDE_LO, row * p->q_len);
    regflash_write64(base, REGFLASH_K_ROW_STRIDE_LO, row);
    regflash_write64(base, REGFLASH_K_HEAD_STRIDE_LO, row * p->k_len);
    regflash_write64(base, REGFLASH_V_ROW_STRIDE_LO, row);
    regflash_write64(base, REGFLASH_V_HEAD_STRIDE_LO, row * p->k_len);
    regflash_write64(base, REGFLASH_O_ROW_STRIDE_LO, o_row);
    regflash_write64(base, REGFLASH_O_HEAD_STRIDE_LO, o_row * p->q_len);
    regflash_write(base, REGFLASH_HEADS, p->heads);
    regflash_write(base, REGFLASH_KV_GROUP, p->heads / p->kv_heads);
    regflash_write(base, REGFLASH_Q_LEN, p->q_len);
    regflash_write(base, REGFLASH_K_LEN, p->k_len);
    regflash_write(base, REGFLASH_BATCH, 0u);
    regflash_write(base, REGFLASH_FLAGS,
                   (p->causal ? REGFLASH_FLAGS_CAUSAL_MASK : 0u) |
                       (p->out_f32 ? REGFLASH_FLAGS_OUT_F32_MASK : 0u));
    regflash_write(base, REGFLASH_SCALE, REGFLASH_CFG_SCALE);
    regflash_write(base, REGFLASH_IRQ_STATUS, REGFLASH_IRQ_STATUS_DONE_MASK);
    regflash_write(base, REGFLASH_IRQ_ENABLE, irq ? 1u : 0u);
    regflash_write(base, REGFLASH_CTRL, REGFLASH_CTRL_START_MASK);
}

/* STATUS.ERR_CODE (0: success), the counters copied out, the interrupt acknowledged. */
uint32_t regflash_finish(volatile void *base, uint64_t counters[REGFLASH_COUNTERS]) {
    uint32_t s = regflash_read(base, REGFLASH_STATUS);
    for (uint32_t i = 0; i < REGFLASH_COUNTERS; i++) counters[i] = regflash_counter(base, i);
    regflash_write(base, REGFLASH_IRQ_STATUS, REGFLASH_IRQ_STATUS_DONE_MASK);
    return (s & REGFLASH_STATUS_ERR_CODE_MASK) >> REGFLASH_STATUS_ERR_CODE_SHIFT;
}

/* A problem the registers cannot hold: lengths past REGFLASH_CFG_MAX_LEN, or query heads that
 * the K/V heads do not divide (this driver's own code, beyond STATUS.ERR_CODE's range). */
#define REGFLASH_RUN_BAD_SHAPE 0x100u

/* The rules of regflash.h a problem must keep, checked before the hardware sees it: the code
 * the core would end with (REGFLASH_ERR_*), REGFLASH_RUN_BAD_SHAPE, or 0. */
uint32_t regflash_check(const struct regflash_problem *p) {
    const uint64_t bases[4] = {p->q, p->k, p->v, p->o};
    for (int i = 0; i < 4; i++) {
        if (bases[i] % REGFLASH_CFG_ALIGN != 0u) return REGFLASH_ERR_MISALIGNED;
        if (REGFLASH_CFG_ADDR_BITS < 64u && (bases[i] >> REGFLASH_CFG_ADDR_BITS) != 0u)
            return REGFLASH_ERR_ADDRESS;
    }
    if (p->heads > REGFLASH_CFG_MAX_LEN || p->q_len > REGFLASH_CFG_MAX_LEN ||
        p->k_len > REGFLASH_CFG_MAX_LEN || p->kv_heads == 0u || p->heads % p->kv_heads != 0u)
        return REGFLASH_RUN_BAD_SHAPE;
    return 0u;
}

/* Check, start, poll, finish. */
uint32_t regflash_run(volatile void *base, const struct regflash_problem *p,
                      uint64_t counters[REGFLASH_COUNTERS]) {
    uint32_t refused = regflash_check(p);
    if (refused != 0u) return refused;
    regflash_start(base, p, 0);
    while (!(regflash_read(base, REGFLASH_STATUS) & REGFLASH_STATUS_DONE_MASK)) {
    }
    return regflash_finish(base, counters);
}
