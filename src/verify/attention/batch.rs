//! Varlen batches (FlashAttention's varlen interface): independent sequences of different
//! lengths packed along the rows of Q, K, V and O, described by cumulative offsets in memory,
//! run in one launch of the top (`BATCH`, `CU_Q_ADDR`, `CU_K_ADDR`; `hdl/src/soc/batch.rs`).

use super::*;

/// A batch: sequences sharing heads, K/V heads, head dimension, masking, output format and
/// tensor layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub seqs: Vec<Attention>,
}

/// Where a batch lives in memory: the packed tensors' layout (as one problem of the total
/// lengths), the two offset lists, and each sequence's first query and key row.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchImage {
    pub lay: Layout,
    pub cu_q: u64,
    pub cu_k: u64,
    pub q_rows: Vec<u64>,
    pub k_rows: Vec<u64>,
}

impl Batch {
    /// Random sequences of `pattern`: query lengths `q_lens`, key lengths `k_lens`.
    #[allow(clippy::too_many_arguments)]
    pub fn generate(
        pattern: Pattern,
        heads: usize,
        kv_heads: usize,
        q_lens: &[usize],
        k_lens: &[usize],
        head_dim: usize,
        causal: bool,
        out: OutFormat,
        layout: TensorLayout,
        seed: u64,
    ) -> Batch {
        let seqs = q_lens
            .iter()
            .zip(k_lens)
            .enumerate()
            .map(|(b, (&q, &k))| {
                Attention::generate(pattern, heads, q, k, head_dim, causal, out, seed + b as u64)
                    .grouped(kv_heads)
                    .laid_out(layout)
            })
            .collect();
        Batch { seqs }
    }

    /// The same sequences in `format` ([`Attention::converted`]).
    pub fn converted(self, format: hdl::format::Format) -> Batch {
        // One set of per-tensor scales for every sequence: they share the SCALE register.
        let scales = match self.seqs.first() {
            Some(a) if a.format != format => Attention::fitted_scales_of(&self.seqs, format),
            _ => None,
        };
        Batch {
            seqs: self
                .seqs
                .into_iter()
                .map(|a| a.converted_at(format, scales))
                .collect(),
        }
    }

    /// The sequences as the design `p` takes them (see [`Attention::for_design`]).
    pub fn for_design(self, p: &CoreParams) -> Batch {
        Batch {
            seqs: self.seqs.into_iter().map(|a| a.for_design(p)).collect(),
        }
    }

    /// The sequences of `packed` (FlashAttention's varlen inputs): one problem whose rows are
    /// the batch's, sequence after sequence, in every head; `q_lens` are the sequences' query
    /// rows, `k_lens` their key rows. Lengths that do not add up to the packed rows are
    /// refused.
    pub fn from_packed(packed: &Attention, q_lens: &[usize], k_lens: &[usize]) -> Result<Batch> {
        packed.check_values()?;
        ensure!(
            q_lens.len() == k_lens.len(),
            "{} query lengths but {} key lengths: give one of each per sequence",
            q_lens.len(),
            k_lens.len()
        );
        for (what, lens, rows, holds) in [
            ("query", q_lens, packed.q_len, "Q holds"),
            ("key", k_lens, packed.k_len, "K and V hold"),
        ] {
            let sum = lens.iter().try_fold(0usize, |s, &n| s.checked_add(n));
            ensure!(
                sum == Some(rows),
                "the {what} lengths add up to {} rows but {holds} {rows}: the lengths must add \
                 up to the packed rows",
                sum.map_or("more than 2^64".into(), |s| s.to_string())
            );
        }
        let d = packed.head_dim;
        // Rows `from .. from + n` of every head of `t` (heads × len × d).
        let rows = |t: &[u16], heads: usize, len: usize, from: usize, n: usize| -> Vec<u16> {
            (0..heads)
                .flat_map(|h| &t[(h * len + from) * d..(h * len + from + n) * d])
                .copied()
                .collect()
        };
        let (mut q0, mut k0) = (0, 0);
        let mut seqs = Vec::with_capacity(q_lens.len());
        for (&q_len, &k_len) in q_lens.iter().zip(k_lens) {
            seqs.push(Attention {
                heads: packed.heads,
                kv_heads: packed.kv_heads,
                layout: packed.layout,
                q_len,
                k_len,
                head_dim: d,
                q: rows(&packed.q, packed.heads, packed.q_len, q0, q_len),
                k: rows(&packed.k, packed.kv_heads, packed.k_len, k0, k_len),
                v: rows(&packed.v, packed.kv_heads, packed.k_len, k0, k_len),
                causal: packed.causal,
                out: packed.out,
                format: packed.format,
                qk: packed.qk,
                scales: packed.scales,
            });
            q0 += q_len;
            k0 += k_len;
        }
        Ok(Batch { seqs })
    }

    /// A batch's output (each sequence's heads × q_len × d values, one sequence after the
    /// other, as a run returns it) packed as [`Batch::from_packed`] takes the inputs: heads ×
    /// total queries × d.
    pub fn packed_out(&self, out: &[u32]) -> Vec<u32> {
        let d = self.seqs.first().map_or(0, |a| a.head_dim);
        let heads = self.seqs.first().map_or(0, |a| a.heads);
        let mut starts = Vec::with_capacity(self.seqs.len());
        let mut at = 0;
        for a in &self.seqs {
            starts.push(at);
            at += a.heads * a.q_len * d;
        }
        let mut packed = Vec::with_capacity(out.len());
        for h in 0..heads {
            for (a, &start) in self.seqs.iter().zip(&starts) {
                let from = start + h * a.q_len * d;
                packed.extend_from_slice(&out[from..from + a.q_len * d]);
            }
        }
        packed
    }

    /// Total query and key rows.
    pub fn totals(&self) -> (usize, usize) {
        let q = self.seqs.iter().map(|a| a.q_len).sum();
        let k = self.seqs.iter().map(|a| a.k_len).sum();
        (q, k)
    }

    /// The batch fits the core `p`: 1 to 2^index_bits − 1 sequences of 1 or more queries and
    /// keys each, sharing their shape, each valid on its own, and the packed tensors within
    /// the address range and the simulator's memory.
    pub fn validate(&self, p: &CoreParams) -> Result<()> {
        let n = self.seqs.len();
        ensure!(
            n >= 1 && (n as u64) < 1 << p.index_bits,
            "a varlen batch holds 1 to {} sequences, not {n}",
            (1u64 << p.index_bits) - 1
        );
        let a0 = &self.seqs[0];
        for (b, a) in self.seqs.iter().enumerate() {
            ensure!(
                a.q_len >= 1 && a.k_len >= 1,
                "sequence {b} of the batch is empty: every sequence needs a query and a key"
            );
            ensure!(
                (a.heads, a.kv_heads, a.head_dim, a.causal, a.out, a.layout)
                    == (
                        a0.heads,
                        a0.kv_heads,
                        a0.head_dim,
                        a0.causal,
                        a0.out,
                        a0.layout
                    ),
                "sequence {b} differs from the first in heads, K/V heads, d, masking, output or \
                 layout: a batch shares them"
            );
            a.validate(p)
                .with_context(|| format!("sequence {b} of the batch"))?;
        }
        let (tq, tk) = self.totals();
        // Each sequence's keys against rowfused's rows were checked above; the packed totals
        // against the index registers, the address reach and the simulator's memory.
        check_packed_shape(p, a0.heads, tq, tk, a0.head_dim, a0.out)
            .and_then(|_| check_sim_memory(a0.heads, tq, tk, a0.head_dim, a0.out))
            .context("the batch's packed tensors")?;
        Ok(())
    }

    /// The memory image: the packed tensors (as one problem of the total lengths, in the
    /// batch's layout), O poisoned, then the lists of cumulative offsets (32-bit words).
    pub fn image(&self, p: &CoreParams, timing: &MemoryTiming) -> Result<(Memory, BatchImage)> {
        self.validate(p)?;
        let a0 = &self.seqs[0];
        let (tq, tk) = self.totals();
        let lay = Layout::checked(
            (a0.heads, a0.kv_heads),
            tq,
            tk,
            a0.head_dim,
            (a0.in_bytes(), a0.out_bytes()),
            a0.layout,
        )
        .context("the batch's packed tensors overflow 64-bit addresses")?;
        let n = self.seqs.len();
        let cu_q = lay.size;
        let cu_k = cu_q + 4 * (n as u64 + 1);
        let mut size = (cu_k + 4 * (n as u64 + 1)).next_multiple_of(4096);
        let mut lay = lay;
        if p.row.scratch() {
            // unfused (rowfused's spill): one scratch region for the longest sequence (they run one at a time).
            let longest = self.seqs.iter().map(|a| a.k_len).max().unwrap_or(0);
            lay.s = size;
            size += super::driver::scratch_bytes(p, longest).next_multiple_of(4096);
        }
        let mut mem = new_memory(p, size, timing)?;
        let (mut q_rows, mut k_rows) = (vec![0u64], vec![0u64]);
        for a in &self.seqs {
            q_rows.push(q_rows.last().unwrap() + a.q_len as u64);
            k_rows.push(k_rows.last().unwrap() + a.k_len as u64);
        }
        let d = a0.head_dim;
        for (b, a) in self.seqs.iter().enumerate() {
            let (q0, k0) = (q_rows[b], k_rows[b]);
            let (q, k) = a.stored_qk()?;
            store(
                &mut mem,
                &q,
                a.in_bytes(),
                lay.q + q0 * lay.q_strides.0,
                lay.q_strides,
                a.q_len,
                d,
            )?;
            store(
                &mut mem,
                &k,
                a.in_bytes(),
                lay.k + k0 * lay.k_strides.0,
                lay.k_strides,
                a.k_len,
                d,
            )?;
            store(
                &mut mem,
                &a.v,
                a.in_bytes(),
                lay.v + k0 * lay.v_strides.0,
                lay.v_strides,
                a.k_len,
                d,
            )?;
        }
        poison_o(&mut mem, &lay, a0.heads * tq * d * a0.out_bytes())?;
        for (at, rows) in [(cu_q, &q_rows), (cu_k, &k_rows)] {
            let bytes: Vec<u8> = rows
                .iter()
                .flat_map(|&r| (r as u32).to_le_bytes())
                .collect();
            mem.load_bytes(at as usize, &bytes)?;
        }
        Ok((
            mem,
            BatchImage {
                lay,
                cu_q,
                cu_k,
                q_rows,
                k_rows,
            },
        ))
    }

    /// Each sequence's O as the core left it in memory.
    pub fn outputs(&self, mem: &Memory, img: &BatchImage) -> Vec<Vec<u32>> {
        self.seqs
            .iter()
            .enumerate()
            .map(|(b, a)| {
                let lay = Layout {
                    o: img.lay.o + img.q_rows[b] * img.lay.o_strides.0,
                    ..img.lay
                };
                read_out(mem, &lay, a)
            })
            .collect()
    }

    /// Memory beats the batch controller reads for the offsets: four words for the first
    /// sequence, two for each next one, one beat each.
    pub fn list_reads(&self) -> u64 {
        2 * (self.seqs.len() as u64 + 1)
    }
}
