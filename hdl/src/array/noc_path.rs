//! `noc_path`: `noc2d`'s P path from the QK array to the PV array (issue 56): a source bank of
//! two blocks, a sender that cuts each word of the PE rows' weights into flits, a line of
//! `noc_router`s (`noc_line`), and a receiver that writes each flit's weights into its rows'
//! P banks at the word's address, which it counts itself. Bit-exact model and the
//! microarchitecture's description: `kernels::noc::Path`.
//!
//! Ports: in `we`, `waddr`, `wdata` (the rows' exp sweeps' write of a word: row r's weight at
//! bits r·w; the rows write in lockstep, and the address's query row and key must be the next
//! in the path's order, which a simulation assertion checks; its slot travels with the word);
//! out `p_we` (a bit per row: its P bank is written this cycle), `p_waddr`, `p_wdata` (the
//! flit's weights, row k·g + i's at bits i·w), `arrived` (the
//! write is a block's last word), and the cycle's events: `sent` (a flit into the line),
//! `stalled` (a flit ready and no credit), `read` (the source bank's), `writes`, `reads` (the
//! routers' FIFOs), `hops` (flits on the links between routers).

use kernels::noc::{PathConfig, RouterConfig};

use crate::array::noc::{self, LineConfig, LineIn};
use crate::ir::iface::Block;
use crate::mem::sram::{self, SramConfig, SramIn};
use crate::{addr_bits, bits_for, cat, interface, mux, mux_index, Design, ModuleBuilder, Sig};

interface! {
    /// The rows' P write.
    pub struct PathIn { we, waddr, wdata }
}

interface! {
    /// The receiver's P write, a block's end, and the cycle's events.
    pub struct PathOut { p_we, p_waddr, p_wdata, arrived, sent, stalled, read, writes, reads, hops }
}

/// The path's block.
pub type PathBlock = Block<PathIn, PathOut<u32>>;

/// The line the path sends on.
pub fn line(cfg: &PathConfig) -> LineConfig {
    LineConfig {
        router: cfg.router,
        hops: cfg.hops,
    }
}

/// Bits of a P bank address (slot, ii, j).
pub fn addr_width(cfg: &PathConfig) -> u32 {
    addr_bits(cfg.bank_depth())
}

/// The source bank: two blocks of words, each the slot bit and every row's weight.
pub fn bank(cfg: &PathConfig, blackbox: bool) -> SramConfig {
    SramConfig {
        depth: cfg.bank_depth(),
        width: 1 + cfg.rows * cfg.elem_bits,
        ports: 2,
        blackbox,
    }
}

pub fn module_name(cfg: &PathConfig) -> String {
    format!(
        "noc_path_r{}w{}a{}b{}_{}",
        cfg.rows,
        cfg.elem_bits,
        cfg.a,
        cfg.bc,
        line(cfg).module_name()
    )
}

/// The router of a path of `flit_bits`-bit flits, `depth`-flit FIFOs and `hops` hops.
pub fn router(flit_bits: u32, depth: u32, hops: u32) -> RouterConfig {
    RouterConfig {
        flit_bits,
        coord_bits: kernels::noc::coord_bits(hops),
        depth,
    }
}

/// Defines the path `cfg` (its source bank a macro blackbox if `blackbox`).
pub fn build(d: &mut Design, cfg: &PathConfig, blackbox: bool) -> PathBlock {
    assert!(cfg.per_flit() >= 1);
    let line_blk = noc::build_line(d, &line(cfg));
    let bank_blk = sram::build(d, &bank(cfg, blackbox));
    let aw = addr_width(cfg);
    let g = cfg.per_flit();
    let inputs = PathIn {
        we: 1,
        waddr: aw,
        wdata: cfg.rows * cfg.elem_bits,
    };
    let lo = line_blk.outputs;
    let outputs = PathOut {
        p_we: cfg.rows,
        p_waddr: aw,
        p_wdata: g * cfg.elem_bits,
        arrived: 1,
        sent: 1,
        stalled: 1,
        read: 1,
        writes: lo.writes,
        reads: lo.reads,
        hops: lo.hops,
    };
    let cfg = *cfg;
    let name = if blackbox {
        module_name(&cfg) + "_macro"
    } else {
        module_name(&cfg)
    };
    d.define_block(&name, &inputs, outputs, |_, m, i| {
        m.doc(&format!(
            "noc_path: noc2d's P path, {} rows of {}-bit weights, {} a flit ({} flits a \
             word), {} hops of {}-bit flits, {}-flit FIFOs. See hdl/src/array/noc_path.rs;\n\
             model kernels::noc::Path.",
            cfg.rows,
            cfg.elem_bits,
            g,
            cfg.flits_per_word(),
            cfg.hops,
            cfg.router.flit_bits,
            cfg.router.depth
        ));
        path(m, &cfg, (&line_blk, &bank_blk), &i)
    })
}

/// A word counter in the path's order (j, then ii, then the ring's slot): the word's (ii, j),
/// the ring's slot, and whether it is a block's last word.
fn word_counter(m: &mut ModuleBuilder, cfg: &PathConfig, name: &str, en: Sig) -> (Sig, Sig, Sig) {
    let mut fields = vec![];
    let mut carry = en;
    let mut last_all = m.lit(1, 1);
    for (field, n, bits) in [("j", cfg.bc, cfg.j_bits), ("ii", cfg.a, cfg.ii_bits)] {
        if bits == 0 {
            continue;
        }
        let r = m.reg(&format!("{name}_{field}"), bits, Some(0));
        let (next, last) = m.wrapping_step(r.q, n);
        m.set_next(r, next);
        m.set_enable(r, carry);
        carry = carry & last;
        last_all = last_all & last;
        fields.push(r.q);
    }
    let slot = m.reg(&format!("{name}_slot"), 1, Some(0));
    m.set_next(slot, !slot.q);
    m.set_enable(slot, carry);
    fields.reverse();
    (cat(&fields), slot.q, last_all)
}

fn path(
    m: &mut ModuleBuilder,
    cfg: &PathConfig,
    (line_blk, bank_blk): (&noc::LineBlock, &sram::SramBlock),
    i: &PathIn,
) -> PathOut {
    let (w, g, f) = (cfg.elem_bits, cfg.per_flit(), cfg.flits_per_word());
    let words = 2 * cfg.block_words();
    let qw = bits_for(words as u64);
    // The line's outputs are needed by the sender before the line is instantiated: nets.
    let ready = m.net("line_ready", 1);
    let have = m.reg("have", 1, Some(0));
    let flit = m.reg("flit", bits_for(f as u64 - 1).max(1), Some(0));
    let queued = m.reg("queued", qw, Some(0));
    let send = have.q & ready;
    let last_flit = flit.q.eq((f - 1) as u64);
    let done = send & last_flit;
    let re = (!have.q | done) & queued.q.ne(0u64);
    let (next_flit, _) = m.wrapping_step(flit.q, f);
    m.set_next(flit, next_flit);
    m.set_enable(flit, send);
    m.set_next(have, re | (have.q & !done));
    let cw = queued.q.width();
    m.set_next(queued, queued.q + i.we.zext(cw) - re.zext(cw));
    // The rows' writes: in the path's order, never into a full bank.
    let (w_key, w_ring, w_end) = word_counter(m, cfg, "wr", i.we);
    m.discard(w_end);
    let aw = addr_width(cfg);
    let w_slot = i.waddr.bit(aw - 1);
    // The query row and key are only checked (the ring counts them).
    m.discard(i.waddr.slice(aw - 2, 0));
    m.assert_always(
        "p_path_order",
        !(i.we & i.waddr.slice(aw - 2, 0).ne(w_key)),
        "a P write out of the path's order (the PE rows' exp sweeps not in lockstep)",
    );
    m.assert_always(
        "p_path_room",
        !(i.we & queued.q.eq(words as u64)),
        "a P write into a full source bank (the sequencer let a softmax overrun the path)",
    );
    let (r_key, r_ring, r_end) = word_counter(m, cfg, "rd", re);
    m.discard(r_end);
    let word = m
        .instantiate(
            bank_blk,
            "u_bank",
            &SramIn {
                we: i.we,
                waddr: cat(&[w_ring, w_key]),
                wdata: cat(&[i.wdata, w_slot]),
                re,
                raddr: cat(&[r_ring, r_key]),
            },
        )
        .rd_data;
    let (slot, rd) = (word.bit(0), word.slice(word.width - 1, 1));
    // Flit k: the slot bit, then rows k·g .. k·g + g − 1 of the held word, zero above the last
    // row.
    let pieces: Vec<Sig> = (0..f)
        .map(|k| {
            let lo = k * g * w;
            let hi = ((k + 1) * g).min(cfg.rows) * w;
            let piece = rd.slice(hi - 1, lo);
            cat(&[piece.zext(g * w), slot])
        })
        .collect();
    let data = if f == 1 {
        pieces[0]
    } else {
        mux_index(flit.q, &pieces)
    };
    let cb = cfg.router.coord_bits;
    let pb = cfg.router.payload_bits();
    let x = m.lit(cb, cfg.hops as u64);
    let y = m.zero(cb);
    let flit_data = noc::pack(x, y, data.zext(pb));
    let zero = m.zero(cfg.router.flit_bits);
    let lo = m.instantiate(
        line_blk,
        "u_line",
        &LineIn {
            in_valid: send,
            in_flit: mux(send, flit_data, zero),
        },
    );
    m.drive(ready, lo.ready);
    // The receiver: the delivered flit's rows, at its word's address.
    let got = lo.out_valid;
    let landing = m.reg("landing", bits_for(f as u64 - 1).max(1), Some(0));
    let last_land = landing.q.eq((f - 1) as u64);
    let (next_land, _) = m.wrapping_step(landing.q, f);
    m.set_next(landing, next_land);
    m.set_enable(landing, got);
    let (land_key, land_ring, block_end) = word_counter(m, cfg, "land", got & last_land);
    m.discard(land_ring);
    let p_we: Vec<Sig> = (0..cfg.rows)
        .rev()
        .map(|r| got & landing.q.eq((r / g) as u64))
        .collect();
    // The flit's destination and the payload past the last row's weight are not read.
    let used = 2 * cb + 1 + g * w;
    let payload = lo.out_flit.slice(used - 1, 2 * cb + 1);
    let p_waddr = cat(&[lo.out_flit.bit(2 * cb), land_key]);
    m.discard(lo.out_flit.slice(2 * cb - 1, 0));
    if cfg.router.flit_bits > used {
        m.discard(lo.out_flit.slice(cfg.router.flit_bits - 1, used));
    }
    PathOut {
        p_we: cat(&p_we),
        p_waddr,
        p_wdata: payload,
        arrived: got & last_land & block_end,
        sent: send,
        stalled: have.q & !ready,
        read: re,
        writes: lo.writes,
        reads: lo.reads,
        hops: lo.hops,
    }
}
