//! The GLB's control inside `dma_engine` (the policy and the bank map are in `crate::mem::glb`):
//! per K/V region its tag and high-water mark, per channel the beats requested and landed
//! since the descriptor was taken, the hit/fill/stream decision, bank arbitration, and the
//! banks themselves.
//!
//! unfused's scratch region (S and P), when the GLB has one, needs no tags: the core writes
//! every word before it reads it back. The GLB holds the region's first `scratch_beats` beats
//! by address (`glb_scratch_base`): a scratch channel (X) beat or an O beat of a scratch write
//! (`glb_scratch_o_write` at the descriptor's start) below that is a GLB read or write instead
//! of a memory request; the rest goes to memory. Writes go first (a fill, which cannot wait,
//! then O's), then the reads (K and V by their turn, then X); with one port per bank a write
//! blocks the reads of its group.

use super::channel::Channel;
use super::simple::PortSteps;
use super::{DmaConfig, ROW_BYTES_BITS};
use crate::fault::Fault;
use crate::ir::iface::Block;
use crate::link::{self, Bundle, Crossing, LinkState, LinkStatus};
use crate::mem::glb::{self, GlbConfig, GlbEvents};
use crate::mem::glb_check::{GlbChannelWatch, GlbCheckBlock, GlbWatch};
use crate::mem::sram::{SramIn, SramOut};
use crate::{and_all, bits_for, cat, mux, mux_index, Design, ModuleBuilder, RegHandle, Sig};

/// The channels the GLB serves (K and V) by their index in the engine.
const CHANNELS: [usize; 2] = [1, 2];

/// A K/V region and its channel's walk counters.
pub(super) struct Region {
    tag_valid: RegHandle,
    tag_base: RegHandle,
    tag_stride: RegHandle,
    tag_row_bytes: RegHandle,
    filled: RegHandle,
    req_beats: RegHandle,
    rsp_beats: RegHandle,
    /// A hit read wanted this cycle: the channel's next beat is in the GLB (it then presents
    /// no memory request).
    want: Sig,
}

/// unfused's scratch region in the GLB: the X and O channels' GLB accesses wanted this cycle
/// and their words in the region.
pub(super) struct Scratch {
    x_want: Sig,
    x_word: Sig,
    o_want: Sig,
    o_word: Sig,
}

/// The GLB's state before the memory port is built: each K/V channel's hit mode, and with a
/// scratch region whether X's and O's next beats are in it. A channel in hit mode presents no
/// request to the port (its `req_valid` is masked here).
pub(super) fn classify(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    g: &GlbConfig,
    chans: &mut [Channel],
    hold: Sig,
) -> (Vec<Region>, Option<Scratch>) {
    let regions = classify_kv(m, cfg, g, chans, hold);
    let scratch = (g.scratch_beats > 0).then(|| {
        let a = cfg.addr_bits;
        let base = m.input("glb_scratch_base", a);
        let o_write = m.input("glb_scratch_o_write", 1);
        let o = chans.len() - 1;
        let flag = m.reg("glb_o_scratch", 1, Some(0));
        m.set_next(flag, o_write);
        m.set_enable(flag, chans[o].accept);
        let w = a.max(bits_for(g.scratch_beats as u64));
        let limit = m.lit(w, g.scratch_beats as u64);
        let mut side = |m: &mut ModuleBuilder, i: usize, gate: Option<Sig>| {
            let ch = &mut chans[i];
            // Beats are aligned (the descriptor check): the offset's low bits are 0.
            let off = ch.req_addr.q - base;
            let lb = cfg.beat_shift();
            m.discard(off.slice(lb - 1, 0));
            let word = off.slice(a - 1, lb).zext(w);
            let inside = word.lt(limit);
            let inside = gate.map_or(inside, |f| f & inside);
            let inside = m.name(&format!("glb_{}_scratch", ch.name), inside);
            let want = and_all(&[inside, ch.req_valid, !hold]);
            ch.req_valid = ch.req_valid & !inside;
            (want, word)
        };
        let (x_want, x_word) = side(m, X, None);
        let (o_want, o_word) = side(m, o, Some(flag.q));
        Scratch {
            x_want,
            x_word,
            o_want,
            o_word,
        }
    });
    (regions, scratch)
}

/// The scratch channel's index in the engine.
const X: usize = 3;

fn classify_kv(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    g: &GlbConfig,
    chans: &mut [Channel],
    hold: Sig,
) -> Vec<Region> {
    let (a, mb) = (cfg.addr_bits, g.mark_bits());
    let cw = cfg.kv_beat_bits();
    let w = cw.max(mb);
    CHANNELS
        .iter()
        .map(|&i| {
            let n = chans[i].name;
            let r = |m: &mut ModuleBuilder, what: &str, width| {
                m.reg(&format!("glb_{n}_{what}"), width, Some(0))
            };
            let tag_valid = r(m, "tag_valid", 1);
            let tag_base = r(m, "tag_base", a);
            let tag_stride = r(m, "tag_stride", a);
            let tag_row_bytes = r(m, "tag_row_bytes", ROW_BYTES_BITS);
            let filled = r(m, "filled", mb);
            let req_beats = r(m, "req_beats", cw);
            let rsp_beats = r(m, "rsp_beats", cw);
            let below = req_beats.q.zext(w).lt(filled.q.zext(w));
            let hit = tag_valid.q & below;
            let hit = m.with_fault(cfg.faults, Fault::GlbNoHit, |m| m.zero(1), hit);
            let hit = m.name(&format!("glb_{n}_hit"), hit);
            let ch = &mut chans[i];
            let want = and_all(&[hit, ch.req_valid, !hold]);
            ch.req_valid = ch.req_valid & !hit;
            Region {
                tag_valid,
                tag_base,
                tag_stride,
                tag_row_bytes,
                filled,
                req_beats,
                rsp_beats,
                want,
            }
        })
        .collect()
}

/// What the GLB adds to the K and V channels: their walkers' extra steps (hit reads granted),
/// their extra responses (hits landing, a cycle later) and their landing data (a hit's from
/// the GLB, else memory's); its events; and
/// whether a hit is on its way to a landing buffer.
pub(super) struct GlbSide {
    pub(super) grants: [Sig; 2],
    pub(super) lands: [Sig; 2],
    pub(super) data: [Sig; 2],
    pub(super) events: GlbEvents,
    pub(super) in_flight: Sig,
    /// With a scratch region: X's read granted, landing (a cycle later) and landing data,
    /// and O's write granted.
    pub(super) scratch: Option<ScratchSide>,
    /// With spare lanes on the bond: its link test's state.
    pub(super) link: Option<LinkState>,
}

/// What the scratch region adds to the X and O channels.
pub(super) struct ScratchSide {
    pub(super) x_grant: Sig,
    pub(super) x_land: Sig,
    pub(super) x_data: Sig,
    pub(super) o_grant: Sig,
}

/// A word's place in the banks, from its index in region `c` (K, V, or the scratch region):
/// (group, row), as `GlbConfig::place`.
fn place(m: &mut ModuleBuilder, g: &GlbConfig, c: usize, idx: Sig) -> (Sig, Sig) {
    let gb = g.group_bits();
    let group = if gb == 0 {
        m.zero(1)
    } else {
        let (k0, _) = g.place(c, 0);
        let off = m.lit(gb, k0);
        idx.trunc(gb) + off
    };
    let rb = glb::row_bits(g);
    // The region's high row bits: K 0 and V 1 of two (K 00, V 01, the scratch 1 with one).
    let hi_bits = if g.scratch_beats == 0 || c == glb::SCRATCH {
        1
    } else {
        2
    };
    let hi = m.lit(
        hi_bits,
        (g.place(c, 0).1 >> (rb - hi_bits)) & ((1 << hi_bits) - 1),
    );
    let row = if rb == hi_bits {
        m.discard(idx);
        hi
    } else {
        let local = (idx >> gb).resize(rb - hi_bits);
        cat(&[hi, local])
    };
    (group, row)
}

/// The blocks the GLB instantiates: a bank and its checker.
pub(super) struct GlbBlocks {
    pub(super) bank: Block<SramIn, SramOut<u32>>,
    pub(super) check: GlbCheckBlock,
}

/// A cycle's GLB traffic as arbitrated: what the banks, the regions and the checker take.
struct Traffic<'a> {
    flush: Sig,
    /// A K/V channel's AXI4 error response: its data is never kept.
    drops: [Sig; 2],
    /// A K/V response that fills its region (at most one a cycle), either, and its (group, row).
    fills: &'a [Sig],
    fill: Sig,
    fill_at: (Sig, Sig),
    /// K's and V's hit reads, (group, row), and their grants.
    reads: &'a [(Sig, Sig)],
    grants: [Sig; 2],
    /// unfused's scratch: (O's grant, its group and row, X's group and row), and X's grant.
    scratch: Option<ScratchTraffic>,
}

/// unfused's scratch traffic: (O's grant, O's group and row, X's group and row), X's grant.
type ScratchTraffic = ((Sig, Sig, Sig, Sig, Sig), Sig);

/// What the banks give: each group's read data, whether each group reads, whether each
/// writes (group 0 first), and with spare lanes on the bond its bundles' statuses.
struct Banks {
    data: Vec<Sig>,
    reads: Vec<Sig>,
    writes: Vec<Sig>,
    links: Vec<LinkStatus>,
}

/// The banks, group by group and slice by slice, written by a fill (or O's scratch write) and
/// read by the granted hits (or X's read). With spare lanes on the bond, each group's
/// controls and write data cross it up and its read data down through a `vlink` each.
fn banks(
    (d, m): (&mut Design, &mut ModuleBuilder),
    (cfg, g): (&DmaConfig, &GlbConfig),
    blocks: &GlbBlocks,
    port: &PortSteps,
    t: &Traffic,
) -> Banks {
    let (fill, (fill_group, fill_row), reads) = (t.fill, t.fill_at, t.reads);
    let [k_grant, v_grant] = t.grants;
    let mut group_data = vec![];
    let (mut group_reads, mut group_writes) = (vec![], vec![]);
    let mut links = vec![];
    let (up_lanes, down_lanes) = g.bond_group_lanes();
    let one = m.lit(1, 1);
    for n in 0..g.groups {
        let mine = |grp: Sig| {
            if g.groups == 1 {
                one
            } else {
                grp.eq(n as u64)
            }
        };
        let fill_here = fill & mine(fill_group);
        let k_here = k_grant & mine(reads[0].0);
        let v_here = v_grant & mine(reads[1].0);
        let (mut we, mut waddr, mut re) = (fill_here, fill_row, k_here | v_here);
        let mut raddr = mux(k_here, reads[0].1, reads[1].1);
        let mut o_data = None;
        if let Some(((o_grant, og, orow, xg, xrow), x_grant)) = t.scratch {
            let x_here = x_grant & mine(xg);
            we = we | (o_grant & mine(og));
            waddr = mux(fill_here, fill_row, orow);
            re = re | x_here;
            raddr = mux(k_here | v_here, raddr, xrow);
            o_data = Some((fill_here, port.wdata));
        }
        group_reads.push(re);
        group_writes.push(we);
        let wb = g.word_bits;
        let slice = |d: Sig, s: u32| d.slice(s * wb + wb - 1, s * wb);
        let slice_wdata = |s: u32| match o_data {
            Some((fill_here, o)) => mux(fill_here, slice(port.rsp_data, s), slice(o, s)),
            None => slice(port.rsp_data, s),
        };
        // Up the bond: the bank group's enables, addresses and write data.
        let mut up = g.bond.map(|sp| Crossing::new(Some(sp), 0));
        let cross = |c: &mut Option<Crossing>, m: &mut ModuleBuilder, what: &str, x: Sig| match c {
            Some(c) => c.send(m, &format!("glb_g{n}_{what}"), x),
            None => x,
        };
        let we = cross(&mut up, m, "we", we);
        let waddr = cross(&mut up, m, "waddr", waddr);
        let wdata = up.is_some().then(|| {
            let mut all: Vec<Sig> = (0..g.slices).map(slice_wdata).collect();
            all.reverse();
            cross(&mut up, m, "wdata", cat(&all))
        });
        let re = cross(&mut up, m, "re", re);
        let raddr = cross(&mut up, m, "raddr", raddr);
        if let Some(c) = up {
            let part = (Bundle::GlbUp, up_lanes, Some(n));
            links.extend(c.finish_part(d, m, part, cfg.faults));
        }
        let mut slices = vec![];
        for s in 0..g.slices {
            let ins = SramIn {
                we,
                waddr,
                wdata: wdata.map_or_else(|| slice_wdata(s), |w| slice(w, s)),
                re,
                raddr,
            };
            let out = m.instantiate(&blocks.bank, &format!("u_glb_g{n}_s{s}"), &ins);
            slices.push(out.rd_data);
        }
        slices.reverse();
        // Down the bond: its read data.
        let mut down = g.bond.map(|sp| Crossing::new(Some(sp), 0));
        let data = cross(&mut down, m, "rd_data", cat(&slices));
        if let Some(c) = down {
            let part = (Bundle::GlbDown, down_lanes, Some(n));
            links.extend(c.finish_part(d, m, part, cfg.faults));
        }
        group_data.push(data);
    }
    Banks {
        data: group_data,
        reads: group_reads,
        writes: group_writes,
        links,
    }
}

/// Fills: a K/V response from memory inside its region (at most one a cycle, unless its
/// channel's error response drops it): (each channel's, either, its (group, row)).
fn fills(
    m: &mut ModuleBuilder,
    g: &GlbConfig,
    regions: &[Region],
    port: &PortSteps,
    drops: [Sig; 2],
) -> (Vec<Sig>, Sig, (Sig, Sig)) {
    let mb = g.mark_bits();
    let region = m.lit(mb, g.region_beats as u64);
    let cw = regions[0].rsp_beats.q.width();
    let w = cw.max(mb);
    let fills: Vec<Sig> = CHANNELS
        .iter()
        .zip(regions)
        .zip(drops)
        .map(|((&i, r), dropped)| {
            let inside = r.rsp_beats.q.zext(w).lt(region.zext(w));
            and_all(&[port.responses[i], r.tag_valid.q, inside, !dropped])
        })
        .collect();
    let fill = fills[0] | fills[1];
    let fill = m.name("glb_fill_now", fill);
    let fill_idx = mux(fills[1], regions[1].rsp_beats.q, regions[0].rsp_beats.q);
    let (fg0, fr0) = place(m, g, 0, fill_idx);
    let (fg1, fr1) = place(m, g, 1, fill_idx);
    let fill_group = mux(fills[1], fg1, fg0);
    let fill_row = mux(fills[1], fr1, fr0);
    (fills, fill, (fill_group, fill_row))
}

/// A granted read's landing a cycle later (`glb_<name>_land`), with the data of the group it
/// read (`group`, held from the grant), or else the memory's response `rsp`: (landed, data).
fn land(
    m: &mut ModuleBuilder,
    g: &GlbConfig,
    name: &str,
    (group, grant): (Sig, Sig),
    group_data: &[Sig],
    rsp: Sig,
) -> (Sig, Sig) {
    let landed = m.delay(&format!("glb_{name}_land"), grant);
    let grp = m.hold(&format!("glb_{name}_group"), group, grant);
    let from_glb = if g.groups == 1 {
        m.discard(grp);
        group_data[0]
    } else {
        mux_index(grp, group_data)
    };
    (landed, mux(landed, from_glb, rsp))
}

/// Each K/V region's counters and tag: the beats requested and landed (a memory step or a
/// hit, a response or a landed hit), the tag taken at a descriptor's load and kept while it
/// matches (unless flushed, or an error response drops it), and the beats filled.
fn update_regions(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    g: &GlbConfig,
    (chans, regions): (&[Channel], &[Region]),
    port: &PortSteps,
    t: &Traffic,
    lands: [Sig; 2],
) {
    let mb = g.mark_bits();
    let cw = regions[0].rsp_beats.q.width();
    let w = cw.max(mb);
    let one = m.lit(1, 1);
    for (c, r) in regions.iter().enumerate() {
        let i = CHANNELS[c];
        let ch = &chans[i];
        let d = &ch.desc;
        let step = port.steps[i] | t.grants[c];
        let landed = port.responses[i] | lands[c];
        let zero = m.zero(cw);
        let req_inc = r.req_beats.q + 1;
        m.set_next(r.req_beats, mux(ch.load, zero, req_inc));
        m.set_enable(r.req_beats, ch.load | step);
        let rsp_inc = r.rsp_beats.q + 1;
        m.set_next(r.rsp_beats, mux(ch.load, zero, rsp_inc));
        m.set_enable(r.rsp_beats, ch.load | landed);
        let matches = and_all(&[
            r.tag_base.q.eq(d.base),
            r.tag_stride.q.eq(d.stride),
            r.tag_row_bytes.q.eq(d.row_bytes),
        ]);
        let same = and_all(&[r.tag_valid.q, !t.flush, matches]);
        let stale = r.tag_valid.q & !t.flush;
        let same = m.with_fault(cfg.faults, Fault::GlbStaleTag, |_| stale, same);
        for (reg, v) in [
            (r.tag_base, d.base),
            (r.tag_stride, d.stride),
            (r.tag_row_bytes, d.row_bytes),
        ] {
            m.set_next(reg, v);
            m.set_enable(reg, ch.load);
        }
        let keep = r.tag_valid.q & !t.flush & !t.drops[c];
        m.set_next(r.tag_valid, mux(ch.load, one, keep));
        let mark = r.rsp_beats.q.zext(w) + 1;
        let mark = mark.resize(mb);
        let zero_mb = m.zero(mb);
        let kept = mux(same, r.filled.q, zero_mb);
        m.set_next(r.filled, mux(ch.load, kept, mark));
        m.set_enable(r.filled, ch.load | t.fills[c]);
    }
}

/// The GLB's checker (simulation only), from the descriptors, the port and the grants.
fn check(
    m: &mut ModuleBuilder,
    blocks: &GlbBlocks,
    chans: &[Channel],
    port: &PortSteps,
    t: &Traffic,
) {
    let watch = |c: usize| {
        let i = CHANNELS[c];
        let ch = &chans[i];
        GlbChannelWatch {
            load: ch.load,
            base: ch.desc.base,
            stride: ch.desc.stride,
            row_bytes: ch.desc.row_bytes,
            mem_step: port.steps[i],
            hit: t.grants[c],
            mem_rsp: port.responses[i],
            drop: t.drops[c],
        }
    };
    let (k, v) = (watch(0), watch(1));
    m.instantiate(
        &blocks.check,
        "u_glb_check",
        &GlbWatch {
            flush: t.flush,
            k,
            v,
        },
    );
}

/// Arbitrates the banks and updates the regions, given the port's steps and responses.
pub(super) fn finish(
    (d, m): (&mut Design, &mut ModuleBuilder),
    cfg: &DmaConfig,
    g: &GlbConfig,
    blocks: &GlbBlocks,
    chans: &[Channel],
    (regions, scratch): (&[Region], Option<&Scratch>),
    port: &PortSteps,
) -> GlbSide {
    let flush = m.input("glb_flush", 1);
    // An AXI4 error response on a K/V channel: its data is never kept, and its tag drops.
    let drops: [Sig; 2] = std::array::from_fn(|c| match &port.bus_errors {
        Some(e) => e[CHANNELS[c]].any(),
        None => m.zero(1),
    });
    let (fills, fill, (fill_group, fill_row)) = fills(m, g, regions, port, drops);
    // unfused's scratch: O's write (after a fill in its group), X's read and their places.
    let sc = scratch.map(|s| {
        let (og, orow) = place(m, g, glb::SCRATCH, s.o_word);
        let (xg, xrow) = place(m, g, glb::SCRATCH, s.x_word);
        let o_grant = s.o_want & !(fill & og.eq(fill_group));
        let o_grant = m.name("glb_o_grant", o_grant);
        (o_grant, og, orow, xg, xrow)
    });
    // Hit reads.
    let reads: Vec<(Sig, Sig)> = regions
        .iter()
        .enumerate()
        .map(|(c, r)| place(m, g, c, r.req_beats.q))
        .collect();
    // With one port per bank a write (a fill, O's) takes its group's cycle.
    let busy = |m: &mut ModuleBuilder, grp: Sig| {
        if g.ports != 1 {
            return m.zero(1);
        }
        let by_fill = fill & grp.eq(fill_group);
        match sc {
            Some((o_grant, og, ..)) => by_fill | (o_grant & grp.eq(og)),
            None => by_fill,
        }
    };
    let blocked: Vec<Sig> = reads.iter().map(|&(grp, _)| busy(m, grp)).collect();
    let k_ok = regions[0].want & !blocked[0];
    let v_ok = regions[1].want & !blocked[1];
    let same = reads[0].0.eq(reads[1].0);
    let clash = and_all(&[k_ok, v_ok, same]);
    let clash = m.name("glb_clash", clash);
    // The loser of the last clash goes first: 0 K, 1 V.
    let prio = m.reg("glb_prio", 1, Some(0));
    let k_grant = k_ok & !(clash & prio.q);
    let v_grant = v_ok & !(clash & !prio.q);
    let k_grant = m.name("glb_k_grant", k_grant);
    let v_grant = m.name("glb_v_grant", v_grant);
    m.set_next(prio, k_grant);
    m.set_enable(prio, clash);
    let refused_k = regions[0].want & !k_grant;
    let refused_v = regions[1].want & !v_grant;
    let mut refused = refused_k.zext(2) + refused_v.zext(2);
    let mut reads_n = k_grant.zext(2) + v_grant.zext(2);
    let mut writes_n = None;
    // X reads after K and V, in a group neither of them nor a write holds.
    let x_grant = match (scratch, sc) {
        (Some(s), Some((o_grant, _, _, xg, _))) => {
            let x_ok = s.x_want & !busy(m, xg);
            let taken = (k_grant & xg.eq(reads[0].0)) | (v_grant & xg.eq(reads[1].0));
            let x_grant = x_ok & !taken;
            let x_grant = m.name("glb_x_grant", x_grant);
            let refused_x = s.x_want & !x_grant;
            let refused_o = s.o_want & !o_grant;
            refused = refused.zext(3) + refused_x.zext(3) + refused_o.zext(3);
            reads_n = reads_n + x_grant.zext(2);
            writes_n = Some(fill.zext(2) + o_grant.zext(2));
            Some(x_grant)
        }
        _ => None,
    };

    // The banks.
    let t = Traffic {
        flush,
        drops,
        fills: &fills,
        fill,
        fill_at: (fill_group, fill_row),
        reads: &reads,
        grants: [k_grant, v_grant],
        scratch: sc.zip(x_grant),
    };
    // With spare lanes on the bond: its own link test (at reset and on the core's request),
    // its lane faults and probe (the bond is row `GLB_ROW` of the core's).
    let test = g.bond.map(|_| {
        let request = m.input("glb_link_test", 1);
        let probe = m.input("glb_link_probe", link::ROW_BITS + link::LANE_BITS);
        let mine = link::row_probe(m, probe, link::GLB_ROW);
        m.set_threaded(link::PROBE, mine);
        if cfg.faults {
            let all = m.threaded_input(link::CORE_FAULTS, link::core_fault_bits());
            let mine = link::row_faults(m, all, link::GLB_ROW);
            m.set_threaded(link::LANE_FAULTS, mine);
        }
        let (_, geo) = g.bond_bundles()[0];
        let ctl = link::controller(m, &geo, 0, request);
        m.set_threaded(link::BIST, ctl.bus);
        ctl
    });
    let b = banks((d, m), (cfg, g), blocks, port, &t);
    let (group_data, mut group_reads, mut group_writes) = (b.data, b.reads, b.writes);
    let link = test.map(|ctl| LinkState::of(&ctl, link::combine(m, &b.links, g.bond_count_bits())));
    // Hits land a cycle after their read, with the data of the group they read.
    let grants = [k_grant, v_grant];
    let mut lands = [fill; 2];
    let mut data = [fill; 2];
    for c in 0..2 {
        let n = chans[CHANNELS[c]].name;
        let read = (reads[c].0, grants[c]);
        (lands[c], data[c]) = land(m, g, n, read, &group_data, port.rsp_data);
    }
    let scratch_side = match (sc, x_grant) {
        (Some((o_grant, _, _, xg, _)), Some(x_grant)) => {
            let (x_land, x_data) = land(m, g, "x", (xg, x_grant), &group_data, port.rsp_data);
            Some(ScratchSide {
                x_grant,
                x_land,
                x_data,
                o_grant,
            })
        }
        _ => None,
    };

    // Regions and counters.
    update_regions(m, cfg, g, (chans, regions), port, &t, lands);
    // The checker (simulation only), from the descriptors, the port and the grants.
    check(m, blocks, chans, port, &t);
    let kv_rsp = port.responses[1] | port.responses[2];
    let spill = kv_rsp & !fill;
    let mut in_flight = lands[0] | lands[1];
    if let Some(x) = &scratch_side {
        in_flight = in_flight | x.x_land;
    }
    // Group n is bit n.
    group_reads.reverse();
    group_writes.reverse();
    GlbSide {
        grants,
        lands,
        data,
        events: GlbEvents {
            reads: reads_n,
            fill: writes_n.unwrap_or(fill),
            refused,
            spill,
            group_reads: cat(&group_reads),
            group_writes: cat(&group_writes),
        },
        in_flight,
        scratch: scratch_side,
        link,
    }
}
