//! `vlink`: one bundle of vertical links (TSVs or hybrid bonds between two tiers) with spare
//! lanes, its share of the link self-test, and shifted-lane repair (bit-exact model:
//! `kernels::link`, which cites the repair scheme followed).
//!
//! The bundle's `lanes` logical lanes cross in groups of `group`, each group on its lanes plus
//! `spares` spare physical lanes. Transmitter: physical lane j of a group carries logical lane
//! `j − tx_shift[j]` of the group (nothing past its last); `link_latency` register stages
//! (the link's own, as before); receiver: logical lane i reads physical lane `i + rx_shift[i]`.
//! Both shift maps (the repair map register) reset to 0, every lane on its own TSV.
//!
//! The self-test bus (`vlink_bist`, from the core's controller [`controller`], threaded to every
//! bundle): `clear` empties the failed-lane register; in `run` cycles the transmitter drives
//! the test pattern instead of data (physical lane `step` of every group carries `!zero`, every
//! other lane `zero`); `link_latency` cycles later the receiver compares each physical lane
//! with the pattern and marks the lanes that differ failed; `load` loads the repair map from
//! the failed lanes: each good lane's shift is the count of failed lanes below it in its group.
//! While a pattern arrives the logical outputs are 0, so no test bit reaches the tier above
//! as data. Outputs: the failed lanes' count, and `bad`: a group has more than `spares`.
//!
//! Fault injection (a core built for it, `crate::fault`): each physical lane's receiver may be
//! stuck at 0, stuck at 1 or open (a resistive open: it sees the lane's value a cycle late),
//! as the threaded input `tsv_lane_fault` says: [`FAULT_SLOTS`] entries of (kind, lane), the
//! lane numbered within the PE row ([`LinkConfig::base`] + the bundle's physical lane).

use kernels::link::Geometry;

use crate::ir::iface::Block;
use crate::{addr_bits, bits_for, cat, interface, mux, mux_index, or_all, Design, ModuleBuilder};
use crate::{RegHandle, Sig};

/// The self-test bus's name (threaded from the core's engine to every bundle).
pub const BIST: &str = crate::ir::builder::LINK_BIST;
/// A row's lane faults (threaded from the PE row to every bundle in it).
pub const LANE_FAULTS: &str = crate::ir::builder::LANE_FAULTS;
/// The lane (numbered within the row, [`Bundle::base`]) whose failed flag the row's bundles
/// show (threaded from the PE row, which the engine gives the core's `link_probe` when it
/// names the row, else [`NO_LANE`]).
pub const PROBE: &str = crate::ir::builder::LINK_PROBE;
/// A probe that names no lane.
pub const NO_LANE: u64 = (1 << LANE_BITS) - 1;
/// The core's lane faults (threaded from the core's top to its engine, which gives each row
/// its own): [`FAULT_SLOTS`] entries of (kind, row, lane).
pub const CORE_FAULTS: &str = crate::ir::builder::CORE_FAULTS;
/// Bits of a row's number in a core's lane fault.
pub const ROW_BITS: u32 = 8;
/// Lane faults one run can inject in a row (and in the core).
pub const FAULT_SLOTS: u32 = 8;
/// Bits of a fault's kind (0 none, then `kernels::link::LaneFault::code`).
pub const KIND_BITS: u32 = 2;
/// Bits of a lane's number within a PE row.
pub const LANE_BITS: u32 = 16;

/// The self-test bus's width for groups of `width` physical lanes: clear, load, run, zero,
/// step.
pub fn bist_bits(width: u32) -> u32 {
    4 + addr_bits(width)
}

/// A row's lane-fault input's width.
pub fn lane_fault_bits() -> u32 {
    FAULT_SLOTS * (KIND_BITS + LANE_BITS)
}

/// The core's lane-fault input's width.
pub fn core_fault_bits() -> u32 {
    FAULT_SLOTS * (KIND_BITS + ROW_BITS + LANE_BITS)
}

/// Row `row`'s lane faults out of the core's (`faults`, [`CORE_FAULTS`]): each entry's kind
/// where its row is `row`, else no fault.
pub fn row_faults(m: &mut ModuleBuilder, faults: Sig, row: u32) -> Sig {
    let entry = KIND_BITS + ROW_BITS + LANE_BITS;
    let none = m.zero(KIND_BITS);
    let mut out = vec![];
    for e in (0..FAULT_SLOTS).rev() {
        let lo = e * entry;
        let kind = faults.slice(lo + entry - 1, lo + ROW_BITS + LANE_BITS);
        let at = faults.slice(lo + ROW_BITS + LANE_BITS - 1, lo + LANE_BITS);
        let lane = faults.slice(lo + LANE_BITS - 1, lo);
        out.push(mux(at.eq(row as u64), kind, none));
        out.push(lane);
    }
    cat(&out)
}

/// The self-test bus's fields.
#[derive(Clone, Copy, Debug)]
pub struct Bist {
    pub clear: Sig,
    pub load: Sig,
    pub run: Sig,
    pub zero: Sig,
    pub step: Sig,
}

impl Bist {
    fn of(bus: Sig) -> Bist {
        let n = bus.width();
        Bist {
            clear: bus.bit(n - 1),
            load: bus.bit(n - 2),
            run: bus.bit(n - 3),
            zero: bus.bit(n - 4),
            step: bus.slice(n - 5, 0),
        }
    }

    fn bus(&self) -> Sig {
        cat(&[self.clear, self.load, self.run, self.zero, self.step])
    }
}

/// One bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    pub geometry: Geometry,
    /// Register stages between the transmitter and the TSVs' receivers.
    pub latency: u32,
    /// The number of the bundle's first physical lane within its PE row (fault injection).
    pub base: u32,
    /// Built for fault injection.
    pub faults: bool,
}

impl LinkConfig {
    pub fn module_name(&self) -> String {
        let g = &self.geometry;
        format!(
            "vlink_n{}_g{}s{}_l{}{}",
            g.lanes,
            g.group,
            g.spares,
            self.latency,
            if self.faults {
                format!("_at{}_faults", self.base)
            } else {
                String::new()
            }
        )
    }
}

interface! {
    /// A bundle's input: the logical lanes at the transmitter.
    pub struct LinkIn { d }
}

interface! {
    /// A bundle's outputs: the logical lanes at the receiver, its failed lanes' count, whether
    /// a group has more than its spares, and whether the probed lane is one of its failed.
    pub struct LinkOut { q, failed, bad, probed }
}

interface! {
    /// A row's (and the core's engine's) links as the core sees them: a group beyond repair,
    /// the failed lanes, the probed lane failed.
    pub struct LinkStatus { bad, failed, probed }
}

interface! {
    /// With spare lanes, what asks for a link test: `test` (taken while idle; one also runs at
    /// reset) and `probe`, a lane (row, and the lane within the row: [`probe_value`]) whose
    /// result `probed` shows.
    pub struct LinkReq { test, probe }
}

impl LinkReq<u32> {
    pub fn widths() -> Self {
        LinkReq {
            test: 1,
            probe: ROW_BITS + LANE_BITS,
        }
    }
}

interface! {
    /// With spare lanes: a link test is running (the core is busy), some bundle has more failed
    /// lanes than spares (START is refused with `ERR_CODE` LINK), the failed lanes found by
    /// the last test, the cycles it took, and whether the probed lane is one of them.
    pub struct LinkState { testing, bad, failed, cycles, probed }
}

impl LinkState<u32> {
    /// With a failed-lane count of `failed` bits.
    pub fn widths(failed: u32) -> Self {
        LinkState {
            testing: 1,
            bad: 1,
            failed,
            cycles: CYCLE_BITS,
            probed: 1,
        }
    }
}

/// The bundle's block.
pub type LinkBlock = Block<LinkIn, LinkOut<u32>>;

/// Bits of a failed-lane count of `physical` lanes.
pub fn count_bits(physical: u32) -> u32 {
    bits_for(physical as u64)
}

/// Defines the bundle `cfg`.
pub fn build(d: &mut Design, cfg: &LinkConfig) -> LinkBlock {
    let g = cfg.geometry;
    let cfg = *cfg;
    let outputs = LinkOut {
        q: g.lanes,
        failed: count_bits(g.physical()),
        bad: 1,
        probed: 1,
    };
    assert!(
        cfg.base + g.physical() < 1 << LANE_BITS,
        "a bundle of {} physical lanes from lane {}: lanes are numbered in {LANE_BITS} bits",
        g.physical(),
        cfg.base,
    );
    d.define_block(
        &cfg.module_name(),
        &LinkIn { d: g.lanes },
        outputs,
        |_, m, i| {
            m.doc(&format!(
                "vlink: {} lanes across a tier boundary in groups of {} with {} spare lanes each\n\
                 ({} physical), {} register stages; walking-one and walking-zero self-test and\n\
                 shifted-lane repair. See hdl/src/link.rs. Model: kernels::link.",
                g.lanes,
                g.group,
                g.spares,
                g.physical(),
                cfg.latency
            ));
            m.set_latency(cfg.latency);
            bundle(m, &cfg, i.d)
        },
    )
}

/// The physical lanes of group `grp` as (bundle index, index within the group).
fn group_lanes(g: &Geometry, grp: u32) -> impl Iterator<Item = (u32, u32)> {
    let base = g.group_base(grp);
    (0..g.group_lanes(grp) + g.spares).map(move |j| (base + j, j))
}

fn bundle(m: &mut ModuleBuilder, cfg: &LinkConfig, d: Sig) -> LinkOut {
    let g = cfg.geometry;
    let (n_phys, s) = (g.physical(), g.spares);
    let sw = bits_for(s as u64);
    let bist = Bist::of(m.threaded_input(BIST, bist_bits(g.width())));
    let tx_shift = m.reg("tx_shift", n_phys * sw, Some(0));
    let rx_shift = m.reg("rx_shift", g.lanes * sw, Some(0));
    let failed = m.reg("failed", n_phys, Some(0));
    let field = |r: RegHandle, k: u32| r.q.slice(k * sw + sw - 1, k * sw);
    let zero = m.zero(1);
    // Transmitter: each physical lane's logical lane, or the test pattern.
    let mut tx = vec![zero; n_phys as usize];
    for grp in 0..g.groups() {
        let first = grp * g.group;
        let n = g.group_lanes(grp);
        for (p, j) in group_lanes(&g, grp) {
            let from: Vec<Sig> = (0..=s)
                .map(|k| match j.checked_sub(k) {
                    Some(l) if l < n => d.bit(first + l),
                    _ => zero,
                })
                .collect();
            let data = mux_index(field(tx_shift, p), &from);
            let pattern = bist.step.eq(j as u64) ^ bist.zero;
            tx[p as usize] = mux(bist.run, pattern, data);
        }
    }
    tx.reverse();
    let sent = m.delay_n("lanes", cat(&tx), cfg.latency);
    // The pattern as it arrives (clear and load are the transmitter side's).
    let sw_step = bist.step.width();
    let arriving = m.delay_n("check", cat(&[bist.run, bist.zero, bist.step]), cfg.latency);
    let check = Bist {
        clear: bist.clear,
        load: bist.load,
        run: arriving.bit(sw_step + 1),
        zero: arriving.bit(sw_step),
        step: arriving.slice(sw_step - 1, 0),
    };
    let got = if cfg.faults {
        inject(m, cfg, sent)
    } else {
        sent
    };
    let got = m.name("lanes_rx", got);
    // Self-test: the lanes that differ from the pattern as it arrives.
    let mut expect = vec![zero; n_phys as usize];
    for grp in 0..g.groups() {
        for (p, j) in group_lanes(&g, grp) {
            expect[p as usize] = check.step.eq(j as u64) ^ check.zero;
        }
    }
    expect.reverse();
    let differ = (got ^ cat(&expect)) & check.run.repeat(n_phys);
    let none = m.zero(n_phys);
    m.set_next(failed, mux(bist.clear, none, failed.q | differ));
    // The repair map from the failed lanes: per group, the failed lanes below each one.
    let cw = bits_for(s as u64 + 1);
    let mut tx_next = vec![m.zero(sw); n_phys as usize];
    let mut rx_next = vec![m.zero(sw); g.lanes as usize];
    let mut bad = vec![];
    for grp in 0..g.groups() {
        let mut below = m.zero(cw);
        let lanes: Vec<(u32, u32)> = group_lanes(&g, grp).collect();
        let mut counts = vec![];
        for &(p, _) in &lanes {
            counts.push(below);
            let full = below.eq(s as u64 + 1);
            let inc = below + failed.q.bit(p).zext(cw);
            below = mux(full, below, inc);
        }
        bad.push(below.eq(s as u64 + 1));
        for (&(p, _), &c) in lanes.iter().zip(&counts) {
            tx_next[p as usize] = c.resize(sw);
        }
        for i in 0..g.group_lanes(grp) {
            // Logical lane i: the good lane i + k with k failed lanes below it.
            let hits: Vec<Sig> = (0..=s)
                .filter_map(|k| lanes.get((i + k) as usize).map(|&(p, _)| (p, k)))
                .map(|(p, k)| {
                    let on = !failed.q.bit(p) & counts[(p - lanes[0].0) as usize].eq(k as u64);
                    let k = m.lit(sw, k as u64);
                    mux(on, k, m.zero(sw))
                })
                .collect();
            rx_next[(grp * g.group + i) as usize] = or_all(&hits);
        }
    }
    tx_next.reverse();
    rx_next.reverse();
    // A lane near its group's start shifts by fewer than `spares` places (near the end, too,
    // on the receiver's side): synthesis drops the flip-flops of the shifts no lane can take.
    m.discard(tx_shift.q);
    m.discard(rx_shift.q);
    m.set_next(tx_shift, cat(&tx_next));
    m.set_enable(tx_shift, bist.load);
    m.set_next(rx_shift, cat(&rx_next));
    m.set_enable(rx_shift, bist.load);
    // Receiver: each logical lane from its physical lane; nothing while a pattern arrives.
    let mut q = vec![];
    for grp in 0..g.groups() {
        let lanes: Vec<(u32, u32)> = group_lanes(&g, grp).collect();
        for i in 0..g.group_lanes(grp) {
            let from: Vec<Sig> = (0..=s)
                .map(|k| {
                    lanes
                        .get((i + k) as usize)
                        .map_or(zero, |&(p, _)| got.bit(p))
                })
                .collect();
            let l = grp * g.group + i;
            q.push(mux_index(field(rx_shift, l), &from) & !check.run);
        }
    }
    q.reverse();
    let failed_bits: Vec<Sig> = (0..n_phys).map(|p| failed.q.bit(p)).collect();
    // The probe: the failed flag of the lane it names, if the lane is this bundle's.
    let probe = m.threaded_input(PROBE, LANE_BITS);
    let lane = probe - cfg.base as u64;
    let within = probe.ge(cfg.base as u64) & lane.lt(n_phys as u64);
    let flag = mux_index(lane.resize(addr_bits(n_phys)), &failed_bits);
    if addr_bits(n_phys) < LANE_BITS {
        m.discard(lane);
    }
    LinkOut {
        q: cat(&q),
        failed: m.sum(&failed_bits, count_bits(n_phys)),
        bad: or_all(&bad),
        probed: within & flag,
    }
}

/// The receivers' view of `sent` with the injected lane faults.
fn inject(m: &mut ModuleBuilder, cfg: &LinkConfig, sent: Sig) -> Sig {
    let n = sent.width();
    let faults = m.threaded_input(LANE_FAULTS, lane_fault_bits());
    let entry = KIND_BITS + LANE_BITS;
    let slots: Vec<(Sig, Sig)> = (0..FAULT_SLOTS)
        .map(|e| {
            let lo = e * entry;
            (
                faults.slice(lo + entry - 1, lo + LANE_BITS),
                faults.slice(lo + LANE_BITS - 1, lo),
            )
        })
        .collect();
    let late = m.delay("lanes_late", sent);
    let zero = m.zero(KIND_BITS);
    let mut got = vec![];
    for p in 0..n {
        let kinds: Vec<Sig> = slots
            .iter()
            .map(|&(kind, lane)| mux(lane.eq((cfg.base + p) as u64), kind, zero))
            .collect();
        let kind = or_all(&kinds);
        let (v, l) = (sent.bit(p), late.bit(p));
        let (one, nil) = (m.lit(1, 1), m.zero(1));
        got.push(mux_index(kind, &[v, nil, one, l]));
    }
    got.reverse();
    cat(&got)
}

/// What the core's link-test controller gives: the self-test bus, a test running, and the
/// cycles the last test took.
pub struct Controller {
    pub bus: Sig,
    pub testing: Sig,
    pub cycles: Sig,
}

/// Bits of the controller's cycle count.
pub const CYCLE_BITS: u32 = 16;

/// The link-test controller: a test at reset and at each `request` while idle: a cycle to
/// clear the failed lanes, `2 (group + spares)` pattern cycles, `latency` cycles for the last
/// pattern to arrive, a cycle to load the repair maps (`Geometry::test_cycles`).
pub fn controller(m: &mut ModuleBuilder, g: &Geometry, latency: u32, request: Sig) -> Controller {
    let w = g.width();
    // Phases: clear (the state at reset), run, drain, load, idle.
    let clear = m.reg("bist_clear", 1, Some(1));
    let run = m.reg("bist_run", 1, Some(0));
    let drain = m.reg("bist_drain", 1, Some(0));
    let load = m.reg("bist_load", 1, Some(0));
    let zero = m.reg("bist_zero", 1, Some(0));
    let step = m.reg("bist_step", addr_bits(w), Some(0));
    let wait = m.reg("bist_wait", bits_for(latency as u64), Some(0));
    let testing = clear.q | run.q | drain.q | load.q;
    let (step_n, step_last) = m.wrapping_step(step.q, w);
    let run_end = run.q & zero.q & step_last;
    let drain_end = if latency == 0 {
        run_end
    } else {
        drain.q & wait.q.eq(latency as u64 - 1)
    };
    let (no, step_0, wait_0) = (m.zero(1), m.zero(step.q.width()), m.zero(wait.q.width()));
    m.set_next(clear, request & !testing);
    m.set_next(run, clear.q | (run.q & !run_end));
    m.set_next(step, mux(clear.q, step_0, step_n));
    m.set_enable(step, clear.q | run.q);
    m.set_next(zero, mux(clear.q, no, zero.q | step_last));
    m.set_enable(zero, clear.q | run.q);
    if latency == 0 {
        m.set_next(drain, no);
        m.discard(wait.q);
        m.set_next(wait, wait_0);
    } else {
        m.set_next(drain, run_end | (drain.q & !drain_end));
        let w1 = wait.q + 1;
        m.set_next(wait, mux(drain.q, w1, wait_0));
    }
    m.set_next(load, drain_end);
    let cycles = m.reg("bist_cycles", CYCLE_BITS, Some(0));
    let one = m.lit(CYCLE_BITS, 1);
    m.set_next(cycles, mux(clear.q, one, cycles.q + 1));
    m.set_enable(cycles, testing);
    let bus = Bist {
        clear: clear.q,
        load: load.q,
        run: run.q,
        zero: zero.q,
        step: step.q,
    };
    Controller {
        bus: bus.bus(),
        testing,
        cycles: cycles.q,
    }
}

/// The vertical bundles: a reg3d PE row's, and the stacked GLB's bond (numbered as the lanes
/// of one more row, [`GLB_ROW`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bundle {
    /// P weights up to the PV tier's P bank (write enable, address, data), `vlink_latency`
    /// stages: the QK → PV bundle (from the softmax tier with three tiers).
    PUp,
    /// O values down from the PV tier to the readout, combinational.
    ODown,
    /// Three tiers: the S links from the QK PEs up to the softmax tier's S registers (each
    /// PE's score, or with narrow links its beats, and the position they are written at).
    SUp,
    /// The stacked GLB's bond, from the logic tier up to the banks: each bank group's write
    /// enable, address and data, read enable and address (a `vlink` per group, combinational:
    /// the banks register them), group 0's lanes first.
    GlbUp,
    /// The bond down: each bank group's read data (a `vlink` per group, combinational).
    GlbDown,
}

/// The row number of the stacked GLB's bond in lane faults and the probe (past every PE row).
pub const GLB_ROW: u32 = (1 << ROW_BITS) - 1;

impl Bundle {
    pub const ALL: [Bundle; 5] = [
        Bundle::PUp,
        Bundle::ODown,
        Bundle::SUp,
        Bundle::GlbUp,
        Bundle::GlbDown,
    ];

    /// The number of its first physical lane within its row (fault injection, the probe): a
    /// PE row's bundles a quarter of the [`LANE_BITS`] apart, the GLB's bond (its own row)
    /// up at 0 and down at half.
    pub fn base(self) -> u32 {
        match self {
            Bundle::PUp | Bundle::GlbUp => 0,
            Bundle::ODown => 1 << (LANE_BITS - 2),
            Bundle::SUp => 2 << (LANE_BITS - 2),
            Bundle::GlbDown => 1 << (LANE_BITS - 1),
        }
    }

    /// The most physical lanes it may have (its numbers up to the next bundle's base).
    pub fn max_lanes(self) -> u32 {
        match self {
            Bundle::GlbUp | Bundle::GlbDown => 1 << (LANE_BITS - 1),
            _ => 1 << (LANE_BITS - 2),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Bundle::PUp => "p_up",
            Bundle::ODown => "o_down",
            Bundle::SUp => "s_up",
            Bundle::GlbUp => "glb_up",
            Bundle::GlbDown => "glb_down",
        }
    }

    /// The stacked GLB's bond (in row [`GLB_ROW`]).
    pub fn glb(self) -> bool {
        matches!(self, Bundle::GlbUp | Bundle::GlbDown)
    }
}

/// One vertical bundle of a core: its row ([`GLB_ROW`] for the GLB's bond), which, its shape
/// (of one part), its parts (`vlink`s of that shape, their lanes numbered one after
/// another: the GLB's bank groups) and register stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleAt {
    pub row: u32,
    pub bundle: Bundle,
    pub geometry: Geometry,
    pub parts: u32,
    pub latency: u32,
}

impl BundleAt {
    /// Its physical lanes (every part's).
    pub fn lanes(&self) -> u32 {
        self.parts * self.geometry.physical()
    }

    /// The group of spares physical lane `lane` is in: (part, group within the part).
    pub fn group_of(&self, lane: u32) -> (u32, u32) {
        let n = self.geometry.physical();
        (lane / n, lane % n / self.geometry.width())
    }
}

/// A row's name in reports: its number, or `glb` for the GLB's bond.
pub fn row_name(row: u32) -> String {
    if row == GLB_ROW {
        "glb".into()
    } else {
        format!("row {row}")
    }
}

/// The signals that cross one bundle. Without spares each goes through the link's register
/// stages as before; with them, each is a net the bundle drives once every signal is in
/// ([`Crossing::finish`]).
pub struct Crossing {
    spares: Option<crate::variants::Spares>,
    latency: u32,
    sent: Vec<Sig>,
    arriving: Vec<Sig>,
}

impl Crossing {
    pub fn new(spares: Option<crate::variants::Spares>, latency: u32) -> Self {
        Crossing {
            spares,
            latency,
            sent: vec![],
            arriving: vec![],
        }
    }

    /// `x` as it arrives across the tier boundary.
    pub fn send(&mut self, m: &mut ModuleBuilder, name: &str, x: Sig) -> Sig {
        match self.spares {
            None => m.delay_n(name, x, self.latency),
            Some(_) => {
                let net = m.net(name, x.width());
                self.sent.push(x);
                self.arriving.push(net);
                net
            }
        }
    }

    /// Builds the bundle `which` of `lanes` lanes (checked against the signals sent) and drives
    /// what arrives; its status, or None without spares.
    pub fn finish(
        self,
        d: &mut Design,
        m: &mut ModuleBuilder,
        (which, lanes): (Bundle, u32),
        faults: bool,
    ) -> Option<LinkStatus> {
        self.finish_part(d, m, (which, lanes, None), faults)
    }

    /// As [`Crossing::finish`] for part `n` of a bundle built of equal parts (the GLB's bond,
    /// a part per bank group): its lanes numbered after the parts before it.
    pub fn finish_part(
        self,
        d: &mut Design,
        m: &mut ModuleBuilder,
        (which, lanes, n): (Bundle, u32, Option<u32>),
        faults: bool,
    ) -> Option<LinkStatus> {
        let spares = self.spares?;
        let width: u32 = self.sent.iter().map(|s| s.width()).sum();
        assert_eq!(width, lanes, "bundle {} lanes", which.name());
        let geometry = Geometry {
            lanes,
            group: spares.group,
            spares: spares.spares,
        };
        let cfg = LinkConfig {
            geometry,
            latency: self.latency,
            base: which.base() + n.unwrap_or(0) * geometry.physical(),
            faults,
        };
        let blk = build(d, &cfg);
        let mut sent = self.sent;
        sent.reverse();
        let instance = match n {
            Some(n) => format!("u_{}_{n}", which.name()),
            None => format!("u_{}", which.name()),
        };
        let out = m.instantiate(&blk, &instance, &LinkIn { d: cat(&sent) });
        let mut lo = 0;
        for net in self.arriving {
            let w = net.width();
            m.drive(net, out.q.slice(lo + w - 1, lo));
            lo += w;
        }
        Some(LinkStatus {
            bad: out.bad,
            failed: out.failed,
            probed: out.probed,
        })
    }
}

impl LinkState {
    /// A link test's state: its controller's `ctl` over the bundles whose status is `status`.
    pub fn of(ctl: &Controller, status: LinkStatus) -> Self {
        LinkState {
            testing: ctl.testing,
            bad: status.bad,
            failed: status.failed,
            cycles: ctl.cycles,
            probed: status.probed,
        }
    }
}

/// The statuses of several bundles as one: any beyond repair, the failed lanes' sum.
pub fn combine(m: &mut ModuleBuilder, all: &[LinkStatus], width: u32) -> LinkStatus {
    let bads: Vec<Sig> = all.iter().map(|s| s.bad).collect();
    let failed: Vec<Sig> = all.iter().map(|s| s.failed).collect();
    let probed: Vec<Sig> = all.iter().map(|s| s.probed).collect();
    LinkStatus {
        bad: or_all(&bads),
        failed: m.sum(&failed, width),
        probed: or_all(&probed),
    }
}

/// A TSV fault on one physical lane of one row's bundle (fault injection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TsvFault {
    pub row: u32,
    pub bundle: Bundle,
    /// The physical lane within the bundle.
    pub lane: u32,
    pub kind: kernels::link::LaneFault,
}

/// The core's `link_probe` value naming `row`'s lane `lane` of `bundle` (a physical lane).
pub fn probe_value(row: u32, bundle: Bundle, lane: u32) -> u64 {
    (row as u64) << LANE_BITS | (bundle.base() + lane) as u64
}

/// Row `row`'s probe out of the core's (`probe`: row, lane): the lane where it names the row,
/// else [`NO_LANE`].
pub fn row_probe(m: &mut ModuleBuilder, probe: Sig, row: u32) -> Sig {
    let none = m.lit(LANE_BITS, NO_LANE);
    let at = probe.slice(ROW_BITS + LANE_BITS - 1, LANE_BITS);
    mux(at.eq(row as u64), probe.slice(LANE_BITS - 1, 0), none)
}

/// The core's lane-fault port ([`CORE_FAULTS`]) as 32-bit words, for `faults` (at most
/// [`FAULT_SLOTS`]).
pub fn core_fault_words(faults: &[TsvFault]) -> Vec<u32> {
    assert!(
        faults.len() <= FAULT_SLOTS as usize,
        "at most 8 lane faults"
    );
    let entry = KIND_BITS + ROW_BITS + LANE_BITS;
    let mut words = vec![0u32; core_fault_bits().div_ceil(32) as usize];
    for (e, f) in faults.iter().enumerate() {
        let x = f.kind.code() << (ROW_BITS + LANE_BITS)
            | (f.row as u64) << LANE_BITS
            | (f.bundle.base() + f.lane) as u64;
        for b in 0..entry {
            if x >> b & 1 == 1 {
                let at = e as u32 * entry + b;
                words[(at / 32) as usize] |= 1 << (at % 32);
            }
        }
    }
    words
}
