//! A mesh NoC router, cycle by cycle: the bit-exact model of `hdl::array::noc` (the router of
//! the `noc2d` baseline, issue 56: the 2-D multi-array designs 3D-Flow compares against move
//! S and P between arrays over router-to-router links instead of vertical ones).
//!
//! **The router.** Five ports, each an input and an output: local (the node's own traffic),
//! east (+x), west (−x), north (+y) and south (−y). A flit is one packet: its destination
//! (x, y) in the low bits, its payload above. Each input has a FIFO of `depth` flits; each
//! output a credit counter (the free places of the FIFO it feeds, `depth` at reset) and a link
//! register. Every cycle, the head flit of each input is routed dimension-ordered (XY: east or
//! west until its x is the router's, then north or south, then local), each output grants one
//! of the inputs whose head routes to it while it holds a credit, round robin from the input
//! after the one it granted last; a granted flit leaves its FIFO and enters the output's link
//! register (on the wire the next cycle), the output spends a credit, and the input returns
//! one upstream (its `credit_out`, registered). A flit thus takes two cycles a hop: written
//! into an input FIFO, then through the switch into a link register. This is the classic
//! input-queued, credit-flow-controlled wormhole router (Dally and Towles, "Principles and
//! Practices of Interconnection Networks", 2004, ch. 16) with single-flit packets, so no
//! output is held between the flits of a packet.

/// A router's ports, in their order on the block.
pub const PORTS: [&str; 5] = ["l", "e", "w", "n", "s"];
/// Port numbers.
pub const LOCAL: usize = 0;
pub const EAST: usize = 1;
pub const WEST: usize = 2;
pub const NORTH: usize = 3;
pub const SOUTH: usize = 4;

/// The coordinate bits a line of `hops` hops needs (x up to `hops`).
pub fn coord_bits(hops: u32) -> u32 {
    (32 - hops.leading_zeros()).max(1)
}

/// A router's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RouterConfig {
    /// Bits of a flit: the destination's x and y (`coord_bits` each, low bits first) and the
    /// payload above them.
    pub flit_bits: u32,
    /// Bits of one coordinate.
    pub coord_bits: u32,
    /// Flits each input FIFO holds.
    pub depth: u32,
}

impl RouterConfig {
    pub fn payload_bits(&self) -> u32 {
        self.flit_bits - 2 * self.coord_bits
    }
}

/// One flit: its destination and payload (`payload_bits`, low word first).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Flit {
    pub x: u32,
    pub y: u32,
    pub payload: Vec<u32>,
}

impl Flit {
    /// Its bits on a link of `cfg`, as 32-bit words (low first).
    pub fn words(&self, cfg: &RouterConfig) -> Vec<u32> {
        let cb = cfg.coord_bits;
        let mut w = vec![0u32; cfg.flit_bits.div_ceil(32) as usize];
        let mut put = |at: u32, v: u32, n: u32| {
            for b in 0..n {
                if v >> b & 1 == 1 {
                    w[((at + b) / 32) as usize] |= 1 << ((at + b) % 32);
                }
            }
        };
        put(0, self.x, cb);
        put(cb, self.y, cb);
        for b in 0..cfg.payload_bits() {
            let bit = self.payload[(b / 32) as usize] >> (b % 32) & 1;
            put(2 * cb + b, bit, 1);
        }
        w
    }

    /// The flit whose link bits are `w`.
    pub fn from_words(w: &[u32], cfg: &RouterConfig) -> Flit {
        let cb = cfg.coord_bits;
        let get = |at: u32, n: u32| -> u32 {
            (0..n).fold(0, |v, b| {
                v | (w[((at + b) / 32) as usize] >> ((at + b) % 32) & 1) << b
            })
        };
        let pb = cfg.payload_bits();
        let mut payload = vec![0u32; pb.div_ceil(32) as usize];
        for b in 0..pb {
            payload[(b / 32) as usize] |= get(2 * cb + b, 1) << (b % 32);
        }
        Flit {
            x: get(0, cb),
            y: get(cb, cb),
            payload,
        }
    }
}

/// The output port dimension-ordered routing takes at router (`x`, `y`) to (`dx`, `dy`).
pub fn route(x: u32, y: u32, dx: u32, dy: u32) -> usize {
    if dx > x {
        EAST
    } else if dx < x {
        WEST
    } else if dy > y {
        NORTH
    } else if dy < y {
        SOUTH
    } else {
        LOCAL
    }
}

/// One router's state.
#[derive(Clone, Debug)]
pub struct Router {
    pub cfg: RouterConfig,
    pub x: u32,
    pub y: u32,
    fifos: [std::collections::VecDeque<Flit>; 5],
    credits: [u32; 5],
    /// Per output, the input its round robin starts from.
    next: [usize; 5],
    /// The link registers (what each output drives this cycle).
    pub out: [Option<Flit>; 5],
    /// The credits each input returns upstream this cycle.
    pub credit_out: [bool; 5],
}

/// What one cycle did: flits written into the input FIFOs and read out of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    pub writes: u32,
    pub reads: u32,
}

impl Router {
    pub fn new(cfg: RouterConfig, x: u32, y: u32) -> Router {
        Router {
            cfg,
            x,
            y,
            fifos: Default::default(),
            credits: [cfg.depth; 5],
            next: [0; 5],
            out: Default::default(),
            credit_out: [false; 5],
        }
    }

    /// The flits waiting in input `i`'s FIFO.
    pub fn queued(&self, i: usize) -> usize {
        self.fifos[i].len()
    }

    /// One clock edge: `input[i]` arrives at input `i` (its sender held a credit for it),
    /// `credit_in[o]` returns a credit to output `o`. Err if a flit arrives at a full FIFO or a
    /// credit past the depth (a sender's fault, never the router's).
    pub fn step(
        &mut self,
        input: &[Option<Flit>; 5],
        credit_in: &[bool; 5],
    ) -> Result<Events, String> {
        let heads: Vec<Option<usize>> = self
            .fifos
            .iter()
            .map(|f| f.front().map(|h| route(self.x, self.y, h.x, h.y)))
            .collect();
        let mut granted = [None; 5];
        for (o, g) in granted.iter_mut().enumerate() {
            if self.credits[o] == 0 {
                continue;
            }
            *g = (0..5)
                .map(|k| (self.next[o] + k) % 5)
                .find(|&i| heads[i] == Some(o));
        }
        let mut ev = Events::default();
        self.credit_out = [false; 5];
        for o in 0..5 {
            self.out[o] = granted[o].map(|i| {
                self.credit_out[i] = true;
                self.next[o] = (i + 1) % 5;
                self.credits[o] -= 1;
                ev.reads += 1;
                self.fifos[i].pop_front().expect("a granted head")
            });
            if credit_in[o] {
                self.credits[o] += 1;
                if self.credits[o] > self.cfg.depth {
                    return Err(format!("output {}: a credit past the depth", PORTS[o]));
                }
            }
        }
        for (i, f) in input.iter().enumerate() {
            if let Some(f) = f {
                if self.fifos[i].len() as u32 >= self.cfg.depth {
                    return Err(format!("input {}: a flit into a full FIFO", PORTS[i]));
                }
                self.fifos[i].push_back(f.clone());
                ev.writes += 1;
            }
        }
        Ok(ev)
    }
}

/// Routers in a row, `hops` links apart (router i's east output feeds router i + 1's west
/// input and takes its credits): a source at router 0's local input, holding a credit per
/// free place of that FIFO, and a sink at the last router's local output that takes a flit
/// every cycle. The path `noc2d` sends a PE row's traffic on from one array to the other.
#[derive(Clone, Debug)]
pub struct Line {
    pub routers: Vec<Router>,
    /// The source's credits for router 0's local input.
    pub credits: u32,
}

impl Line {
    pub fn new(cfg: RouterConfig, hops: u32) -> Line {
        Line {
            routers: (0..=hops).map(|x| Router::new(cfg, x, 0)).collect(),
            credits: cfg.depth,
        }
    }

    /// Whether the source may send this cycle.
    pub fn ready(&self) -> bool {
        self.credits > 0
    }

    /// One clock edge with `flit` (addressed to the last router) sent if given (the source
    /// must be [`Line::ready`]); the flit the sink takes this cycle, if any, and the cycle's
    /// events.
    pub fn step(&mut self, flit: Option<Flit>) -> Result<LineStep, String> {
        let n = self.routers.len();
        let out = self.routers[n - 1].out[LOCAL].clone();
        let links = self.routers[..n - 1]
            .iter()
            .filter(|r| r.out[EAST].is_some())
            .count() as u32;
        if self.routers[0].credit_out[LOCAL] {
            self.credits += 1;
        }
        if flit.is_some() {
            if self.credits == 0 {
                return Err("the source sent without a credit".into());
            }
            self.credits -= 1;
        }
        // Each router's inputs from its neighbours' registered outputs (before the edge).
        let wires: Vec<([Option<Flit>; 5], [bool; 5])> = (0..n)
            .map(|i| {
                let mut input: [Option<Flit>; 5] = Default::default();
                let mut credit = [false; 5];
                if i == 0 {
                    input[LOCAL] = flit.clone();
                } else {
                    input[WEST] = self.routers[i - 1].out[EAST].clone();
                    credit[WEST] = self.routers[i - 1].credit_out[EAST];
                }
                if i + 1 < n {
                    credit[EAST] = self.routers[i + 1].credit_out[WEST];
                } else {
                    credit[LOCAL] = out.is_some();
                }
                (input, credit)
            })
            .collect();
        let mut ev = Events::default();
        for (r, (input, credit)) in self.routers.iter_mut().zip(&wires) {
            let e = r.step(input, credit)?;
            ev.writes += e.writes;
            ev.reads += e.reads;
        }
        Ok(LineStep {
            out,
            events: ev,
            links,
        })
    }
}

/// One cycle of a [`Line`]: the flit the sink took, the FIFOs' writes and reads over every
/// router, and the flits on the links between routers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineStep {
    pub out: Option<Flit>,
    pub events: Events,
    pub links: u32,
}

/// A [`Line`]'s timing alone. With one source and one sink every flit takes the same ports
/// (router 0's local input, then each router's west input; the east outputs, then the last
/// router's local output), so a router is its FIFO's fill, its output's credits, its link
/// register and its input's returned credit, and the flits' order never changes. Cycle for
/// cycle a [`Line`] with the payloads left out (a test holds them equal); [`Path`] and the
/// cycle model step it.
#[derive(Clone, Debug)]
pub struct LineTiming {
    hops: Vec<HopState>,
    depth: u32,
    credits: u32,
}

#[derive(Clone, Copy, Debug)]
struct HopState {
    queued: u32,
    credits: u32,
    out: bool,
    credit_out: bool,
}

/// One cycle of a [`LineTiming`]: whether the sink takes a flit, the FIFOs' writes and reads
/// over every router, and the flits on the links between routers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineTick {
    pub out: bool,
    pub writes: u32,
    pub reads: u32,
    pub links: u32,
}

impl LineTiming {
    pub fn new(depth: u32, hops: u32) -> LineTiming {
        let hop = HopState {
            queued: 0,
            credits: depth,
            out: false,
            credit_out: false,
        };
        LineTiming {
            hops: vec![hop; hops as usize + 1],
            depth,
            credits: depth,
        }
    }

    /// Whether the source may send this cycle.
    pub fn ready(&self) -> bool {
        self.credits > 0
    }

    /// Whether the sink takes a flit this cycle.
    pub fn out(&self) -> bool {
        self.hops.last().is_some_and(|h| h.out)
    }

    /// No flit and no credit in flight: a cycle without a send changes nothing.
    pub fn idle(&self) -> bool {
        self.credits == self.depth
            && self
                .hops
                .iter()
                .all(|h| h.queued == 0 && h.credits == self.depth && !h.out && !h.credit_out)
    }

    /// One clock edge, a flit sent if `send` (the source must be [`LineTiming::ready`]).
    pub fn step(&mut self, send: bool) -> Result<LineTick, String> {
        let n = self.hops.len();
        let out = self.out();
        let mut tick = LineTick {
            out,
            links: self.hops[..n - 1].iter().filter(|h| h.out).count() as u32,
            ..LineTick::default()
        };
        if self.hops[0].credit_out {
            self.credits += 1;
        }
        if send {
            if self.credits == 0 {
                return Err("the source sent without a credit".into());
            }
            self.credits -= 1;
        }
        // Router i's input is router i − 1's link register before the edge (the source's flit
        // at router 0); its credit comes from router i + 1's input (the sink's at the last).
        let mut input = send;
        for i in 0..n {
            let credit_in = if i + 1 < n {
                self.hops[i + 1].credit_out
            } else {
                out
            };
            let h = &mut self.hops[i];
            let next_input = h.out;
            let grant = h.queued > 0 && h.credits > 0;
            h.out = grant;
            h.credit_out = grant;
            if grant {
                h.queued -= 1;
                h.credits -= 1;
                tick.reads += 1;
            }
            if credit_in {
                h.credits += 1;
                if h.credits > self.depth {
                    return Err(format!("router {i}: a credit past the depth"));
                }
            }
            if input {
                if h.queued >= self.depth {
                    return Err(format!("router {i}: a flit into a full FIFO"));
                }
                h.queued += 1;
                tick.writes += 1;
            }
            input = next_input;
        }
        Ok(tick)
    }
}

/// `noc2d`'s P path from the QK array to the PV array: a source bank, a sender, a [`Line`] of
/// routers and a receiver (the network interfaces at both ends).
///
/// The PE rows' exp sweeps write a block's weights in lockstep, one word a cycle: word (slot,
/// query row ii, key j) holds each of the R PE rows' weight, in the order ii, j (the slot is
/// the block's parity in its tile, which the path carries). The source bank keeps two blocks,
/// each word with its slot bit, in a ring of its own. The sender reads the oldest word not yet
/// sent (a registered read), cuts it into `flits_per_word` flits of `per_flit` rows' weights
/// (the slot bit at payload bit 0; rows k·g .. k·g + g − 1 in flit k, row k·g + i at payload
/// bits 1 + i·w), and sends one a cycle while the line has a credit; the read of the next word
/// overlaps the last flit. The receiver at the far end writes each flit's weights into its
/// rows' P banks at (the flit's slot, ii, j), counting ii and j itself (one source, one sink:
/// the flits arrive in the order sent), and marks a block's last word (`arrived`).
/// The path assumes the rows' writes never overrun the bank (the sequencer's: a block's
/// softmax starts once the PV of the block two before has issued, and that PV waited for its
/// P to arrive), and checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PathConfig {
    /// The line's routers: flit width, coordinate bits, FIFO depth.
    pub router: RouterConfig,
    pub hops: u32,
    /// PE rows (a word holds one weight of each).
    pub rows: u32,
    /// Bits of a weight.
    pub elem_bits: u32,
    /// Query rows of a PE row (a) and keys of a block (Bc): a block is a·Bc words.
    pub a: u32,
    pub bc: u32,
    /// Bits of the bank address's query-row and key fields (the P bank's layout: slot, ii, j).
    pub ii_bits: u32,
    pub j_bits: u32,
}

impl PathConfig {
    /// Rows' weights in a flit (after its slot bit).
    pub fn per_flit(&self) -> u32 {
        (self.router.payload_bits().saturating_sub(1) / self.elem_bits).min(self.rows)
    }

    /// Flits a word takes.
    pub fn flits_per_word(&self) -> u32 {
        self.rows.div_ceil(self.per_flit())
    }

    pub fn block_words(&self) -> u32 {
        self.a * self.bc
    }

    /// Words the source bank's address space spans (two blocks at the P bank's addresses).
    pub fn bank_depth(&self) -> u32 {
        2 << (self.ii_bits + self.j_bits)
    }

    /// The bank address of the `w`-th word of the two blocks (slot, ii, j).
    pub fn address(&self, w: u32) -> u32 {
        let bw = self.block_words();
        let (slot, rest) = (w / bw, w % bw);
        slot << (self.ii_bits + self.j_bits) | (rest / self.bc) << self.j_bits | (rest % self.bc)
    }

    /// An address's (ii, j) part, without the slot.
    pub fn in_block(&self, addr: u32) -> u32 {
        addr & ((1 << (self.ii_bits + self.j_bits)) - 1)
    }

    /// An address's slot.
    pub fn slot(&self, addr: u32) -> u32 {
        addr >> (self.ii_bits + self.j_bits)
    }
}

/// The P path's state ([`PathConfig`]).
#[derive(Clone, Debug)]
pub struct Path {
    pub cfg: PathConfig,
    /// The source bank's words: the slot bit and each row's weight.
    bank: Vec<(u32, Vec<u32>)>,
    /// The next word the rows write and the next the sender reads (0 .. 2·a·Bc), and the
    /// words written and not yet read.
    written: u32,
    read: u32,
    queued: u32,
    /// The bank's read register holds a word not yet sent, and the flit of it next sent.
    have: bool,
    flit: u32,
    word: (u32, Vec<u32>),
    line: LineTiming,
    flying: std::collections::VecDeque<(u32, Vec<u32>)>,
    /// The receiver's word (0 .. 2·a·Bc) and its flit next to land.
    landed: u32,
    landing: u32,
}

/// The rows' P write in a cycle: `we`, its address and each row's weight.
#[derive(Clone, Copy, Debug)]
pub struct PathIn<'a> {
    pub we: bool,
    pub waddr: u32,
    pub wdata: &'a [u32],
}

/// One cycle of the path: the receiver's write (`we`: the rows written, none without a write,
/// at `waddr`, the flit's weights `wdata`, row k·g + i's at i), whether it ends a block (`arrived`), the
/// sender's flit (`sent`), its wait for a credit (`stalled`: a flit ready and none), the
/// source bank's read, and the line's events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathOut {
    pub we: std::ops::Range<u32>,
    pub waddr: u32,
    pub wdata: Vec<u32>,
    pub arrived: bool,
    pub sent: bool,
    pub stalled: bool,
    pub read: bool,
    pub line: LineTick,
}

impl Path {
    pub fn new(cfg: PathConfig) -> Path {
        assert!(cfg.per_flit() >= 1);
        Path {
            cfg,
            bank: vec![(0, vec![0; cfg.rows as usize]); cfg.bank_depth() as usize],
            written: 0,
            read: 0,
            queued: 0,
            have: false,
            flit: 0,
            word: (0, vec![0; cfg.rows as usize]),
            line: LineTiming::new(cfg.router.depth, cfg.hops),
            flying: Default::default(),
            landed: 0,
            landing: 0,
        }
    }

    /// Nothing written and not yet landed: a cycle without a write changes nothing.
    pub fn idle(&self) -> bool {
        self.queued == 0 && !self.have && self.line.idle()
    }

    fn rows_of(&self, k: u32) -> std::ops::Range<u32> {
        let g = self.cfg.per_flit();
        k * g..((k + 1) * g).min(self.cfg.rows)
    }

    /// One clock edge with the rows' write `w`; Err if the write is out of order or overruns
    /// the bank.
    pub fn step(&mut self, w: PathIn) -> Result<PathOut, String> {
        let cfg = self.cfg;
        let (f, words) = (cfg.flits_per_word(), 2 * cfg.block_words());
        let mut out = PathOut::default();
        // The receiver: the flit the line delivers this cycle.
        if self.line.out() {
            let (slot, data) = self.flying.pop_front().expect("a flit in flight");
            out.we = self.rows_of(self.landing);
            out.waddr = slot << (cfg.ii_bits + cfg.j_bits) | cfg.in_block(cfg.address(self.landed));
            out.wdata = data;
            let last = self.landing == f - 1;
            out.arrived = last && self.landed % cfg.block_words() == cfg.block_words() - 1;
            self.landing = if last { 0 } else { self.landing + 1 };
            if last {
                self.landed = (self.landed + 1) % words;
            }
        }
        // The sender: a flit of the held word if the line has a credit; the next word's read
        // with the held word's last flit, or when none is held.
        let send = self.have && self.line.ready();
        let done = send && self.flit == f - 1;
        let re = (!self.have || done) && self.queued > 0;
        out.sent = send;
        out.stalled = self.have && !send;
        out.read = re;
        if send {
            let rows = self.rows_of(self.flit);
            let data = self.word.1[rows.start as usize..rows.end as usize].to_vec();
            self.flying.push_back((self.word.0, data));
            self.flit = if done { 0 } else { self.flit + 1 };
        }
        if w.we {
            let want = cfg.in_block(cfg.address(self.written));
            if cfg.in_block(w.waddr) != want {
                return Err(format!(
                    "a P write at {:#x} where the path expects query row and key {want:#x} (the \
                     rows' words out of order)",
                    w.waddr,
                ));
            }
            if self.queued == words {
                return Err("a P write into a full source bank".into());
            }
        }
        if re {
            self.word
                .clone_from(&self.bank[cfg.address(self.read) as usize]);
            self.read = (self.read + 1) % words;
        }
        if w.we {
            let at = &mut self.bank[cfg.address(self.written) as usize];
            at.0 = cfg.slot(w.waddr);
            at.1.copy_from_slice(w.wdata);
            self.written = (self.written + 1) % words;
        }
        self.queued = self.queued + w.we as u32 - re as u32;
        self.have = re || (self.have && !done);
        out.line = self.line.step(send)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(depth: u32) -> RouterConfig {
        RouterConfig {
            flit_bits: 40,
            coord_bits: 2,
            depth,
        }
    }

    fn flit(x: u32, y: u32, p: u32) -> Flit {
        Flit {
            x,
            y,
            payload: vec![p, 0],
        }
    }

    /// A line's zero-load latency is two cycles a router, and a FIFO of `depth` places passes
    /// `depth` flits every four cycles (a credit's round trip: spent at the grant, the link
    /// register, the next FIFO's switch, the returned credit's register), so four places run
    /// at a flit a cycle.
    #[test]
    fn a_line_takes_two_cycles_a_router_and_needs_four_places_for_full_rate() {
        for hops in 1..4 {
            let mut line = Line::new(cfg(3), hops);
            let f = flit(hops, 0, 5);
            let mut t = 0;
            line.step(Some(f.clone())).unwrap();
            while line.step(None).unwrap().out.is_none() {
                t += 1;
                assert!(t < 100);
            }
            assert_eq!(t + 1, 2 * (hops + 1), "{hops} hops");
        }
        for (depth, per_100) in [(1, 25), (2, 50), (3, 75), (4, 100), (5, 100)] {
            let mut line = Line::new(cfg(depth), 2);
            let mut got: i32 = 0;
            for c in 0..200 {
                let send = line.ready().then(|| flit(2, 0, c));
                if line.step(send).unwrap().out.is_some() && c >= 100 {
                    got += 1;
                }
            }
            assert!((got - per_100).abs() <= 1, "depth {depth}: {got}");
        }
    }

    /// The timing-only line is the line, cycle by cycle, under every send pattern.
    #[test]
    fn line_timing_is_the_line() {
        let mut rng = crate::patterns::Rng(0x5eed);
        for depth in 1..=5 {
            for hops in 1..=4 {
                for rate in 1..=8u64 {
                    let mut line = Line::new(cfg(depth), hops);
                    let mut lean = LineTiming::new(depth, hops);
                    for c in 0..300 {
                        assert_eq!(line.ready(), lean.ready());
                        let send = line.ready() && rng.next_u64() % 8 < rate;
                        let st = line.step(send.then(|| flit(hops, 0, c))).unwrap();
                        let t = lean.step(send).unwrap();
                        let want = LineTick {
                            out: st.out.is_some(),
                            writes: st.events.writes,
                            reads: st.events.reads,
                            links: st.links,
                        };
                        assert_eq!(t, want, "depth {depth} hops {hops} rate {rate} cycle {c}");
                    }
                }
            }
        }
    }

    /// The P path delivers every row's weight of every word once, at the word's address, in
    /// order, marks each block's last word, and reads each word of the bank once.
    #[test]
    fn the_p_path_delivers_each_block() {
        for (flit_bits, depth, hops) in [(39, 4, 1), (71, 2, 3), (135, 1, 2), (263, 4, 1)] {
            let cfg = PathConfig {
                router: RouterConfig {
                    flit_bits,
                    coord_bits: 3,
                    depth,
                },
                hops,
                rows: 12,
                elem_bits: 16,
                a: 2,
                bc: 6,
                ii_bits: 1,
                j_bits: 3,
            };
            let mut path = Path::new(cfg);
            let (bw, blocks) = (cfg.block_words(), 5);
            let mut next = 0u32;
            let mut got: Vec<Vec<u32>> = vec![];
            let mut row_word = [0u32; 12];
            let mut arrived = vec![];
            for c in 0..20_000u32 {
                // The rows write a block's words in bursts, never more than two blocks ahead
                // of what has landed.
                let ahead = next / bw < (arrived.len() as u32 + 2).min(blocks);
                let we = ahead && c % 7 != 3;
                let data: Vec<u32> = (0..12).map(|r| (next * 16 + r) & 0xffff).collect();
                // Tiles of three blocks: the slot is the block's parity in its tile.
                let slot = next / bw % 3 % 2;
                let waddr = slot << 4 | cfg.in_block(cfg.address(next % bw));
                let o = path
                    .step(PathIn {
                        we,
                        waddr,
                        wdata: &data,
                    })
                    .unwrap();
                if we {
                    next += 1;
                }
                for (r, rw) in row_word.iter_mut().enumerate() {
                    if o.we.contains(&(r as u32)) {
                        let w = *rw;
                        let slot = w / bw % 3 % 2;
                        assert_eq!(o.waddr, slot << 4 | cfg.in_block(cfg.address(w % bw)));
                        let g = cfg.per_flit() as usize;
                        assert_eq!(o.wdata[r % g], w * 16 + r as u32, "row {r} word {w}");
                        if got.len() <= w as usize {
                            got.resize(w as usize + 1, vec![]);
                        }
                        got[w as usize].push(r as u32);
                        *rw += 1;
                    }
                }
                if o.arrived {
                    arrived.push(c);
                    assert!(row_word.iter().all(|&w| w == arrived.len() as u32 * bw));
                }
                if arrived.len() as u32 == blocks {
                    break;
                }
            }
            assert_eq!(arrived.len() as u32, blocks, "{cfg:?}");
            assert!(got.iter().all(|r| r.len() == 12));
            assert!(path.idle());
        }
    }

    /// XY routing: x first, then y, then local.
    #[test]
    fn routes_x_first() {
        assert_eq!(route(1, 1, 3, 0), EAST);
        assert_eq!(route(1, 1, 0, 3), WEST);
        assert_eq!(route(1, 1, 1, 3), NORTH);
        assert_eq!(route(1, 1, 1, 0), SOUTH);
        assert_eq!(route(1, 1, 1, 1), LOCAL);
    }

    /// A flit's bits round-trip.
    #[test]
    fn flit_words_round_trip() {
        let c = cfg(2);
        let f = Flit {
            x: 3,
            y: 1,
            payload: vec![0xDEAD_BEEF, 0x3],
        };
        assert_eq!(Flit::from_words(&f.words(&c), &c), f);
    }

    /// Two cycles a hop; four inputs to one output take turns; a full output waits for its
    /// credits.
    #[test]
    fn grants_round_robin_within_credits() {
        let mut r = Router::new(cfg(2), 1, 1);
        let none: [Option<Flit>; 5] = Default::default();
        let mut input = none.clone();
        for (i, slot) in input.iter_mut().enumerate().skip(1) {
            *slot = Some(flit(1, 1, i as u32));
        }
        r.step(&input, &[false; 5]).unwrap();
        assert!(
            r.out.iter().all(|o| o.is_none()),
            "written, not yet switched"
        );
        let mut got = vec![];
        for _ in 0..4 {
            r.step(&none, &[false; 5]).unwrap();
            got.extend(r.out[LOCAL].as_ref().map(|f| f.payload[0]));
        }
        // Two credits: two flits out, then nothing until credits return.
        assert_eq!(got, vec![1, 2]);
        for _ in 0..4 {
            r.step(&none, &[true, false, false, false, false]).unwrap();
            got.extend(r.out[LOCAL].as_ref().map(|f| f.payload[0]));
        }
        assert_eq!(got, vec![1, 2, 3, 4]);
        // Four flits out, four credits back: one more is past the depth (the sender's fault).
        assert!(r.step(&none, &[true, false, false, false, false]).is_err());
    }
}
