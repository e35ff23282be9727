//! What the core's schedule fixes exactly, from the problem's shape alone: the blocks it
//! computes and skips, the MACs, the register-file, P-bank, S-array and vertical-link
//! accesses, the broadcasts, the row engines' operations and the memory beats. Every RTL run
//! is held to these counts (`verify::attention::check`), so they are validated at every
//! tested point; they cost O(query rows), so they also serve sequence lengths the RTL cannot
//! simulate (`regflash compare`'s schedule rows). Cycles and stalls are not here: they depend
//! on timing (the cycle model's business).

use hdl::core::CoreParams;

/// An attention problem's shape: what the schedule depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub heads: usize,
    pub q_len: usize,
    pub k_len: usize,
    pub head_dim: usize,
    pub causal: bool,
    /// Bytes of one output value (2: FP16, 4: FP32).
    pub out_bytes: usize,
    /// Q heads per K/V head (1: multi-head attention; more: grouped-query attention, Q head h
    /// reading K/V head h / kv_group). Only the GLB's hits depend on it.
    pub kv_group: usize,
}

/// K and V beats (both tensors) by where they come from: hits served by the GLB, fills (read
/// from memory and kept in the GLB), streams (read from memory past a full GLB: spills). No
/// GLB: every beat streams, and none is a spill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvTraffic {
    pub hit: u64,
    pub fill: u64,
    pub stream: u64,
}

impl KvTraffic {
    /// Beats read from memory.
    pub fn from_memory(&self) -> u64 {
        self.fill + self.stream
    }
}

/// The keys the query tile starting at row `q_base` (`br` rows) needs: all of K, or for causal
/// attention the keys up to its last row's diagonal (bottom-right aligned).
/// The blocks of a tile over `keys` keys that go through the scratch region: every block in
/// unfused, those past the S arrays in rowfused with `spill`, none elsewhere.
pub fn tile_spilled_blocks(p: &CoreParams, keys: usize) -> u64 {
    if !p.row.scratch() {
        return 0;
    }
    (keys.div_ceil(p.bc() as usize) as u64).saturating_sub(hdl::soc::regmap::scratch_held_blocks(p))
}

/// The beats of S and of P a tile of `rows` query rows over `keys` keys writes out (a block
/// row of each in whole beats, per block of Bc keys that goes through the scratch region;
/// rowfused's spill writes S alone).
pub fn tile_scratch_beats(p: &CoreParams, rows: u64, keys: usize) -> (u64, u64) {
    let beat = (p.dma.width / 8) as u64;
    let blocks = tile_spilled_blocks(p, keys);
    let (sb, pb) = p.row.scratch_row_bytes();
    let pb = if p.row.s_in_memory() { pb } else { 0 };
    (
        rows * blocks * sb as u64 / beat,
        rows * blocks * pb as u64 / beat,
    )
}

pub fn needed_keys(q_len: usize, k_len: usize, causal: bool, q_base: usize, br: usize) -> usize {
    if !causal {
        return k_len;
    }
    let end = (q_base + br).min(q_len);
    (end + k_len).saturating_sub(q_len).min(k_len)
}

/// The keys query `i` sees: all of K, or when causal those up to its diagonal, j ≤ i + k_len −
/// q_len (`kernels::reference::visible`, counted in closed form).
pub fn visible_keys(i: usize, q_len: usize, k_len: usize, causal: bool) -> usize {
    if !causal {
        return k_len;
    }
    (i + 1 + k_len).saturating_sub(q_len).min(k_len)
}

impl Shape {
    /// A head's query tiles (`br` rows each): each one's query rows and the keys it needs.
    fn tiles(&self, br: usize) -> impl Iterator<Item = (u64, usize)> + '_ {
        (0..self.q_len).step_by(br).map(move |q_base| {
            let rows = (self.q_len - q_base).min(br) as u64;
            let keys = needed_keys(self.q_len, self.k_len, self.causal, q_base, br);
            (rows, keys)
        })
    }

    /// Per head: the visible query-key pairs, and the queries that see a key.
    pub fn visible_pairs(&self) -> (u64, u64) {
        let (mut pairs, mut seeing) = (0u64, 0u64);
        for i in 0..self.q_len {
            let n = visible_keys(i, self.q_len, self.k_len, self.causal) as u64;
            pairs += n;
            seeing += (n > 0) as u64;
        }
        (pairs, seeing)
    }

    /// Per head: the (query row, key block) pairs in which the row sees a key (its visible
    /// keys are a prefix: `ceil(visible / bc)` blocks a row).
    pub fn row_blocks(&self, bc: usize) -> u64 {
        (0..self.q_len)
            .map(|i| visible_keys(i, self.q_len, self.k_len, self.causal).div_ceil(bc) as u64)
            .sum()
    }

    /// Blocks computed and skipped over all heads and tiles (the causal prefix is computed).
    pub fn blocks(&self, p: &CoreParams) -> (u64, u64) {
        let (br, bc) = (p.br() as usize, p.bc() as usize);
        let per_tile = self.k_len.div_ceil(bc) as u64;
        let (mut computed, mut all) = (0u64, 0u64);
        for (_, keys) in self.tiles(br) {
            computed += keys.div_ceil(bc) as u64;
            all += per_tile;
        }
        let h = self.heads as u64;
        (h * computed, h * (all - computed))
    }

    /// MAC steps of the schedule (QK and PV of every computed block): a lower bound on cycles
    /// (one step per cycle in 2-D designs) and the basis of the hang limit.
    pub fn mac_steps(&self, p: &CoreParams) -> u64 {
        let (qk, pv) = p.block_steps();
        self.blocks(p).0 * (qk + pv) as u64
    }

    /// Beats of one K or V row.
    pub fn kv_row_beats(&self, p: &CoreParams) -> u64 {
        p.operand_row_bytes() as u64 / (p.dma.width / 8) as u64
    }

    /// K and V beats by source. Each tile of each Q head walks its K/V head's needed keys from
    /// key 0 (a descriptor per tensor, none for a tile that needs no key). With a GLB of
    /// `region_beats` per tensor, a descriptor's first `filled` beats hit (`filled`: what
    /// earlier descriptors of the same K/V head left, reset when the K/V head changes), the
    /// beats after them up to the region's end fill it, and the rest stream (`crate::glb`).
    pub fn kv_traffic(&self, p: &CoreParams) -> KvTraffic {
        let mut t = KvTraffic::default();
        self.kv_walk(p, |hit, fill, stream| {
            t.hit += 2 * hit;
            t.fill += 2 * fill;
            t.stream += 2 * stream;
        });
        t
    }

    /// The GLB policy over every K (and, alike, V) descriptor of the schedule, in order: `f`
    /// gets each one's hits, fills and streamed beats ([`Shape::kv_traffic`]).
    fn kv_walk(&self, p: &CoreParams, mut f: impl FnMut(u64, u64, u64)) {
        let rb = self.kv_row_beats(p);
        let br = p.br() as usize;
        let region = p.dma.glb.map_or(0, |g| g.region_beats as u64);
        let group = self.kv_group.max(1);
        let mut filled = 0u64;
        for h in 0..self.heads {
            if h % group == 0 {
                filled = 0;
            }
            for (_, keys) in self.tiles(br) {
                let need = rb * keys as u64;
                let (hit, fill, stream, mark) = hdl::mem::glb::take(need, filled, region);
                f(hit, fill, stream);
                filled = mark;
            }
        }
    }

    /// Per GLB bank group (`hdl::mem::glb::GlbConfig::place`): the words each of its banks reads
    /// (hits) and writes (fills), from the same walk as [`Shape::kv_traffic`]: a descriptor's
    /// hits are its walk's beats 0..hit, its fills the beats after them; K's beat i is in
    /// group i mod G, V's in group (i + G/2) mod G. Empty without a GLB.
    pub fn glb_banks(&self, p: &CoreParams) -> Vec<(u64, u64)> {
        let Some(g) = p.dma.glb else {
            return vec![];
        };
        let groups = g.groups as u64;
        // Beats i in [0, x) with (i + off) mod G = n.
        let count = |x: u64, off: u64, n: u64| {
            let r = (n + groups - off % groups) % groups;
            if x > r {
                (x - r - 1) / groups + 1
            } else {
                0
            }
        };
        let mut banks = vec![(0u64, 0u64); g.groups as usize];
        self.kv_walk(p, |hit, fill, _| {
            for (n, b) in banks.iter_mut().enumerate() {
                for off in [0, groups / 2] {
                    b.0 += count(hit, off, n as u64);
                    b.1 += count(hit + fill, off, n as u64) - count(hit, off, n as u64);
                }
            }
        });
        // unfused: the scratch region's prefix (word i in group (i + G/4) mod G), each word of
        // S and of P written once and read once.
        let region = g.scratch_beats as u64;
        let off = g.place(hdl::mem::glb::SCRATCH, 0).0;
        self.scratch_walk(p, |s, pp| {
            for (n, b) in banks.iter_mut().enumerate() {
                let words =
                    count(s.min(region), off, n as u64) + count(pp.min(region), off, n as u64);
                b.0 += words;
                b.1 += words;
            }
        });
        banks
    }

    /// The memory beats the schedule must move: Q once, K and V once per tile (the keys it
    /// needs) less what the GLB serves, O once; unfused also writes each computed block's S
    /// and P and reads them back ([`Shape::scratch_beats`]).
    pub fn beats(&self, p: &CoreParams) -> (u64, u64) {
        let beat = (p.dma.width / 8) as u64;
        let row = p.operand_row_bytes() as u64;
        let h = self.heads as u64;
        let scratch = self.scratch_beats(p) - self.scratch_glb_beats(p);
        let reads = h * self.q_len as u64 * row / beat + self.kv_traffic(p).from_memory();
        let writes = h * self.q_len as u64 * (self.out_bytes * self.head_dim) as u64 / beat;
        (reads + scratch, writes + scratch)
    }

    /// unfused: the beats of S and P each computed block moves each way (its tile's rows, a
    /// block row of S and one of P each, whole beats), to memory or the GLB; rowfused's spill:
    /// the S of each block past the S arrays; 0 in the other designs.
    pub fn scratch_beats(&self, p: &CoreParams) -> u64 {
        let mut n = 0;
        self.scratch_walk(p, |s, pp| n += s + pp);
        n
    }

    /// unfused with a GLB: the beats of S and P each way that stay in the GLB (each tile's
    /// first `scratch_beats` of S, then of P, which it writes over S); 0 otherwise.
    pub fn scratch_glb_beats(&self, p: &CoreParams) -> u64 {
        let region = p.dma.glb.map_or(0, |g| g.scratch_beats as u64);
        let mut n = 0;
        self.scratch_walk(p, |s, pp| n += s.min(region) + pp.min(region));
        n
    }

    /// unfused (rowfused's spill): per tile of every head, the beats of its S and of its P
    /// (each written once and read back once, from the scratch region's start).
    fn scratch_walk(&self, p: &CoreParams, mut f: impl FnMut(u64, u64)) {
        if !p.row.scratch() {
            return;
        }
        let br = p.br() as usize;
        for _ in 0..self.heads {
            for (rows, keys) in self.tiles(br) {
                let (s, pp) = tile_scratch_beats(p, rows, keys);
                f(s, pp);
            }
        }
    }

    /// Blocks over all heads and tiles that go through the scratch region
    /// ([`tile_spilled_blocks`]).
    pub fn spilled_blocks(&self, p: &CoreParams) -> u64 {
        let br = p.br() as usize;
        let per_head: u64 = self
            .tiles(br)
            .map(|(_, keys)| tile_spilled_blocks(p, keys))
            .sum();
        self.heads as u64 * per_head
    }

    /// Every counter the schedule fixes, by the core's counter names. MACs: d for QK and d for
    /// PV per visible pair; masked slots: the rest of each computed block's 2·Br·Bc·d. The
    /// register files (32-bit accesses at the PE ports): each MAC writes back (with integer
    /// QKᵀ each operation of `lanes` products, and QK's scale steps are steps with no MAC
    /// slot), and reads its
    /// accumulator except the first product of each score (one per visible pair) and of each
    /// O element in a tile (d per query that sees a key); the row engines read one PE per
    /// cycle of their sweeps (max and exp: two per score of each computed block; buf2d copies S
    /// once and its sweeps read the S array) and readout (Br·d per tile); with a softmax tier
    /// the S links read each visible score at its QK PE and write it above. P: each weight of
    /// a computed block written once and read once (16 bits; buf2d's wide words: an access per
    /// word of scores or weights). reg3d's links: 16 bits per weight
    /// up, 32 per O value down, 32 per visible score up with three tiers. Broadcasts: 32·R·C
    /// bit-hops per MAC step of a tier. The row engines: a compare and an exp element per score
    /// of a computed block, a state update per query row of a computed block, a reciprocal per
    /// query row of a tile, a normalizing multiply per O value. Landing-buffer operand reads:
    /// 16 bits per row and column in each QK step, per column in each PV step.
    pub fn counters(&self, p: &CoreParams) -> Vec<(&'static str, u64)> {
        let (br, bc, d) = (p.br() as u64, p.bc() as u64, self.head_dim as u64);
        let h = self.heads as u64;
        let (pairs, seeing) = self.visible_pairs();
        let (blocks, skipped) = self.blocks(p);
        let (qk, pv) = p.block_steps();
        let (reads, writes) = self.beats(p);
        let kv = self.kv_traffic(p);
        let scratch_glb = self.scratch_glb_beats(p);
        let w = p.dma.width as u64;
        let glb = p.dma.glb.is_some() as u64;
        let scores = br * bc;
        let macs = h * 2 * d * pairs;
        let buffered = p.row.s_in_sram() as u64;
        // buf2d's wide words: an access moves a word of a query row's scores or weights.
        let (s_per, p_per) = p.row.plan().sram.per_word;
        let (s_per, p_per) = (s_per as u64, p_per as u64);
        // Vertical links: a stack's (noc2d's arrays sit side by side; P crosses its NoC).
        let tiered = (p.row.concurrent_phases() && p.row.noc().is_none()) as u64;
        // Bits of an operand on the buses and links (Q, K, V, P).
        let ew = p.row.elem_bits().0 as u64;
        let tile_rows = h * self.q_len.div_ceil(br as usize) as u64 * br;
        let o_values = tile_rows * d;
        let s_links = p.row.softmax_tier() as u64 * h * pairs;
        // The engines' register reads: per computed block two sweeps over the scores in the
        // PE registers (buf2d: one, the copy), per tile the readout.
        // unfused: the max sweep reads the PE registers, the exp sweep the landing buffer.
        let unfused = p.row.s_in_memory() as u64;
        let sweeps = 2 - buffered - unfused;
        // rowfused's spill: the blocks past the S arrays never touch them; their max sweep
        // reads the PE registers (as the copy would), their exp sweep the landing buffer.
        let spilled = if p.row.spills() {
            self.spilled_blocks(p)
        } else {
            0
        };
        let held = blocks - spilled;
        let engine = blocks * sweeps * scores + o_values;
        // With runs in the MAC's pipeline a score's products write its register once and read
        // it never; an O value's, in each block where its row sees a key, write it once and
        // read it once (the rescale) but in the row's first such block (from +0). In the
        // register file's order each operation writes, and reads but a value's first.
        // QK's operations: a MAC each, but with integer QKᵀ a score's d products take d / lanes.
        let qk_ops = h * (d / p.row.macs_per_pe() as u64) * pairs;
        let (qk_writes, qk_reads) = if p.row.qk_runs() {
            (h * pairs, 0)
        } else {
            (qk_ops, qk_ops - h * pairs)
        };
        let (pv_writes, pv_reads) = if p.row.pv_runs() {
            let row_blocks = h * self.row_blocks(bc as usize);
            (d * row_blocks, d * (row_blocks - h * seeing))
        } else {
            (h * d * pairs, h * d * (pairs - seeing))
        };
        let rf_writes = qk_writes + pv_writes + s_links;
        let rf_reads = qk_reads + pv_reads + engine + s_links;
        // A PV step's weight: read once per query row and key in the register file's order
        // (its output columns in turn), at every step with runs (the key changes each step).
        let p_reads = blocks * scores / p_per * if p.row.pv_runs() { p.row.e as u64 } else { 1 };
        // noc2d: every computed block's a·Bc words of P (a weight of each PE row) cross the
        // NoC, each in `flits_per_word` flits through every router's FIFO and over every link.
        let [noc_flits, noc_hop_bits, noc_fifo, noc_src] = p.noc_path().map_or([0; 4], |c| {
            let words = blocks * c.block_words() as u64;
            let flits = words * c.flits_per_word() as u64;
            let hops = c.hops as u64;
            [
                flits,
                flits * hops * c.router.flit_bits as u64,
                flits * (hops + 1),
                words,
            ]
        });
        vec![
            ("macs", macs),
            ("masked_macs", blocks * 2 * scores * d - macs),
            ("blocks", blocks),
            ("skipped_blocks", skipped),
            // Each tier (the one tier of a 2-D design) steps through every block's QK and PV.
            ("qk_cycles", blocks * qk as u64),
            ("pv_cycles", blocks * pv as u64),
            ("rf_writes", rf_writes),
            ("rf_reads", rf_reads),
            ("p_buf_writes", blocks * scores / p_per),
            ("p_buf_reads", p_reads),
            // unfused: the scratch buffers' accesses, a score each (packed by the max sweep,
            // read back by the exp sweep).
            (
                "s_buf_writes",
                held * scores * buffered / s_per + unfused * blocks * scores,
            ),
            (
                "s_buf_reads",
                held * 2 * scores * buffered / s_per + unfused * blocks * scores,
            ),
            (
                "vlink_bits",
                tiered * (ew * blocks * scores + 32 * o_values) + 32 * s_links,
            ),
            ("vlink_s_bits", 32 * s_links),
            (
                "bcast_bit_hops",
                2 * ew * (p.rows * p.row.cols) as u64 * blocks * (qk + pv) as u64,
            ),
            ("max_ops", blocks * scores),
            ("exp_ops", blocks * scores),
            ("row_updates", blocks * br),
            ("recip_ops", tile_rows),
            ("norm_ops", o_values),
            (
                "land_read_bits",
                ew * blocks
                    * (qk as u64 * (p.rows + p.row.cols) as u64 + pv as u64 * p.row.cols as u64)
                    + 32 * spilled * scores,
            ),
            ("read_beats", reads),
            ("write_beats", writes),
            ("glb_read_bits", (kv.hit + scratch_glb) * w),
            ("glb_write_bits", (kv.fill + scratch_glb) * w),
            ("kv_spill_bits", glb * kv.stream * w),
            ("noc_flits", noc_flits),
            ("noc_hop_bits", noc_hop_bits),
            ("noc_fifo_writes", noc_fifo),
            ("noc_fifo_reads", noc_fifo),
            ("noc_src_reads", noc_src),
        ]
    }
}

/// The cycles a perfect array would need for `macs` MACs: every PE busy every cycle, a MAC
/// each, with integer QKᵀ `lanes` in QK (QK and PV have equal MACs); reg3d's tiers run at
/// once, so the busier one sets it. Utilization is this over the cycles taken.
pub fn ideal_cycles(p: &CoreParams, macs: u64) -> f64 {
    let pes = (p.rows * p.row.cols) as f64;
    let lanes = p.row.macs_per_pe() as f64;
    let half = macs as f64 / 2.0;
    if p.row.mac_tiers() > 1 {
        (half / lanes).max(half) / pes
    } else {
        (half / lanes + half) / pes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closed forms against the mask's definition, pair by pair.
    #[test]
    fn visible_keys_follow_the_mask_definition() {
        for (q, k) in [(1, 1), (5, 9), (9, 5), (16, 16), (3, 0), (0, 4), (33, 7)] {
            for causal in [false, true] {
                for i in 0..q {
                    let by_definition = (0..k)
                        .filter(|&j| kernels::reference::visible(i, j, q, k, causal))
                        .count();
                    assert_eq!(visible_keys(i, q, k, causal), by_definition, "{q} {k} {i}");
                }
            }
        }
    }

    fn small_with_glb(bytes: u64) -> CoreParams {
        let mut c = hdl::config::CoreConfig::preset("small").unwrap();
        c.glb.bytes = bytes;
        c.glb.banks = 4;
        CoreParams::from_config(&c).unwrap()
    }

    fn shape(heads: usize, q_len: usize, k_len: usize, causal: bool, kv_group: usize) -> Shape {
        Shape {
            heads,
            q_len,
            k_len,
            head_dim: 16,
            causal,
            out_bytes: 2,
            kv_group,
        }
    }

    /// The GLB's traffic in closed form on small (a beat per K/V row, Bc = Br = 8): without
    /// one every tile reads its keys; with one that holds a head, each K/V head comes from
    /// memory once; past the knee the resident prefix is read once and the rest every tile.
    #[test]
    fn kv_traffic_has_the_closed_forms() {
        let none = small_with_glb(0);
        for s in [shape(2, 40, 24, true, 1), shape(3, 17, 50, false, 3)] {
            let per_tile: u64 = (0..s.q_len)
                .step_by(8)
                .map(|q| needed_keys(s.q_len, s.k_len, s.causal, q, 8) as u64)
                .sum();
            let t = s.kv_traffic(&none);
            assert_eq!(
                t,
                KvTraffic {
                    hit: 0,
                    fill: 0,
                    stream: 2 * s.heads as u64 * per_tile
                }
            );
            assert_eq!(
                s.counters(&none)
                    .iter()
                    .find(|c| c.0 == "kv_spill_bits")
                    .unwrap()
                    .1,
                0
            );
        }
        // 2 KiB: 32 keys of K and of V.
        let p = small_with_glb(2048);
        assert_eq!(p.dma.glb.unwrap().region_beats, 32);
        // Fits: once per K/V head (GQA: two Q heads share one).
        let s = shape(4, 32, 32, false, 2);
        let t = s.kv_traffic(&p);
        assert_eq!(t.from_memory(), 2 * 2 * 32);
        assert_eq!(t.hit, 2 * (4 * 4 * 32 - 2 * 32));
        // Past the knee, non-causal: 128 keys, 16 tiles; 32 resident, 96 streamed per tile.
        let s = shape(1, 128, 128, false, 1);
        let t = s.kv_traffic(&p);
        assert_eq!(t.fill, 2 * 32);
        assert_eq!(t.stream, 2 * (96 + 15 * 96));
        assert_eq!(t.hit, 2 * 15 * 32);
        // Causal: the tiles' prefixes grow by a block; the first 32 keys are read once.
        let s = shape(1, 64, 64, true, 1);
        let t = s.kv_traffic(&p);
        let needs: u64 = (1..=8).map(|t| 8 * t).sum();
        assert_eq!(t.hit + t.fill + t.stream, 2 * needs);
        assert_eq!(t.fill, 2 * 32);
        assert_eq!(t.stream, 2 * (8 + 16 + 24 + 32) as u64);
    }

    /// Per-bank counts sum to the hits and fills, and equal a beat-by-beat walk through the
    /// bank map (`GlbConfig::place`).
    #[test]
    fn glb_banks_follow_the_bank_map() {
        for (bytes, banks) in [(2048, 4), (2048, 1), (4096, 8)] {
            let mut p = small_with_glb(bytes);
            let mut g = p.dma.glb.unwrap();
            g.groups = banks;
            p.dma.glb = Some(g);
            for s in [shape(2, 40, 24, true, 1), shape(3, 70, 130, false, 3)] {
                let got = s.glb_banks(&p);
                let mut want = vec![(0u64, 0u64); banks as usize];
                let rb = s.kv_row_beats(&p);
                let mut filled = 0;
                for h in 0..s.heads {
                    if h % s.kv_group == 0 {
                        filled = 0;
                    }
                    for q in (0..s.q_len).step_by(8) {
                        let need = rb * needed_keys(s.q_len, s.k_len, s.causal, q, 8) as u64;
                        let (hit, fill, _, mark) =
                            hdl::mem::glb::take(need, filled, g.region_beats as u64);
                        for c in 0..2 {
                            for i in 0..hit + fill {
                                let b = &mut want[g.place(c, i).0 as usize];
                                if i < hit {
                                    b.0 += 1
                                } else {
                                    b.1 += 1
                                }
                            }
                        }
                        filled = mark;
                    }
                }
                assert_eq!(got, want, "{bytes} {banks} {s:?}");
                let t = s.kv_traffic(&p);
                let sum = got.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
                assert_eq!(sum, (t.hit, t.fill));
                assert!(t.hit > 0 && t.fill > 0);
            }
        }
        assert!(shape(1, 8, 8, false, 1)
            .glb_banks(&small_with_glb(0))
            .is_empty());
    }
}
