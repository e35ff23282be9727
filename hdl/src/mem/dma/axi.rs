//! The AXI4 master: INCR bursts per channel that never cross 4 KiB, an ID per read channel,
//! write responses awaited, SLVERR/DECERR as error codes.

use super::channel::{count_in_flight, Channel};
use super::simple::{round_robin, PortSteps};
use super::{
    error, AxiIn, AxiOut, DmaConfig, AXI_BOUNDARY, AXI_CACHE, AXI_DECERR, AXI_INCR, AXI_MAX_BEATS,
    AXI_READ_IDS, AXI_WRITE_ID, ROW_BYTES_BITS,
};
use crate::ir::iface::Ports;
use crate::mem::axi_check::{AxiCheckBlock, AxiWatch};
use crate::{addr_bits, and_all, bits_for, mux, mux_index, or_all, ModuleBuilder, RegHandle, Sig};

/// Beats of the burst channel `ch` would issue now (9 bits, 1 to 256 while it has a request):
/// to the end of its row, or with contiguous rows (stride = row bytes) to the end of its block
/// (the read channels) or transfer (O); at most 256; never across a 4 KiB boundary. In two
/// register stages (named `<ch>_burst_*`): the rows the burst may span, the beats to its row's
/// end, the beat, and the cap (256 or the boundary's) first; then the product and the
/// minimum. The result is the walk's burst two cycles after the walk stood there.
pub(super) fn burst_beats(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    ch: &Channel,
    contig: Sig,
) -> Sig {
    let name = ch.name;
    let rows_left = ch.req.rows_left.q;
    let in_block = match ch.block_rows {
        Some(br) => {
            let w = br.q.width().max(ch.req.row.q.width());
            let left = br.q.zext(w) - ch.req.row.q.zext(w);
            let left = left.zext(w.max(rows_left.width()));
            left.min(rows_left.zext(w.max(rows_left.width())))
        }
        None => rows_left,
    };
    let cw = in_block.width().max(9);
    let cap = m.lit(cw, AXI_MAX_BEATS);
    let rows = in_block.zext(cw).min(cap).trunc(9);
    let rb = ch.row_beats.q;
    let pw = 9 + rb.width();
    let beat = ch.req.beat.q.zext(pw);
    let run_row = rb.zext(pw) - beat;
    let shift = cfg.beat_shift();
    let page = AXI_BOUNDARY >> shift;
    let offset = ch.req_addr.q.slice(11, shift).zext(pw);
    let to_boundary = m.lit(pw, page) - offset;
    let max = m.lit(pw, AXI_MAX_BEATS);
    let limit = to_boundary.min(max);
    let mut stage = |what: &str, x: Sig| m.delay(&format!("{name}_burst_{what}"), x);
    let (rows, run_row, beat, limit) = (
        stage("rows", rows),
        stage("run_row", run_row),
        stage("beat", beat),
        stage("limit", limit),
    );
    let run_block = rows.mul_wide(rb) - beat;
    let run = mux(contig, run_block, run_row);
    let beats = run.min(limit);
    let high = beats.slice(pw - 1, 9);
    m.discard(high);
    m.delay(&format!("{name}_burst_beats"), beats.trunc(9))
}

/// The AXI4 LEN field (beats - 1, 8 bits) of a burst of `beats` (9 bits, 1 to 256).
pub(super) fn axi_len(m: &mut ModuleBuilder, beats: Sig) -> Sig {
    let len = beats - 1;
    m.discard(len.bit(8));
    len.trunc(8)
}

/// The error code of an AXI4 response `resp` when `valid` (SLVERR or DECERR; 0 for OKAY and
/// EXOKAY).
pub(super) fn bus_error(m: &mut ModuleBuilder, resp: Sig, valid: Sig) -> Sig {
    let decerr = m.lit(error::BITS, error::DECERR);
    let slverr = m.lit(error::BITS, error::SLVERR);
    let code = mux(resp.eq(AXI_DECERR), decerr, slverr);
    let failed = valid & resp.bit(1);
    let none = m.zero(error::BITS);
    mux(failed, code, none)
}

/// The AXI4 master (`m_axi_*`). Reads: a channel at the start of a burst (its request walker
/// not inside one, and still for two cycles, so its registered [`burst_beats`] are its own) offers
/// an AR with its ID, round robin among Q, K and V, into the AR register slice (when it is
/// empty or its AR is being accepted), which presents it until accepted: the AR outputs are
/// registers. Once its burst is in the slice the channel's walker steps through the burst's
/// remaining beats (one a cycle) before it may offer the next. At most
/// `axi_outstanding` bursts per ID are in flight. R is always ready; beats go to the channel
/// their ID names (bursts of different IDs may interleave), RLAST ends a burst. Writes: the O
/// channel opens a burst by loading the AW register (held until accepted) and then offers its
/// beats on W from the staging buffer, WLAST on the last; W never waits for AWREADY (its burst
/// length is registered too, so O also opens a burst from a walk still for two cycles). O is done
/// when every write response is back. A response other than OKAY sets the channel's error
/// (SLVERR 7, DECERR 8). `hold` stops new bursts; those already presented complete.
pub(super) fn axi_port(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    chans: &[Channel],
    hold: Sig,
    check: &AxiCheckBlock,
) -> PortSteps {
    let ins = axi_inputs(m, cfg);
    let ob = bits_for(cfg.axi_outstanding as u64);
    let limit = m.lit(ob, cfg.axi_outstanding as u64);
    let open = !hold;
    let walk = bursts(m, cfg, chans);
    // The read channels first, the write channel (O) last.
    let nr = chans.len() - 1;
    // R: responses by ID.
    let responses: Vec<Sig> = (0..nr)
        .map(|i| ins.rvalid & ins.rid.eq(AXI_READ_IDS[i]))
        .collect();
    let bursts_back: Vec<Sig> = responses.iter().map(|&r| r & ins.rlast).collect();
    let ar = read_addresses(m, chans, &walk, ins.arready, &bursts_back, open, limit);
    let o = &chans[nr];
    let w = write_bursts(m, cfg, o, &walk, &ins, open, limit);
    let mut steps = ar.steps.clone();
    steps.push(w.accept);
    // Burst countdowns: a read walker steps the burst's remaining beats after its AR; the O
    // walker steps on each W beat of the burst it opened.
    let (beats, left, inside) = (&walk.beats, &walk.left, &walk.inside);
    for i in 0..nr {
        let start = steps[i] & !inside[i];
        let len_m1 = beats[i] - 1;
        let d = mux(start, len_m1, left[i].q - 1);
        m.set_next(left[i], d);
        m.set_enable(left[i], steps[i]);
    }
    let d = mux(w.open_burst, beats[nr], left[nr].q - 1);
    m.set_next(left[nr], d);
    m.set_enable(left[nr], w.open_burst | w.accept);

    let outs = axi_outputs(m, cfg, &ar, &w);
    for (n, s) in outs.named() {
        m.output(&format!("m_axi_{n}"), s);
    }
    m.instantiate(check, "u_axi_check", &AxiWatch { ins, outs });
    let mut bus_errors: Vec<Sig> = (0..nr)
        .map(|i| bus_error(m, ins.rresp, responses[i]))
        .collect();
    bus_errors.push(bus_error(m, ins.bresp, w.b_back));
    let o_done = and_all(&[
        o.active.q,
        !o.req.rows_left.q.any(),
        !inside[nr],
        w.outstanding.q.is_zero(),
    ]);
    let mut idle = vec![
        !ar.valid.q,
        !w.aw_valid.q,
        !inside[nr],
        w.outstanding.q.is_zero(),
    ];
    idle.extend(ar.outstanding.iter().map(|n| n.q.is_zero()));
    let routed = or_all(&responses);
    PortSteps {
        steps,
        responses,
        bus_errors: Some(bus_errors),
        o_done: Some(o_done),
        read_beat: routed,
        write_beat: w.accept,
        rsp_data: ins.rdata,
        wdata: outs.wdata,
        quiet: and_all(&idle),
    }
}

/// The master's inputs (`m_axi_*`).
fn axi_inputs(m: &mut ModuleBuilder, cfg: &DmaConfig) -> AxiIn {
    let ib = cfg.axi_id_bits;
    let w = cfg.width;
    let arready = m.input("m_axi_arready", 1);
    let rvalid = m.input("m_axi_rvalid", 1);
    let rid = m.input("m_axi_rid", ib);
    let rdata = m.input("m_axi_rdata", w);
    let rresp = m.input("m_axi_rresp", 2);
    let rlast = m.input("m_axi_rlast", 1);
    let awready = m.input("m_axi_awready", 1);
    let wready = m.input("m_axi_wready", 1);
    let bvalid = m.input("m_axi_bvalid", 1);
    let bid = m.input("m_axi_bid", ib);
    let bresp = m.input("m_axi_bresp", 2);
    AxiIn {
        awready,
        wready,
        bvalid,
        bid,
        bresp,
        arready,
        rvalid,
        rid,
        rdata,
        rresp,
        rlast,
    }
}

/// Per channel: the burst it would issue now (registered from its walk's state, two cycles
/// late: valid when `still`), its walker's countdown inside a burst.
struct Bursts {
    beats: Vec<Sig>,
    left: Vec<RegHandle>,
    /// The channel's walker is inside a burst.
    inside: Vec<Sig>,
    /// The channel's walk did not move in the previous two cycles: `beats` is its burst now.
    still: Vec<Sig>,
}

fn bursts(m: &mut ModuleBuilder, cfg: &DmaConfig, chans: &[Channel]) -> Bursts {
    let a = cfg.addr_bits;
    // Contiguous rows (stride = row bytes): a burst may run to the end of the block.
    let contig: Vec<Sig> = chans
        .iter()
        .map(|c| {
            let r = m.reg(&format!("{}_contig", c.name), 1, Some(0));
            let bytes = c.desc.row_bytes.zext(a.max(ROW_BYTES_BITS)).trunc(a);
            let same = c.desc.stride.eq(bytes);
            m.set_next(r, same);
            m.set_enable(r, c.load);
            r.q
        })
        .collect();
    // Registered in two stages: the minimums, multiply and subtractions are not in series
    // with the arbitration and the AR register.
    let beats: Vec<Sig> = chans
        .iter()
        .zip(&contig)
        .map(|(c, &k)| burst_beats(m, cfg, c, k))
        .collect();
    // The walk stood still for the two cycles its burst length takes.
    let still: Vec<Sig> = chans
        .iter()
        .map(|c| {
            let now = c.walk_still.expect("an AXI4 channel tracks its walk").q;
            now & m.delay(&format!("{}_walk_still2", c.name), now)
        })
        .collect();
    let left: Vec<RegHandle> = chans
        .iter()
        .map(|c| m.reg(&format!("{}_burst_left", c.name), 9, Some(0)))
        .collect();
    let inside: Vec<Sig> = left.iter().map(|l| l.q.any()).collect();
    Bursts {
        beats,
        left,
        inside,
        still,
    }
}

/// The AR channel: the read channels' bursts, round robin, through a register slice.
struct ReadAddresses {
    /// Per read channel: its walker steps (its burst taken into the slice, or inside one).
    steps: Vec<Sig>,
    /// The slice: an AR presented and held until accepted, its ID, address and LEN.
    valid: RegHandle,
    id: RegHandle,
    addr: RegHandle,
    len: RegHandle,
    /// Per read channel: bursts in flight.
    outstanding: Vec<RegHandle>,
}

/// New bursts round robin among the read channels (Q, K, V, X) with room for one more in
/// flight, into the AR register slice when it is empty or its AR is being accepted.
fn read_addresses(
    m: &mut ModuleBuilder,
    chans: &[Channel],
    walk: &Bursts,
    arready: Sig,
    bursts_back: &[Sig],
    open: Sig,
    limit: Sig,
) -> ReadAddresses {
    let ob = limit.width();
    let nr = bursts_back.len();
    let valid = m.reg("ar_valid", 1, Some(0));
    // The ID: as wide as a grant among the read channels (4 places, or 8).
    let id_bits = addr_bits((nr as u32).max(4).next_power_of_two());
    let id = m.reg("ar_id", id_bits, Some(0));
    let addr = m.reg("ar_addr", chans[0].req_addr.q.width(), Some(0));
    let len = m.reg("ar_len", 8, Some(0));
    let free = !valid.q | arready;
    let mut cand = vec![];
    let reads_out: Vec<RegHandle> = (0..nr)
        .map(|i| m.reg(&format!("{}_bursts", chans[i].name), ob, Some(0)))
        .collect();
    for i in 0..nr {
        let room = reads_out[i].q.lt(limit);
        let ready = and_all(&[chans[i].req_valid, !walk.inside[i], walk.still[i], room]);
        cand.push(ready & free);
    }
    // `open` (no hold) gates the winner, not the arbitration.
    let (any, grant, ar_rr) = round_robin(m, "ar_rr", &cand);
    let take = m.name("ar_take", any & open);
    m.set_enable(ar_rr, take);
    m.set_next(valid, take | (valid.q & !arready));
    let ar_addrs: Vec<Sig> = chans[..nr].iter().map(|c| c.req_addr.q).collect();
    let ar_beats: Vec<Sig> = walk.beats[..nr].to_vec();
    let beats = mux_index(grant, &ar_beats);
    let len_d = axi_len(m, beats);
    for (r, d) in [
        (id, grant),
        (addr, mux_index(grant, &ar_addrs)),
        (len, len_d),
    ] {
        m.set_next(r, d);
        m.set_enable(r, take);
    }
    let mut steps = vec![];
    for i in 0..nr {
        let taken = take & grant.eq(i as u64);
        let taken = m.name(&format!("{}_ar_taken", chans[i].name), taken);
        count_in_flight(m, reads_out[i], (taken, bursts_back[i]), None);
        steps.push(taken | walk.inside[i]);
    }
    ReadAddresses {
        steps,
        valid,
        id,
        addr,
        len,
        outstanding: reads_out,
    }
}

/// The AW and W channels: the O channel's bursts.
struct WriteBursts {
    aw_valid: RegHandle,
    aw_addr: RegHandle,
    aw_len: RegHandle,
    /// Bursts whose response is not back.
    outstanding: RegHandle,
    open_burst: Sig,
    b_back: Sig,
    wvalid: Sig,
    accept: Sig,
    wlast: Sig,
}

/// The O channel opens a burst by loading the AW register (held until accepted), then offers
/// its beats on W, WLAST on the last.
fn write_bursts(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    o: &Channel,
    walk: &Bursts,
    ins: &AxiIn,
    open: Sig,
    limit: Sig,
) -> WriteBursts {
    let aw_valid = m.reg("aw_valid", 1, Some(0));
    let aw_addr = m.reg("aw_addr", cfg.addr_bits, Some(0));
    let aw_len = m.reg("aw_len", 8, Some(0));
    let writes_out = m.reg("o_bursts", limit.width(), Some(0));
    let slot_free = !aw_valid.q | ins.awready;
    let room = writes_out.q.lt(limit);
    let nw = walk.inside.len() - 1;
    let open_burst = and_all(&[
        o.req_valid,
        !walk.inside[nw],
        walk.still[nw],
        room,
        open,
        slot_free,
    ]);
    let open_burst = m.name("o_open_burst", open_burst);
    m.set_next(aw_valid, open_burst | (aw_valid.q & !ins.awready));
    m.set_next(aw_addr, o.req_addr.q);
    m.set_enable(aw_addr, open_burst);
    let o_len_m1 = axi_len(m, walk.beats[nw]);
    m.set_next(aw_len, o_len_m1);
    m.set_enable(aw_len, open_burst);
    let b_back = ins.bvalid & ins.bid.eq(AXI_WRITE_ID);
    count_in_flight(m, writes_out, (open_burst, b_back), None);
    let wvalid = walk.inside[nw];
    let accept = wvalid & ins.wready;
    // The fault: WLAST one beat early (and missing on single-beat bursts).
    let left = walk.left[nw].q;
    let wlast = m.with_fault(
        cfg.faults,
        crate::fault::Fault::EarlyWlast,
        |_| left.eq(2),
        left.eq(1),
    );
    WriteBursts {
        aw_valid,
        aw_addr,
        aw_len,
        outstanding: writes_out,
        open_burst,
        b_back,
        wvalid,
        accept,
        wlast,
    }
}

/// The master's outputs: the AR and AW payloads, W from the staging buffer (`o_rd_data`),
/// fixed fields (INCR, full beats, all strobes, cacheable, unprivileged), R and B always ready.
fn axi_outputs(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    ar: &ReadAddresses,
    w: &WriteBursts,
) -> AxiOut {
    let ib = cfg.axi_id_bits;
    let write_id = m.lit(ib, AXI_WRITE_ID);
    let size = m.lit(3, cfg.beat_shift() as u64);
    let wdata = m.input("o_rd_data", cfg.width);
    let cache = m.lit(4, AXI_CACHE);
    let incr = m.lit(2, AXI_INCR);
    AxiOut {
        awvalid: w.aw_valid.q,
        awid: write_id,
        awaddr: w.aw_addr.q,
        awlen: w.aw_len.q,
        awsize: size,
        awburst: incr,
        awlock: m.zero(1),
        awcache: cache,
        awprot: m.zero(3),
        awqos: m.zero(4),
        wvalid: w.wvalid,
        wdata,
        wstrb: m.ones(cfg.width / 8),
        wlast: w.wlast,
        bready: m.lit(1, 1),
        arvalid: ar.valid.q,
        arid: ar.id.q.zext(ib),
        araddr: ar.addr.q,
        arlen: ar.len.q,
        arsize: size,
        arburst: incr,
        arlock: m.zero(1),
        arcache: cache,
        arprot: m.zero(3),
        arqos: m.zero(4),
        rready: m.lit(1, 1),
    }
}
