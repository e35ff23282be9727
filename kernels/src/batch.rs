//! The varlen batch controller (`<top>_batch`, hdl/src/soc/batch.rs) at the level of what it
//! does to the core: which problems it starts it on, with which counters kept, the offset words
//! it reads, and the error it ends with.
//!
//! A batch of n sequences is described by two lists of n + 1 cumulative row offsets (`cu_q`,
//! `cu_k`, 32-bit words). Sequence b has the query rows cu_q[b] .. cu_q[b + 1] and the key rows
//! cu_k[b] .. cu_k[b + 1]; it runs on the core with Q and O at their base plus cu_q[b] rows and
//! K and V at theirs plus cu_k[b] rows, the lengths the differences. A sequence without queries
//! is skipped; one with queries but no keys runs (its O rows are 0). START is refused with
//! [`ERR_ADDRESS`] when the register block reports an address bit the core cannot represent
//! (nothing is read or launched), then with [`ERR_BATCH`] when a list address is not 4-byte
//! aligned. The batch stops with [`ERR_BATCH`] before a sequence whose offsets decrease or
//! whose lengths exceed 2^index_bits − 1, with [`ERR_ADDRESS`] before a sequence whose rows
//! start beyond the address range (a base plus its row offset ≥ 2^addr_bits), after a run that
//! ends with a core error (that code), or after one during which an abort was asked for
//! ([`ERR_ABORTED`], unless the core reported an error of its own). With no sequences
//! (`batch` = 0) the core runs the registers' problem as it is.

/// The STATUS error code of an aborted run.
pub const ERR_ABORTED: u64 = 6;
/// The STATUS error code of a bad batch description.
pub const ERR_BATCH: u64 = 9;
/// The STATUS error code of an address beyond the address range.
pub const ERR_ADDRESS: u64 = 10;

/// What the batch reads from the registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchRegs {
    /// Q, K, V, O base addresses.
    pub addr: [u64; 4],
    /// Q, K, V, O row strides in bytes.
    pub row_stride: [u64; 4],
    /// Q, K, V, O head strides in bytes.
    pub head_stride: [u64; 4],
    /// Q, K, V, O bytes per row (2 d; O 2 d or 4 d).
    pub row_bytes: [u64; 4],
    /// Heads, and Q heads per K/V head (0 or 1: one each).
    pub heads: u64,
    pub kv_group: u64,
    /// The single problem's lengths (`batch` = 0).
    pub q_len: u64,
    pub k_len: u64,
    /// Sequences in the batch (0: the single problem).
    pub batch: u64,
    pub cu_q_addr: u64,
    pub cu_k_addr: u64,
    /// The register block's `addr_over`: a base, stride or (varlen) list address has bits at or
    /// above `addr_bits`.
    pub addr_over: bool,
}

/// One start of the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Q, K, V, O addresses.
    pub addr: [u64; 4],
    pub q_len: u64,
    pub k_len: u64,
    /// The core keeps its counters (every launch after the batch's first).
    pub keep_counters: bool,
}

/// What a batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub launches: Vec<Launch>,
    /// The error code it ended with (0: none).
    pub error: u64,
    /// Offset words read from memory.
    pub words_read: u64,
}

/// Runs a batch. `cu_q(i)` and `cu_k(i)` give the lists' words; launch i ends with the core
/// error `core_error(i)` (0: none); `abort_in` is the launch during whose run an abort is
/// asked for.
pub fn run(
    regs: &BatchRegs,
    addr_bits: u32,
    index_bits: u32,
    cu_q: impl Fn(u64) -> u32,
    cu_k: impl Fn(u64) -> u32,
    core_error: impl Fn(usize) -> u64,
    abort_in: Option<usize>,
) -> Outcome {
    let range = 1u128 << addr_bits;
    let mut out = Outcome {
        launches: vec![],
        error: 0,
        words_read: 0,
    };
    // The end of launch i: the core's error, else the abort's.
    let after_run = |i: usize| match core_error(i) {
        0 if abort_in == Some(i) => ERR_ABORTED,
        e => e,
    };
    if regs.addr_over {
        out.error = ERR_ADDRESS;
        return out;
    }
    if regs.batch == 0 {
        if reaches_past(
            regs,
            regs.addr.map(u128::from),
            regs.q_len,
            regs.k_len,
            range,
        ) {
            out.error = ERR_ADDRESS;
            return out;
        }
        out.launches.push(Launch {
            addr: regs.addr,
            q_len: regs.q_len,
            k_len: regs.k_len,
            keep_counters: false,
        });
        out.error = after_run(0);
        return out;
    }
    if (regs.cu_q_addr | regs.cu_k_addr) & 3 != 0 {
        out.error = ERR_BATCH;
        return out;
    }
    let limit = (1u64 << index_bits) - 1;
    for b in 0..regs.batch {
        let (q_lo, k_lo) = (cu_q(b) as u64, cu_k(b) as u64);
        let (q_hi, k_hi) = (cu_q(b + 1) as u64, cu_k(b + 1) as u64);
        // The first sequence reads both ends of both lists, each later one the upper ends.
        out.words_read += if b == 0 { 4 } else { 2 };
        if q_hi < q_lo || k_hi < k_lo {
            out.error = ERR_BATCH;
            return out;
        }
        let (q_len, k_len) = (q_hi - q_lo, k_hi - k_lo);
        if q_len > limit || k_len > limit {
            out.error = ERR_BATCH;
            return out;
        }
        if q_len == 0 {
            continue;
        }
        let rows = [q_lo, k_lo, k_lo, q_lo];
        let addr: [u128; 4] = std::array::from_fn(|k| {
            regs.addr[k] as u128 + rows[k] as u128 * regs.row_stride[k] as u128
        });
        if addr.iter().any(|&a| a >= range) || reaches_past(regs, addr, q_len, k_len, range) {
            out.error = ERR_ADDRESS;
            return out;
        }
        let addr = addr.map(|a| a as u64);
        let i = out.launches.len();
        out.launches.push(Launch {
            addr,
            q_len,
            k_len,
            keep_counters: i > 0,
        });
        let e = after_run(i);
        if e != 0 {
            out.error = e;
            return out;
        }
    }
    out
}

/// A launch at `addr` (Q, K, V, O) of `q_len` queries and `k_len` keys reads or writes past
/// `range` bytes: some tensor's last byte, base + (last head) · head stride + (rows − 1) · row
/// stride + row bytes − 1, is at or past it (K and V's last head is (heads − 1) / kv_group; a
/// tensor of no rows, or a problem of no heads, reaches nothing).
fn reaches_past(regs: &BatchRegs, addr: [u128; 4], q_len: u64, k_len: u64, range: u128) -> bool {
    if regs.heads == 0 {
        return false;
    }
    let group = regs.kv_group.max(1);
    let last_head = [
        regs.heads - 1,
        (regs.heads - 1) / group,
        (regs.heads - 1) / group,
        regs.heads - 1,
    ];
    let rows = [q_len, k_len, k_len, q_len];
    (0..4).any(|t| {
        rows[t] > 0
            && addr[t]
                + last_head[t] as u128 * regs.head_stride[t] as u128
                + (rows[t] - 1) as u128 * regs.row_stride[t] as u128
                + regs.row_bytes[t] as u128
                > range
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs(batch: u64) -> BatchRegs {
        BatchRegs {
            addr: [0x1000, 0x2000, 0x3000, 0x4000],
            row_stride: [32, 64, 64, 16],
            head_stride: [0x100, 0x200, 0x200, 0x80],
            row_bytes: [32, 32, 32, 16],
            heads: 2,
            kv_group: 2,
            q_len: 5,
            k_len: 6,
            batch,
            cu_q_addr: 0x100,
            cu_k_addr: 0x200,
            addr_over: false,
        }
    }

    #[test]
    fn sequences_start_at_their_offsets_and_empty_ones_are_skipped() {
        let q = [2u32, 5, 5, 9];
        let k = [0u32, 4, 6, 7];
        let o = run(
            &regs(3),
            32,
            16,
            |i| q[i as usize],
            |i| k[i as usize],
            |_| 0,
            None,
        );
        assert_eq!(o.error, 0);
        assert_eq!(o.words_read, 8);
        assert_eq!(o.launches.len(), 2);
        let l = o.launches[1];
        assert_eq!(
            l.addr,
            [
                0x1000 + 5 * 32,
                0x2000 + 6 * 64,
                0x3000 + 6 * 64,
                0x4000 + 5 * 16
            ]
        );
        assert_eq!((l.q_len, l.k_len, l.keep_counters), (4, 1, true));
        assert!(!o.launches[0].keep_counters);
    }

    #[test]
    fn bad_lists_core_errors_and_aborts_stop_the_batch() {
        let wide = |v: Vec<u32>| move |i: u64| v[i as usize];
        let stop = |q: Vec<u32>, k: Vec<u32>, err: u64, abort| {
            run(
                &regs(2),
                32,
                16,
                wide(q),
                wide(k),
                |i| if i == 0 { err } else { 0 },
                abort,
            )
        };
        // Decreasing, too long.
        for (q, k) in [
            (vec![0, 3, 2], vec![0, 3, 4]),
            (vec![0, 1, 65537], vec![0, 1, 2]),
        ] {
            let o = stop(q, k, 0, None);
            assert_eq!((o.launches.len(), o.error), (1, ERR_BATCH));
        }
        let ok = || (vec![0, 1, 2], vec![0, 1, 2]);
        let (q, k) = ok();
        assert_eq!(stop(q, k, 7, Some(0)).error, 7, "the core's code wins");
        let (q, k) = ok();
        let o = stop(q, k, 0, Some(0));
        assert_eq!((o.launches.len(), o.error), (1, ERR_ABORTED));
        let misaligned = BatchRegs {
            cu_k_addr: 0x202,
            ..regs(2)
        };
        let o = run(&misaligned, 32, 16, |_| 0, |_| 0, |_| 0, None);
        assert_eq!((o.launches.len(), o.error, o.words_read), (0, ERR_BATCH, 0));
        // Queries without keys run (O = 0), like any sequence.
        let (q, k) = (vec![0, 1, 2], vec![0, 1, 1]);
        let o = stop(q, k, 0, None);
        assert_eq!((o.launches.len(), o.error), (2, 0));
        assert_eq!(o.launches[1].k_len, 0);
        // A sequence whose rows start beyond the address range stops the batch before it; one
        // whose last row ends at the range's end does not.
        let edge = BatchRegs {
            addr: [0xffff_ffe0, 0, 0, 0],
            row_stride: [0x20, 0, 0, 0],
            heads: 1,
            ..regs(2)
        };
        let o = run(
            &edge,
            32,
            16,
            |i| [0, 1, 2][i as usize],
            |i| [0, 1, 2][i as usize],
            |_| 0,
            None,
        );
        assert_eq!((o.launches.len(), o.error), (1, ERR_ADDRESS));
        // Bits beyond the range in a register: refused at START, nothing read.
        let over = BatchRegs {
            addr_over: true,
            ..regs(0)
        };
        let o = run(&over, 32, 16, |_| 0, |_| 0, |_| 0, None);
        assert_eq!(
            (o.launches.len(), o.error, o.words_read),
            (0, ERR_ADDRESS, 0)
        );
    }

    #[test]
    fn a_launch_reaching_past_the_range_is_refused() {
        // The single problem (5 queries, 6 keys, 2 heads): O's last byte is at 0x80 + 4 * 16 +
        // 15 past its base. The range ends just after it, then one byte short.
        let o_end = 0x80 + 4 * 16 + 16;
        let single = |addr: [u64; 4], kv_group: u64, k_len: u64| {
            let r = BatchRegs {
                addr,
                kv_group,
                k_len,
                ..regs(0)
            };
            run(&r, 32, 16, |_| 0, |_| 0, |_| 0, None)
        };
        let top = 1u64 << 32;
        let fits = single([0x10, 0x10, 0x10, top - o_end], 2, 6);
        assert_eq!((fits.launches.len(), fits.error), (1, 0));
        let past = single([0x10, 0x10, 0x10, top - o_end + 1], 2, 6);
        assert_eq!((past.launches.len(), past.error), (0, ERR_ADDRESS));
        // K reaches its last K/V head only: 2 heads in groups of 2 is one K/V head.
        let k_at = top - (5 * 64 + 32);
        assert_eq!(single([0x10, k_at, 0x10, 0x10], 2, 6).error, 0);
        assert_eq!(
            single([0x10, k_at, 0x10, 0x10], 1, 6).error,
            ERR_ADDRESS,
            "K head 1 is past the range"
        );
        // No keys: K and V reach nothing.
        assert_eq!(single([0x10, top - 1, 0x10, 0x10], 1, 0).error, 0);
    }
}
