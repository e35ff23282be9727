//! `pe`: a processing element: the MAC plus a local register file.
//!
//! The register file is one word of flip-flops per register, each behind its own clock gate
//! (`crate::clock_gate`), opened only in the cycle the write-back writes that word: an idle
//! or accumulating PE clocks one word a cycle at most, not all of them.
//!
//! Ports:
//! * `a`, `b` (binary16, or bfloat16 with `in_format = "bf16"`): the operands (in the array, `a` is broadcast along the PE's row and
//!   `b` down its column);
//! * `op` (3 bits, [`PeOp`]; 4 bits in a PE with integer QKᵀ) and `en`: what to do this cycle (`en` low turns it into a NOP: the
//!   array masks PEs with it);
//! * `addr`: the register the operation accumulates into or loads;
//! * `ld_data` (32 bits): the value a `Load` writes;
//! * `shift` (8 bits): the rescale a `MacScale` applies to the accumulator (2^−shift, exact
//!   unless subnormal, see `fp32_scale2`);
//! * `rd_addr` → `rd_data` (32 bits): an asynchronous read port;
//! * `rf_acc_read`, `rf_write` (1 bit each): the register file's accumulator port read
//!   `rf[addr]` for a live `Mac` or `MacScale` (`MacClear`, `MacZero` and `Load` overwrite the
//!   register without reading it), reported a cycle after issue from the op's first pipeline
//!   register (at issue with a combinational MAC), so the array's mask, which decides `en`,
//!   does not run on into the count; and its write port wrote (the write-back of a live
//!   operation issued L cycles earlier). They feed the energy counters; the `rd_addr` port's
//!   reads are counted by whoever uses its data.
//!
//! Every operation writes its result back `L + 1` clock edges after its issue, where L is the
//! MAC latency; the module's latency (issue to visible on `rd_data`) is therefore L + 1, and
//! one operation is accepted every cycle. With a multiplier of one stage or none, it reads
//! `rf[addr]` at issue. With a multiplier of M ≥ 2 stages it reads it M − 2 cycles after issue
//! ([`PeConfig::read_delay`]), registers the read, prepares the accumulator (scaled, or replaced
//! by ±0) in the next cycle, and the MAC takes it with the product ([`PeConfig::acc_stage`]
//! = M): neither the register file's read multiplexer nor the scaling is in series with the
//! other or with the adder, and the multiplier is outside the accumulation's loop. An
//! operation that accumulates into a register must be issued at least
//! [`PeConfig::reuse_gap`] cycles after the previous operation that writes the same register
//! (L + 1 less the read's delay: add_latency + 3 with M ≥ 2; there is no forwarding): the
//! array's schedule rotates through several accumulators to meet this.
//!
//! Numerics (model: `kernels::pe::PeModel`): `Mac` is `kernels::fp::mac(rf[addr], a, b)`
//! (`mac_fused` for bfloat16 operands);
//! `MacClear` starts from −0 (the S accumulators: exactly the product); `MacZero` from +0 (the O
//! accumulators, which start at +0); `MacScale` from `fp32_scale2(rf[addr], shift)`; `Load`
//! writes `ld_data` unchanged.
//!
//! Accumulation in the MAC's pipeline (`mac.feedback`): operation 6, `MacFeed`, adds
//! its product to the result of the operation issued the cycle before, taken from the MAC's
//! adder loop ([`crate::array::mac`]) instead of the register file, and that operation's write-back
//! is dropped: a run (`MacClear`/`MacZero`/`MacScale`/`Mac`, then `MacFeed` every cycle)
//! reads the register file at most once and writes it once, when the run ends. A masked
//! `MacFeed` (`en` low) passes the run's value on unchanged (the MAC adds −0), and the run's
//! last operation writes if any of the run's operations was live. The schedule's contract: a
//! `MacFeed` follows, the cycle before, an operation of the same run (same `addr`, a MAC
//! kind, not a `Load`), and a live `MacFeed` belongs to a run with a live operation before it;
//! `rd_data` shows a run's register as it was before the run until the run's write-back.
//!
//! Integer QKᵀ (`qk`: INT8 or INT4): `a` and `b` then also carry packed integers
//! (two INT8 or four INT4 lanes per 16 bits) and three more operations accumulate their dot
//! product in int32 through `int_dot` (model: `kernels::quant::dot_packed`): `IntClear` from 0,
//! `IntMac` onto `rf[addr]`, `IntLast` onto `rf[addr]` and converted to binary32 (the score's
//! last step, so S leaves the PE as the floating-point designs' S does). They share the write-back
//! pipeline: the integer result waits out the MAC's latency.

use anyhow::{ensure, Result};

use kernels::quant::QkFormat;

use crate::array::int_dot::{IntDotIn, IntDotOut};
use crate::array::mac::{self, MacConfig};
use crate::array::mac::{MacIn, MacRun};
use crate::interface;
use crate::ir::iface::Block;
use crate::{addr_bits, mux, Design, ModRef, ModuleBuilder, Sig};
use crate::{clock_gate, fp::misc};

interface! {
    /// The PE's inputs: operands, operation, enable, register address, load data, rescale
    /// shift, read address.
    pub struct PeIn { a, b, op, en, addr, ld_data, shift, rd_addr }
}

interface! {
    /// The PE's outputs: the read port and its register-file accesses this cycle.
    pub struct PeOut { rd_data, rf_acc_read, rf_write }
}

/// The PE's operations (the `op` port; 7, and 6 without feedback, are NOPs too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PeOp {
    /// Nothing is written.
    Nop = 0,
    /// `rf[addr] = rf[addr] + a × b`.
    Mac = 1,
    /// `rf[addr] = −0 + a × b`: starts a new accumulation.
    MacClear = 2,
    /// `rf[addr] = ld_data`.
    Load = 3,
    /// `rf[addr] = +0 + a × b`.
    MacZero = 4,
    /// `rf[addr] = rf[addr] · 2^−shift + a × b`.
    MacScale = 5,
    /// `rf[addr] = y + a × b`, y the previous cycle's result (a PE with feedback; else a
    /// NOP).
    MacFeed = 6,
    /// Integer QKᵀ: `rf[addr] = 0 + Σ a_i × b_i` (int32).
    IntClear = 8,
    /// `rf[addr] = rf[addr] + Σ a_i × b_i` (int32).
    IntMac = 9,
    /// `rf[addr] = binary32(rf[addr] + Σ a_i × b_i)`.
    IntLast = 10,
    /// The first of integer QKᵀ's two scale steps (the row engine takes the scales' low
    /// halves from the buses); a NOP to the PE.
    ScaleLo = 11,
    /// The second (the high halves); a NOP to the PE.
    ScaleHi = 12,
}

/// Where a MAC run accumulates (`accumulate` in a configuration file).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Accumulate {
    /// The MAC's pipeline wherever the design can
    /// (`CoreConfig::pipeline_accumulation_blocker`), else the register file.
    #[default]
    Auto,
    /// The MAC's adder loop (`MacFeed`): the register file is read and written once a run.
    Pipeline,
    /// The register file, read and written by every MAC.
    RegisterFile,
}

impl Accumulate {
    pub const ALL: [Accumulate; 3] = [
        Accumulate::Auto,
        Accumulate::Pipeline,
        Accumulate::RegisterFile,
    ];

    /// The choice a key names (`accumulate = "..."`, `--accumulate`).
    pub fn from_key(key: &str) -> Result<Accumulate> {
        Self::ALL
            .into_iter()
            .find(|a| a.name() == key)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "accumulate = \"{key}\" is not a choice: use auto (the MAC's pipeline where \
                     the design can), pipeline or register-file"
                )
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Accumulate::Auto => "auto",
            Accumulate::Pipeline => "pipeline",
            Accumulate::RegisterFile => "register-file",
        }
    }
}

/// Width of the `op` port (floating-point PEs; [`PeConfig::op_bits`]).
pub const OP_BITS: u32 = 3;

/// Configuration of a PE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeConfig {
    /// Registers in the local register file (32 bits each); a power of two from 2 to 1024.
    pub regs: u32,
    pub mac: MacConfig,
    /// Integer QKᵀ: the packed operands' format (the `Int*` operations), if any.
    pub qk: Option<QkFormat>,
}

impl Default for PeConfig {
    fn default() -> Self {
        PeConfig {
            regs: 64,
            mac: MacConfig::default(),
            qk: None,
        }
    }
}

impl PeConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.regs.is_power_of_two() && (2..=1024).contains(&self.regs),
            "registers per PE = {} is not supported: use a power of two from 2 to 1024 \
             (the seed design has 64)",
            self.regs
        );
        if let Some(why) = self.mac.feedback.then(|| self.feedback_blocker()).flatten() {
            anyhow::bail!("{why}");
        }
        self.mac.validate()
    }

    /// Why the PE cannot accumulate in its MAC's pipeline, if it cannot: the MAC's own reason
    /// ([`MacConfig::feedback_blocker`]), or integer QKᵀ, whose int32 sums stay in the
    /// register file.
    pub fn feedback_blocker(&self) -> Option<String> {
        self.mac.feedback_blocker().or_else(|| {
            self.qk.map(|f| {
                format!(
                    "qk_format = \"{}\" accumulates QKᵀ in int32 in the register file",
                    f.name()
                )
            })
        })
    }

    /// Width of `op`: 3, or 4 with integer QKᵀ (its operations are 8 to 10).
    pub fn op_bits(&self) -> u32 {
        OP_BITS + self.qk.is_some() as u32
    }

    /// Width of `addr` and `rd_addr`.
    pub fn addr_width(&self) -> u32 {
        addr_bits(self.regs)
    }

    /// Issue-to-visible latency: MAC latency + 1 (the write-back edge).
    pub fn latency(&self) -> u32 {
        self.mac.latency() + 1
    }

    /// Cycles after issue that the MAC takes the accumulator: with a multiplier of latency 2
    /// or more, when the product arrives (the multiplier's latency): the register file is read
    /// [`PeConfig::read_delay`] cycles after issue, the read (and the scaling's subtracts)
    /// registered, then the scaling's shift and rounding registered, each in a cycle of its
    /// own; with a shallower multiplier the MAC takes it at issue (and registers it beside the
    /// product, at latency 1).
    pub fn acc_stage(&self) -> u32 {
        if self.mac.mul.latency >= 2 {
            self.mac.mul.latency
        } else {
            0
        }
    }

    /// Cycles after issue that the accumulator is read: the multiplier's stages beyond the two
    /// the read and the scaling take, so that the read is out of the accumulation's loop.
    pub fn read_delay(&self) -> u32 {
        self.acc_stage().saturating_sub(2)
    }

    /// The fewest cycles between two operations on one register: the second reads it
    /// [`PeConfig::read_delay`] cycles after its issue, once the first has written it back
    /// ([`PeConfig::latency`] cycles after its own): add_latency + 3 with a multiplier of two
    /// stages or more, whatever the multiplier's depth.
    pub fn reuse_gap(&self) -> u32 {
        self.latency() - self.read_delay()
    }

    /// The MAC the PE instantiates: its accumulator [`PeConfig::acc_stage`] cycles late.
    pub fn staged_mac(&self) -> MacConfig {
        MacConfig {
            acc_stage: self.acc_stage(),
            ..self.mac
        }
    }

    pub fn module_name(&self) -> String {
        self.params_name()
    }

    /// The parameters in a name (`pe_r64_m1_a1`; `pe_e8m7_r64_m1_a1` for bfloat16 operands,
    /// `pe_r64_m1_a1_qi8` with INT8 QKᵀ, `pe_r64_m1_a1_f` with feedback): part of the names of
    /// modules built from it.
    pub fn params_name(&self) -> String {
        format!(
            "pe{}_r{}_m{}_a{}{}",
            crate::format::suffix(self.mac.mul.operand),
            self.regs,
            self.mac.mul.latency,
            self.mac.add.latency,
            self.qk
                .map_or(String::new(), |f| format!("_qi{}", f.bits()))
                + if self.mac.feedback { "_f" } else { "" }
        )
    }
}

/// The PE module's doc: its operations and latency.
fn doc(cfg: &PeConfig) -> String {
    format!(
        "pe: MAC + {} x {}-bit register file. op (when en): 0 nop, 1 mac (rf[addr] += a*b),\n\
         2 mac_clear (rf[addr] = -0 + a*b), 3 load (rf[addr] = ld_data), 4 mac_zero\n\
         (rf[addr] = +0 + a*b), 5 mac_scale (rf[addr] = rf[addr] * 2^-shift + a*b).\n\
         Latency {} cycle(s) from issue to rd_data; one op per cycle; no forwarding: an op\n\
         reading a register must issue >= {} cycles after the previous write to it.{}{}",
        cfg.regs,
        cfg.mac.formats().acc.bits(),
        cfg.latency(),
        cfg.reuse_gap(),
        if cfg.mac.feedback {
            "\n6 mac_feed (rf[addr] = y + a*b, y the previous cycle's result, which is not \
             written;\nmasked: y passes on; a run writes once, at its end)."
        } else {
            ""
        },
        cfg.qk.map_or(String::new(), |f| format!(
            "\nInteger QK ({}, {} lanes per operand): 8 int_clear (rf[addr] = 0 + dot(a,b)),\n\
             9 int_mac (rf[addr] += dot(a,b)), 10 int_last (rf[addr] = fp32(rf[addr] +\n\
             dot(a,b))); int32 accumulation, same latency.",
            f.name(),
            f.lanes()
        ))
    )
}

/// The operation at issue and at each pipeline stage to the write-back (masked operations
/// and unused codes become Nop after the first register), and `en` registered beside it
/// (None for a combinational MAC, which masks at issue).
fn operations(
    m: &mut ModuleBuilder,
    cfg: &PeConfig,
    op_in: Sig,
    en: Sig,
) -> (Vec<Sig>, Option<Sig>) {
    let ob = cfg.op_bits();
    // A masked PE, or an unused code, does nothing.
    let last_op = if cfg.qk.is_some() {
        PeOp::IntLast
    } else if cfg.mac.feedback {
        PeOp::MacFeed
    } else {
        PeOp::MacScale
    };
    let last_op = m.lit(ob, last_op as u64);
    let fp_gap = (cfg.qk.is_some()).then(|| {
        // 6 and 7 are NOPs between the floating-point and the integer operations.
        let six = m.lit(ob, 6);
        let eight = m.lit(ob, PeOp::IntClear as u64);
        op_in.ge(six) & op_in.lt(eight)
    });
    let valid = op_in.le(last_op);
    let valid = match fp_gap {
        Some(g) => valid & !g,
        None => valid,
    };
    let nop = m.lit(ob, PeOp::Nop as u64);
    let latency = cfg.mac.latency();
    // The operation travels to the write-back; its taps serve the read's stages. `en` (the
    // array's mask, late in the cycle) is registered beside the operation and applied
    // after the first pipeline register: a masked operation's read and products run, but
    // nothing it does is written or counted. A combinational MAC (no register) masks it
    // at issue.
    if latency == 0 {
        let op = mux(en & valid, op_in, nop);
        (vec![m.name("op_eff", op)], None)
    } else {
        let op = m.name("op_eff", mux(valid, op_in, nop));
        let op1 = m.delay("op_d1", op);
        let en1 = m.delay("en_d1", en);
        let op1 = m.name("op_d1_live", mux(en1, op1, nop));
        let mut taps = vec![op];
        taps.extend(m.delays("op1", op1, latency - 1));
        (taps, Some(en1))
    }
}

/// Whether the operation reads its accumulator from the register file (the count energy
/// prices), from the stages `ops`.
fn counted_read(cfg: &PeConfig, ops: &[Sig]) -> Sig {
    let latency = cfg.mac.latency();
    // Reported a cycle after issue, from the op's first pipeline register (at issue with a
    // combinational MAC, which has none): the count is energy's, and the array's mask,
    // which decides `en`, does not run on into it.
    let op1 = ops[latency.min(1) as usize];
    let is_mac = op1.eq(PeOp::Mac as u64);
    let acc_read = is_mac | op1.eq(PeOp::MacScale as u64);
    if cfg.qk.is_some() {
        let int_acc = op1.eq(PeOp::IntMac as u64) | op1.eq(PeOp::IntLast as u64);
        acc_read | int_acc
    } else {
        acc_read
    }
}

/// Integer QK: the dot product of `a` and `b` onto the read accumulator (from 0 for
/// `IntClear`; `IntLast` converts), at the read's stage `taken` (the operands wait with it),
/// delayed to the MAC's `latency`.
fn int_path(
    m: &mut ModuleBuilder,
    unit: &Block<IntDotIn, IntDotOut<u32>>,
    (a, b): (Sig, Sig),
    (op_rd, acc_rd): (Sig, Sig),
    (taken, latency): (u32, u32),
) -> Sig {
    let int_clear = op_rd.eq(PeOp::IntClear as u64);
    let int_last = op_rd.eq(PeOp::IntLast as u64);
    // int32 zero: the bits of +0.
    let pos_zero = m.zero(32);
    let acc = mux(int_clear, pos_zero, acc_rd);
    let (a, b) = (m.delay_n("int_a", a, taken), m.delay_n("int_b", b, taken));
    let ins = IntDotIn {
        a,
        b,
        acc,
        last: int_last,
    };
    let y = m.instantiate(unit, "u_int", &ins).y;
    m.delay_n("int_y", y, latency - taken)
}

/// Defines the PE (and the blocks it uses) in `d`.
pub fn build(d: &mut Design, cfg: &PeConfig) -> ModRef {
    let mac = mac::build(d, &cfg.staged_mac());
    let int_dot = cfg.qk.map(|f| crate::array::int_dot::build(d, f));
    let gate = clock_gate::build(d);
    d.define(&cfg.module_name(), |_, m| {
        m.doc(&doc(cfg));
        let aw = cfg.addr_width();
        let f = cfg.mac.formats();
        let a = m.input("a", f.operand.bits());
        let b = m.input("b", f.operand.bits());
        let ob = cfg.op_bits();
        let op_in = m.input("op", ob);
        let en = m.input("en", 1);
        let addr = m.input("addr", aw);
        let ld_data = m.input("ld_data", f.acc.bits());
        let shift = m.input("shift", 8);
        let rd_addr = m.input("rd_addr", aw);

        let nop = m.lit(ob, PeOp::Nop as u64);
        let latency = cfg.mac.latency();
        let (ops, en1) = operations(m, cfg, op_in, en);
        // Accumulation in the MAC's loop: whether each stage holds a MacFeed, masked or not
        // (the taps above drop masked operations), from issue to the write-back.
        let feed = match (cfg.mac.feedback, en1) {
            (true, Some(en1)) => {
                let feed = ops[0].eq(PeOp::MacFeed as u64);
                let taps = m.delays("feed", feed, latency);
                // A masked MacFeed adds −0: `en` met at the product's stage.
                let en_mul = m.delay_n("en_mul", en1, cfg.mac.mul.latency - 1);
                let hold = taps[cfg.mac.mul.latency as usize] & !en_mul;
                Some((taps, hold))
            }
            _ => None,
        };
        let staged = cfg.acc_stage() > 0;
        // The read waits out the multiplier's stages beyond the read's and the scaling's own;
        // its registered value is taken `taken` cycles after issue.
        let rd = cfg.read_delay();
        let taken = rd + staged as u32;
        let acc_addr = m.delay_n("acc_addr", addr, rd);
        let acc_shift = m.delay_n("acc_shift", shift, rd);
        // The register file: each word its own flip-flops behind a clock gate that opens
        // only when the write-back writes that word (`clock_gate`), so a cycle costs the
        // clock of one word at most, not of every register. Written below, read here.
        let wb_addr = m.net("wb_addr", aw);
        let wb_en = m.net("wb_en", 1);
        let wb_data = m.net("wb_data", f.acc.bits());
        let rf = clock_gate::gated_memory(
            m,
            &gate,
            "rf",
            (cfg.regs, f.acc.bits()),
            (wb_en, wb_addr, wb_data),
        );
        let acc_old = m.mem_read(rf, acc_addr);
        let acc_old = m.name("acc_old", acc_old);
        // The scaling's subtracts run in the read's cycle; when the MAC takes the accumulator
        // late, the read (also the integer path's) and the scaling's parts are registered
        // together, and the rest of the scaling and the ±0 selection take the next cycle.
        // Operand isolation: with the accumulator read at issue (no register after the read),
        // the rescale's logic (its subtracts and its 26-place shifter) sees the read only for a
        // MacScale and +0 otherwise, so it does not toggle with every accumulation; its result
        // is only taken for a MacScale. (A staged read keeps the value for its register.)
        let scale_src = if staged {
            acc_old
        } else {
            let scaling = ops[rd as usize].eq(PeOp::MacScale as u64);
            let zero = m.zero(f.acc.bits());
            m.name("scale_src", mux(scaling, acc_old, zero))
        };
        let parts = misc::scale2_prepare(m, scale_src, acc_shift);
        let parts = parts.stage(m, "rd", staged);
        let acc_rd = if staged { parts.a } else { acc_old };
        let op_rd = ops[taken as usize];
        let scaled = misc::scale2_finish(m, &parts);
        let is_clear = op_rd.eq(PeOp::MacClear as u64);
        let is_zero = op_rd.eq(PeOp::MacZero as u64);
        let is_scale = op_rd.eq(PeOp::MacScale as u64);
        let neg_zero = m.lit(f.acc.bits(), f.acc.neg_zero());
        let pos_zero = m.zero(f.acc.bits());
        let acc_in = mux(is_scale, scaled, acc_rd);
        let acc_in = mux(is_zero, pos_zero, acc_in);
        let acc_in = mux(is_clear, neg_zero, acc_in);
        let acc_in = m.name("acc_in", acc_in);
        let acc_in = m.stage("acc_in_r", acc_in, staged);
        let ins = MacIn {
            a,
            b,
            acc: acc_in,
            run: feed.as_ref().map(|(taps, hold)| MacRun {
                feed: taps[cfg.acc_stage() as usize],
                hold: *hold,
            }),
        };
        let result = m.instantiate(&mac, "u_mac", &ins).y;
        // Integer QK: the dot product onto rf[addr] (from 0 for int_clear), at the read's
        // stage (the operands wait with it), delayed to the MAC's latency.
        let int_result = int_dot
            .as_ref()
            .map(|unit| int_path(m, unit, (a, b), (op_rd, acc_rd), (taken, latency)));

        // Control and load data travel beside the MAC pipeline to the write-back stage.
        let wb_op = ops[latency as usize];
        let wb_addr_d = m.delay_n("addr", addr, latency);
        m.drive(wb_addr, wb_addr_d);
        // The load data travels only with a Load: each of its registers behind a clock gate
        // opened by the Load in the stage before (the write-back takes it only for a Load).
        let wb_ld_data = (1..=latency).fold(ld_data, |v, k| {
            let load = ops[k as usize - 1].eq(PeOp::Load as u64);
            clock_gate::delay(m, &gate, &format!("ld_data_d{k}"), v, load)
        });
        let live = wb_op.ne(nop);
        let write = match &feed {
            None => live,
            Some((taps, _)) => {
                // A run's value is written when the run ends (no MacFeed follows), if any of
                // its operations was live (`run_live`: this one, or the run before it).
                let run_live = m.net("run_live", 1);
                let before = m.delay("run_live_d", run_live);
                m.drive(run_live, live | (taps[latency as usize] & before));
                run_live & !taps[latency as usize - 1]
            }
        };
        m.drive(wb_en, write);
        let wb_load = wb_op.eq(PeOp::Load as u64);
        let result = match int_result {
            // The integer operations are 8 and up: the op's top bit.
            Some(y) => mux(wb_op.msb(), y, result),
            None => result,
        };
        m.drive(wb_data, mux(wb_load, wb_ld_data, result));

        let rd_data = m.mem_read(rf, rd_addr);
        m.output("rd_data", rd_data);
        let acc_read = counted_read(cfg, &ops);
        m.output("rf_acc_read", acc_read);
        m.output("rf_write", wb_en);
        m.set_latency(cfg.latency());
    })
}

/// The PE as a typed block.
pub fn block(d: &mut Design, cfg: &PeConfig) -> Block<PeIn, PeOut<u32>> {
    Block::of(build(d, cfg))
}

#[cfg(test)]
mod tests {
    use super::PeOp;
    use kernels::pe::PeOp as Model;

    /// The model's operations carry the RTL's codes (the PE harness streams them as codes).
    #[test]
    fn model_operations_have_the_rtl_codes() {
        let pairs = [
            (Model::Nop, PeOp::Nop),
            (Model::Mac, PeOp::Mac),
            (Model::MacClear, PeOp::MacClear),
            (Model::Load, PeOp::Load),
            (Model::MacZero, PeOp::MacZero),
            (Model::MacScale, PeOp::MacScale),
            (Model::MacFeed, PeOp::MacFeed),
            (Model::IntClear, PeOp::IntClear),
            (Model::IntMac, PeOp::IntMac),
            (Model::IntLast, PeOp::IntLast),
        ];
        for (model, rtl) in pairs {
            assert_eq!(model as u8, rtl as u8, "{model:?}");
        }
    }
}
