//! A vertical link's spare lanes, its built-in self-test and its shifted-lane repair: the
//! bit-exact model of `hdl::link`.
//!
//! A bundle of `lanes` logical lanes is split into groups of `group` lanes (the last may be
//! shorter); each group crosses on its lanes plus `spares` spare physical lanes. The test walks a
//! one, then a zero, over each group's physical lanes (all groups at once): in step `t` of
//! `2 (group + spares)`, lane `k = t mod (group + spares)` carries `t < group + spares` and every
//! other lane the opposite. A lane whose receiver ever sees another value than the one sent is
//! failed: stuck at 0 (it misses its walking one), stuck at 1 (its walking zero), or open (a
//! resistive open whose receiver lags a cycle behind: it misses the edges of its own pattern).
//!
//! The repair is shifted-lane redundancy, as in Kang et al., "8 Gb 3-D DDR3 DRAM using
//! through-silicon-via technology", IEEE JSSC 45(1), 2010 (each signal shifts to its neighbour
//! past a failed TSV), and as HBM's lane remapping (JESD235) steers a lane onto a spare: within a
//! group, logical lane `i` crosses on the `i`-th good physical lane. Each good lane then carries
//! the logical lane `j − c(j)`, where `c(j)` is the number of failed lanes below it, so every
//! lane shifts by at most `spares`. A group with more failed lanes than spares cannot be
//! repaired.

/// A bundle's shape: logical lanes, lanes per group, spare lanes per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    pub lanes: u32,
    pub group: u32,
    pub spares: u32,
}

/// How a physical lane fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaneFault {
    /// The receiver always sees 0.
    StuckAt0,
    /// The receiver always sees 1.
    StuckAt1,
    /// A resistive open: the receiver sees the lane's value a cycle late.
    Open,
}

impl LaneFault {
    pub const ALL: [LaneFault; 3] = [LaneFault::StuckAt0, LaneFault::StuckAt1, LaneFault::Open];

    /// Its code on the fault-injection port (0: no fault).
    pub fn code(self) -> u64 {
        match self {
            LaneFault::StuckAt0 => 1,
            LaneFault::StuckAt1 => 2,
            LaneFault::Open => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LaneFault::StuckAt0 => "stuck-at-0",
            LaneFault::StuckAt1 => "stuck-at-1",
            LaneFault::Open => "open",
        }
    }
}

impl Geometry {
    /// Groups of the bundle.
    pub fn groups(&self) -> u32 {
        self.lanes.div_ceil(self.group)
    }

    /// Logical lanes of group `g`.
    pub fn group_lanes(&self, g: u32) -> u32 {
        (self.lanes - g * self.group).min(self.group)
    }

    /// Physical lanes of the bundle (every group's lanes and spares).
    pub fn physical(&self) -> u32 {
        self.lanes + self.groups() * self.spares
    }

    /// The first physical lane of group `g`.
    pub fn group_base(&self, g: u32) -> u32 {
        g * (self.group + self.spares)
    }

    /// Physical lanes a test step walks over (a full group's).
    pub fn width(&self) -> u32 {
        self.group + self.spares
    }

    /// Steps of the test: a walking one and a walking zero over a group's physical lanes.
    pub fn test_steps(&self) -> u32 {
        2 * self.width()
    }

    /// Cycles of a test over links of `latency` register stages: a cycle to clear the failed
    /// lanes, the steps, `latency` cycles for the last step to arrive, a cycle to load the
    /// repair map.
    pub fn test_cycles(&self, latency: u32) -> u32 {
        1 + self.test_steps() + latency + 1
    }

    /// The value physical lane `p` carries in test step `t`.
    pub fn pattern(&self, t: u32, p: u32) -> bool {
        let w = self.width();
        let k = t % w;
        let ones = t < w;
        ((p % w) == k) == ones
    }

    /// The physical lanes (bundle indices) of group `g`.
    fn group_lanes_physical(&self, g: u32) -> std::ops::Range<u32> {
        let base = self.group_base(g);
        base..base + self.group_lanes(g) + self.spares
    }
}

/// The repair a test's failed lanes give: per physical lane the logical lane it carries, per
/// logical lane the physical lane it is read from; `bad`: some group has more failed lanes
/// than spares (then the maps are those of the lanes it could place, and must not be used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    pub tx: Vec<Option<u32>>,
    pub rx: Vec<u32>,
    pub bad: bool,
}

impl Repair {
    /// The repair of `failed` (one flag per physical lane).
    pub fn of(g: &Geometry, failed: &[bool]) -> Repair {
        assert_eq!(
            failed.len(),
            g.physical() as usize,
            "one flag a physical lane"
        );
        let mut tx = vec![None; g.physical() as usize];
        let mut rx = vec![0; g.lanes as usize];
        let mut bad = false;
        for grp in 0..g.groups() {
            let lanes = g.group_lanes(grp);
            let first_logical = grp * g.group;
            let good: Vec<u32> = g
                .group_lanes_physical(grp)
                .filter(|&p| !failed[p as usize])
                .collect();
            bad |= (good.len() as u32) < lanes;
            for (i, &p) in good.iter().take(lanes as usize).enumerate() {
                tx[p as usize] = Some(first_logical + i as u32);
                rx[(first_logical + i as u32) as usize] = p;
            }
        }
        Repair { tx, rx, bad }
    }

    /// No lane failed: every logical lane on its own physical lane.
    pub fn identity(g: &Geometry) -> Repair {
        Repair::of(g, &vec![false; g.physical() as usize])
    }
}

/// A bundle's physical lanes with faults on some: what the receivers see, cycle by cycle.
#[derive(Clone, Debug)]
pub struct Lanes {
    faults: Vec<Option<LaneFault>>,
    last: Vec<bool>,
}

impl Lanes {
    /// `faults`: (physical lane, fault).
    pub fn new(g: &Geometry, faults: &[(u32, LaneFault)]) -> Lanes {
        let mut f = vec![None; g.physical() as usize];
        for &(p, k) in faults {
            f[p as usize] = Some(k);
        }
        Lanes {
            faults: f,
            last: vec![false; g.physical() as usize],
        }
    }

    /// One cycle: the receivers' values for the driven values `sent`.
    pub fn cross(&mut self, sent: &[bool]) -> Vec<bool> {
        let got = sent
            .iter()
            .zip(&self.faults)
            .zip(&self.last)
            .map(|((&s, f), &l)| match f {
                None => s,
                Some(LaneFault::StuckAt0) => false,
                Some(LaneFault::StuckAt1) => true,
                Some(LaneFault::Open) => l,
            })
            .collect();
        self.last = sent.to_vec();
        got
    }
}

/// The test over `lanes`: the failed flag of each physical lane. The lanes carried `before` in
/// the cycle before the test (an open lane's receiver still shows it in the first step).
pub fn self_test(g: &Geometry, lanes: &mut Lanes, before: &[bool]) -> Vec<bool> {
    lanes.cross(before);
    let mut failed = vec![false; g.physical() as usize];
    for t in 0..g.test_steps() {
        let sent: Vec<bool> = (0..g.physical()).map(|p| g.pattern(t, p)).collect();
        for (p, (s, r)) in sent.iter().zip(lanes.cross(&sent)).enumerate() {
            failed[p] |= *s != r;
        }
    }
    failed
}

/// Logical lanes `data` sent through `lanes` under `repair`: what the receiver's logical lanes
/// hold (a lane the transmitter sends nothing on carries 0).
pub fn send(repair: &Repair, lanes: &mut Lanes, data: &[bool]) -> Vec<bool> {
    let sent: Vec<bool> = repair
        .tx
        .iter()
        .map(|l| l.is_some_and(|l| data[l as usize]))
        .collect();
    let got = lanes.cross(&sent);
    repair.rx.iter().map(|&p| got[p as usize]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Geometry = Geometry {
        lanes: 21,
        group: 8,
        spares: 2,
    };

    fn run(faults: &[(u32, LaneFault)], data: &[Vec<bool>]) -> (Repair, Vec<Vec<bool>>) {
        let mut lanes = Lanes::new(&G, faults);
        let failed = self_test(&G, &mut lanes, &vec![true; G.physical() as usize]);
        let repair = Repair::of(&G, &failed);
        let out = data.iter().map(|d| send(&repair, &mut lanes, d)).collect();
        (repair, out)
    }

    fn words(n: usize) -> Vec<Vec<bool>> {
        (0..n)
            .map(|k| {
                (0..G.lanes as usize)
                    .map(|i| (k * 7 + i * 3) % 5 < 2)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn geometry_counts_groups_and_spares() {
        assert_eq!(G.groups(), 3);
        assert_eq!(G.group_lanes(2), 5);
        assert_eq!(G.physical(), 27);
        assert_eq!(G.test_steps(), 20);
        assert_eq!(G.group_base(2), 20);
    }

    #[test]
    fn the_test_finds_every_kind_of_fault_and_nothing_else() {
        for kind in LaneFault::ALL {
            for p in 0..G.physical() {
                let mut lanes = Lanes::new(&G, &[(p, kind)]);
                // Before the test the lanes carried the opposite of what would hide an open.
                let failed = self_test(&G, &mut lanes, &vec![false; G.physical() as usize]);
                let hits: Vec<usize> = (0..failed.len()).filter(|&i| failed[i]).collect();
                assert_eq!(hits, vec![p as usize], "{kind:?} on lane {p}");
            }
        }
    }

    #[test]
    fn up_to_spares_faults_a_group_are_repaired() {
        let data = words(12);
        // Two faults in each group, of every kind, at its ends and in the middle.
        let faults = [
            (0, LaneFault::StuckAt0),
            (9, LaneFault::Open),
            (14, LaneFault::StuckAt1),
            (15, LaneFault::StuckAt0),
            (20, LaneFault::Open),
            (26, LaneFault::StuckAt1),
        ];
        let (repair, out) = run(&faults, &data);
        assert!(!repair.bad);
        assert_eq!(out, data);
        // Each lane moves by at most the spares.
        for (i, &p) in repair.rx.iter().enumerate() {
            let grp = i as u32 / G.group;
            let shift = p - G.group_base(grp) - (i as u32 - grp * G.group);
            assert!(shift <= G.spares, "lane {i} on {p}");
        }
    }

    #[test]
    fn one_fault_past_the_spares_is_reported() {
        let faults = [
            (1, LaneFault::StuckAt0),
            (3, LaneFault::StuckAt1),
            (5, LaneFault::Open),
        ];
        let (repair, _) = run(&faults, &words(1));
        assert!(repair.bad);
        // Three in different groups are not.
        let spread = [
            (1, LaneFault::StuckAt0),
            (13, LaneFault::StuckAt1),
            (25, LaneFault::Open),
        ];
        let (repair, out) = run(&spread, &words(4));
        assert!(!repair.bad);
        assert_eq!(out, words(4));
    }

    #[test]
    fn without_repair_a_fault_corrupts_the_lane_it_hits() {
        let mut lanes = Lanes::new(&G, &[(3, LaneFault::StuckAt0)]);
        let ones = vec![true; G.lanes as usize];
        let got = send(&Repair::identity(&G), &mut lanes, &ones);
        let wrong: Vec<usize> = (0..got.len()).filter(|&i| !got[i]).collect();
        assert_eq!(wrong, vec![3]);
    }
}
