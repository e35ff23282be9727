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
