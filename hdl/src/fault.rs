//! Deliberate defects for fault-injection tests: each breaks one rule of the core that a
//! named RTL assertion, or only the end-to-end comparison, must catch. They prove that the
//! checks can fail. A fault is never a configuration key, nor part of a core's parameters:
//! `CoreParams::for_fault_injection` builds the core for fault injection, and the testbench
//! selects the fault at run time (`MemoryTiming::core_fault` in `regflash`). Every fault that can
//! act in that core is in the hardware, behind a one-bit condition "this fault is selected"
//! decoded from the input [`SELECT`] (5 bits; 0, no fault, is the real core's behaviour; fault
//! `f` is `f.code()`). The input is threaded from the core's top to each module that holds a
//! fault's logic, and each such module, and each module on the way, carries `_faults` in its
//! name, so such a core is never mistaken for, or cached as, the real one. One model of a
//! configuration then serves every fault: the testbench sets [`SELECT`] before reset.

/// The fault-injection select input (see the module documentation).
pub const SELECT: &str = "fault_sel";
/// Its width: 0 and the sixteen faults' codes.
pub const SELECT_BITS: u32 = 5;

/// One deliberate defect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// QK phases never start, so the landed K block is never consumed: `k_block_consumed`.
    StallQk,
    /// PV phases never start: `v_block_consumed`.
    StallPv,
    /// O is written one row past the tile's region: `writes_only_o`.
    WriteOutsideO,
    /// Q is released at `start`, before any Q tile landed: `q_release_held`.
    ReleaseQUnheld,
    /// K is released at `start`, before any K block landed: `k_release_held`.
    ReleaseKUnheld,
    /// V is released at `start`, before any V block landed: `v_release_held`.
    ReleaseVUnheld,
    /// The sequencer counts QK phases two at a time, so the next QK phase starts expecting a
    /// block the K channel does not hold: `k_block_in_order`.
    SkipK,
    /// The same for PV phases and V: `v_block_in_order`.
    SkipV,
    /// The causal diagonal off by one (each query also sees the next key): no assertion can
    /// tell, only the comparison of O with the model and the reference.
    CausalOffByOne,
    /// The rescale shift of O one place too large: only the comparison catches it.
    WrongRescale,
    /// buf2d with a single-port P bank: the sequencer lets PV steps read P while the softmax
    /// writes it, so a read and a write meet on the one port: `p_one_access`.
    SharedPortClash,
    /// reg3d with three tiers: the softmax tier keeps one S block instead of two, so the S
    /// links overwrite the scores the softmax of the previous block still reads: only the
    /// comparison catches it.
    SharedSTierSlot,
    /// The AXI4 master raises WLAST one beat before a write burst's last: `axi_wlast`.
    EarlyWlast,
    /// The GLB never reports a hit, so K and V come from memory every tile although it holds
    /// them: O stays right, only `kv_fetched_once` (and the counters) can tell.
    GlbNoHit,
    /// The GLB ignores its tag, so the next head's K and V hit the previous head's beats:
    /// `glb_hit_landed`.
    GlbStaleTag,
    /// Integer QKᵀ: the row engines read the other S slot's C' (the scales of another block):
    /// only the comparison catches it.
    StaleScale,
}

impl Fault {
    pub const ALL: [Fault; 16] = [
        Fault::StallQk,
        Fault::StallPv,
        Fault::WriteOutsideO,
        Fault::ReleaseQUnheld,
        Fault::ReleaseKUnheld,
        Fault::ReleaseVUnheld,
        Fault::SkipK,
        Fault::SkipV,
        Fault::CausalOffByOne,
        Fault::WrongRescale,
        Fault::SharedPortClash,
        Fault::SharedSTierSlot,
        Fault::EarlyWlast,
        Fault::GlbNoHit,
        Fault::GlbStaleTag,
        Fault::StaleScale,
    ];

    /// The value of [`SELECT`] that selects this fault (never 0: 0 selects none).
    pub fn code(self) -> u64 {
        Fault::ALL
            .iter()
            .position(|&f| f == self)
            .expect("every fault is in ALL") as u64
            + 1
    }

    /// The snake_case name (`regflash sim --fault`).
    pub fn name(self) -> &'static str {
        match self {
            Fault::StallQk => "stall_qk",
            Fault::StallPv => "stall_pv",
            Fault::WriteOutsideO => "write_outside_o",
            Fault::ReleaseQUnheld => "release_q_unheld",
            Fault::ReleaseKUnheld => "release_k_unheld",
            Fault::ReleaseVUnheld => "release_v_unheld",
            Fault::SkipK => "skip_k",
            Fault::SkipV => "skip_v",
            Fault::CausalOffByOne => "causal_off_by_one",
            Fault::WrongRescale => "wrong_rescale",
            Fault::SharedPortClash => "shared_port_clash",
            Fault::SharedSTierSlot => "shared_s_tier_slot",
            Fault::EarlyWlast => "early_wlast",
            Fault::GlbNoHit => "glb_no_hit",
            Fault::GlbStaleTag => "glb_stale_tag",
            Fault::StaleScale => "stale_scale",
        }
    }

    /// The fault called `name`.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The assertion that must fire first, or None for faults only the comparison sees.
    pub fn assertion(self) -> Option<&'static str> {
        match self {
            Fault::StallQk => Some("k_block_consumed"),
            Fault::StallPv => Some("v_block_consumed"),
            Fault::WriteOutsideO => Some("writes_only_o"),
            Fault::ReleaseQUnheld => Some("q_release_held"),
            Fault::ReleaseKUnheld => Some("k_release_held"),
            Fault::ReleaseVUnheld => Some("v_release_held"),
            Fault::SkipK => Some("k_block_in_order"),
            Fault::SkipV => Some("v_block_in_order"),
            Fault::SharedPortClash => Some("p_one_access"),
            Fault::EarlyWlast => Some("axi_wlast"),
            Fault::GlbNoHit => Some("kv_fetched_once"),
            Fault::GlbStaleTag => Some("glb_hit_landed"),
            Fault::CausalOffByOne
            | Fault::WrongRescale
            | Fault::SharedSTierSlot
            | Fault::StaleScale => None,
        }
    }
}
