//! The stable top (`top_name`) driven only through its AXI4-Lite registers, as a driver on an
//! SoC would: check the ID, program the problem registers, write START, wait for the
//! interrupt (or poll STATUS), read STATUS and every counter as a LO/HI pair, clear the
//! interrupt. Every AXI4-Lite transaction has random channel delays. The run it returns is
//! checked as a core run is (`check`): O bit for bit, every counter exact.

use super::*;
use crate::verify::axil::{self, Delays};
use hdl::soc::regmap::{self, Register};

/// How the driver waits for the end of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// IRQ_ENABLE set, wait for `irq`.
    Interrupt,
    /// Read STATUS until DONE.
    Poll,
}

/// STATUS after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopStatus {
    pub busy: bool,
    pub done: bool,
    pub error: bool,
    pub code: u64,
}

/// A driver of one top instance: its registers over AXI4-Lite (random delays of 0 to 3
/// cycles on each channel, from a seed), each cycle also serving the memory port.
pub struct TopDriver {
    pub dut: Dut,
    link: MemPort,
    regs: Vec<Register>,
    p: CoreParams,
    rng: kernels::patterns::Rng,
    /// Cycles clocked so far.
    pub cycles: u64,
}

impl TopDriver {
    /// A reset instance of `model`, checked to be a regflash top (its ID register).
    pub fn new(
        model: &Model,
        p: &CoreParams,
        axi_seed: u64,
        timing: &MemoryTiming,
        mem: &mut Memory,
    ) -> Result<Self> {
        let mut dut = model.dut()?;
        axil::idle(&mut dut);
        dut.reset(2);
        let link = MemPort::new(&dut, &p.dma, timing)?;
        let mut d = TopDriver {
            dut,
            link,
            regs: regmap::registers(p),
            p: *p,
            rng: kernels::patterns::Rng(axi_seed | 1),
            cycles: 0,
        };
        let id = d.read("ID", mem)?;
        ensure!(
            id == regmap::MAGIC,
            "ID reads {id:#x}, not the magic {:#x}",
            regmap::MAGIC
        );
        // With spare lanes a link test runs from reset, and START waits for its end.
        if d.offset("LINK_STATUS").is_ok() {
            let mut polls = 0;
            while d.read("LINK_STATUS", mem)? & 1 == 1 {
                polls += 1;
                ensure!(
                    polls < 1000,
                    "the link test did not end (LINK_STATUS.TESTING)"
                );
            }
        }
        Ok(d)
    }

    /// The last link test, by LINK_STATUS and LINK_FAILED (None without spare lanes).
    fn link_test(&mut self, mem: &mut Memory) -> Result<Option<LinkTest>> {
        if self.offset("LINK_STATUS").is_err() {
            return Ok(None);
        }
        let st = self.read("LINK_STATUS", mem)?;
        let failed = self.read("LINK_FAILED", mem)? as u64;
        let p = self.p;
        let lanes = probe_lanes(&p, failed, |v| {
            self.write("LINK_PROBE", v, mem)?;
            Ok(self.read("LINK_STATUS", mem)? >> 2 & 1 == 1)
        })?;
        Ok(Some(LinkTest {
            cycles: (st >> 16) as u64,
            failed_lanes: failed,
            beyond_repair: st >> 1 & 1 == 1,
            lanes,
        }))
    }

    fn delays(&mut self) -> Delays {
        let mut d = [0u32; 3];
        for x in &mut d {
            *x = (self.rng.next_u64() % 4) as u32;
        }
        Delays {
            addr: d[0],
            data: d[1],
            resp: d[2],
        }
    }

    fn offset(&self, name: &str) -> Result<u32> {
        self.regs
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.offset)
            .with_context(|| format!("the register map has no {name}"))
    }

    /// One clock cycle, with the memory's side of it.
    pub fn tick(&mut self, mem: &mut Memory) -> Result<()> {
        self.link.present(&mut self.dut, mem);
        self.link.edge(&mut self.dut, mem)?;
        self.cycles += 1;
        Ok(())
    }

    /// Sets the AXI4 memory's error responses for the next runs (AXI4 memory interface only).
    pub fn set_fault(&mut self, fault: Option<AxiFault>) -> Result<()> {
        self.link.set_fault(fault)
    }

    /// Writes register `name`; an error response fails.
    pub fn write(&mut self, name: &str, v: u64, mem: &mut Memory) -> Result<()> {
        let at = self.offset(name)?;
        self.write_at(at, v, mem)
            .with_context(|| format!("writing {name}"))
    }

    /// Writes the register at byte offset `at`; an error response fails.
    pub fn write_at(&mut self, at: u32, v: u64, mem: &mut Memory) -> Result<()> {
        let d = self.delays();
        let (link, cycles) = (&mut self.link, &mut self.cycles);
        let mut tick = |dut: &mut Dut| -> Result<()> {
            link.present(dut, mem);
            *cycles += 1;
            link.edge(dut, mem)
        };
        let resp = axil::write(&mut self.dut, at, v as u32, 0xF, d, &mut tick)?;
        ensure!(resp == 0, "writing {at:#x}: response {resp}");
        Ok(())
    }

    /// Reads register `name`; an error response fails.
    pub fn read(&mut self, name: &str, mem: &mut Memory) -> Result<u32> {
        let at = self.offset(name)?;
        self.read_at(at, mem)
    }

    /// Reads the register at byte offset `at`; an error response fails.
    pub fn read_at(&mut self, at: u32, mem: &mut Memory) -> Result<u32> {
        let d = self.delays();
        let (link, cycles) = (&mut self.link, &mut self.cycles);
        let mut tick = |dut: &mut Dut| -> Result<()> {
            link.present(dut, mem);
            *cycles += 1;
            link.edge(dut, mem)
        };
        let (v, resp) = axil::read(&mut self.dut, at, d, &mut tick)?;
        ensure!(resp == 0, "reading {at:#x}: response {resp}");
        Ok(v)
    }

    /// Programs the problem `a` with its tensors at `lay`, clears a pending interrupt and sets
    /// the interrupt enable.
    pub fn program(
        &mut self,
        a: &Attention,
        lay: &Layout,
        wait: Wait,
        mem: &mut Memory,
    ) -> Result<()> {
        for (name, v) in [
            ("Q_ADDR", lay.q),
            ("K_ADDR", lay.k),
            ("V_ADDR", lay.v),
            ("O_ADDR", lay.o),
        ] {
            self.write(&format!("{name}_LO"), v & 0xFFFF_FFFF, mem)?;
            self.write(&format!("{name}_HI"), v >> 32, mem)?;
        }
        self.write("HEADS", a.heads as u64, mem)?;
        self.write("Q_LEN", a.q_len as u64, mem)?;
        self.write("K_LEN", a.k_len as u64, mem)?;
        let flags = a.causal as u64 | ((a.out == OutFormat::F32) as u64) << 1;
        self.write("FLAGS", flags, mem)?;
        self.write("SCALE", a.softmax_constant() as u64, mem)?;
        for (name, (row, head)) in [
            ("Q", lay.q_strides),
            ("K", lay.k_strides),
            ("V", lay.v_strides),
            ("O", lay.o_strides),
        ] {
            for (what, v) in [("ROW", row), ("HEAD", head)] {
                self.write(&format!("{name}_{what}_STRIDE_LO"), v & 0xFFFF_FFFF, mem)?;
                self.write(&format!("{name}_{what}_STRIDE_HI"), v >> 32, mem)?;
            }
        }
        self.write("KV_GROUP", a.group() as u64, mem)?;
        // unfused: the scratch region.
        if self.regs.iter().any(|r| r.name == "S_ADDR_LO") {
            self.write("S_ADDR_LO", lay.s & 0xFFFF_FFFF, mem)?;
            self.write("S_ADDR_HI", lay.s >> 32, mem)?;
        }
        // One problem, not a varlen batch (the registers keep a previous launch's value).
        self.write("BATCH", 0, mem)?;
        // A finished run's pending interrupt (a polled one leaves it set) is cleared first.
        self.write("IRQ_STATUS", 1, mem)?;
        self.write("IRQ_ENABLE", (wait == Wait::Interrupt) as u64, mem)
    }

    /// Waits for the end of the run (at most `limit` cycles), then reads STATUS.
    pub fn wait(&mut self, wait: Wait, limit: u64, mem: &mut Memory) -> Result<TopStatus> {
        let start = self.cycles;
        loop {
            let finished = match wait {
                Wait::Interrupt => {
                    self.dut.get("irq") == 1 || {
                        self.tick(mem)?;
                        false
                    }
                }
                Wait::Poll => self.read("STATUS", mem)? >> 1 & 1 == 1,
            };
            if finished {
                break;
            }
            ensure!(
                self.cycles - start < limit,
                "the top did not finish within {limit} cycles: a hang; rerun with \
                 REGFLASH_WAVES=1"
            );
            ensure!(
                self.dut.assertion_failures() == 0,
                "an RTL assertion failed; the simulator's message above names it"
            );
        }
        let s = self.read("STATUS", mem)?;
        let st = TopStatus {
            busy: s & 1 == 1,
            done: s >> 1 & 1 == 1,
            error: s >> 2 & 1 == 1,
            code: (s >> 8 & 15) as u64,
        };
        ensure!(
            !st.busy && st.done && st.error == (st.code != 0),
            "STATUS {s:#x} after the run"
        );
        Ok(st)
    }

    /// Every counter, each read LO then HI.
    pub fn counters(&mut self, mem: &mut Memory) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        for (i, name) in COUNTERS.iter().enumerate() {
            let lo_at = regmap::COUNTER_BASE + 8 * i as u32;
            let lo = self.read_at(lo_at, mem)?;
            let hi = self.read_at(lo_at + 4, mem)?;
            out.insert(name.to_string(), (hi as u64) << 32 | lo as u64);
        }
        Ok(out)
    }

    /// The GLB's per-bank counters through the window: (reads, writes) of each bank group
    /// `ID_GLB.GROUPS` names (none without a GLB), each read LO then HI.
    pub fn glb_banks(&mut self, mem: &mut Memory) -> Result<Vec<(u64, u64)>> {
        let groups = self.read("ID_GLB", mem)? & 0xFFFF;
        let mut out = vec![];
        for g in 0..groups {
            self.write("GLB_BANK_SEL", g as u64, mem)?;
            let mut pair = [0u64; 2];
            for (k, v) in pair.iter_mut().enumerate() {
                let lo_at = regmap::GLB_BANK_BASE + 8 + 8 * k as u32;
                let lo = self.read_at(lo_at, mem)?;
                let hi = self.read_at(lo_at + 4, mem)?;
                *v = (hi as u64) << 32 | lo as u64;
            }
            out.push((pair[0], pair[1]));
        }
        Ok(out)
    }

    /// Clears the interrupt; `irq` must fall.
    pub fn clear_irq(&mut self, mem: &mut Memory) -> Result<()> {
        self.write("IRQ_STATUS", 1, mem)?;
        ensure!(
            self.dut.get("irq") == 0,
            "irq still high after IRQ_STATUS was cleared"
        );
        Ok(())
    }

    /// The end of a launch made exactly one DONE event: IRQ_STATUS holds it (whether or not
    /// the interrupt is enabled); cleared, it stays clear and `irq` low.
    pub fn one_done_event(&mut self, mem: &mut Memory) -> Result<()> {
        ensure!(
            self.read("IRQ_STATUS", mem)? & 1 == 1,
            "the launch ended without a DONE event in IRQ_STATUS (a lost interrupt)"
        );
        self.clear_irq(mem)?;
        for _ in 0..16 {
            self.tick(mem)?;
        }
        ensure!(
            self.read("IRQ_STATUS", mem)? == 0 && self.dut.get("irq") == 0,
            "a second DONE event after the launch ended"
        );
        Ok(())
    }

    /// START on the programmed registers, the wait (at most `limit` cycles), STATUS, every
    /// counter, its one DONE event cleared; every burst answered. The run's O is left empty.
    fn launch(
        &mut self,
        wait: Wait,
        limit: u64,
        timing: &MemoryTiming,
        mem: &mut Memory,
    ) -> Result<CoreRun> {
        self.link.reset_stats();
        self.write("CTRL", 1, mem)?;
        let st = self.wait(wait, limit, mem)?;
        self.link.check_idle()?;
        let counters = self.counters(mem)?;
        let glb_banks = self.glb_banks(mem)?;
        let link = self.link_test(mem)?;
        self.one_done_event(mem)?;
        Ok(CoreRun {
            out: vec![],
            counters,
            glb_banks,
            memory: mem.stats,
            assertion_failures: self.dut.assertion_failures(),
            dma_error: st.code,
            timing: *timing,
            axi: self.link.axi_stats(),
            link,
        })
    }

    /// Runs `a` (its tensors in `mem` at `lay`) to the end: program, START, wait, STATUS,
    /// counters, and the interrupt cleared.
    pub fn run(
        &mut self,
        p: &CoreParams,
        a: &Attention,
        timing: &MemoryTiming,
        wait: Wait,
        mem: &mut Memory,
        lay: &Layout,
    ) -> Result<CoreRun> {
        let (_, limit) = cycle_limit(p, a, timing, mem);
        self.program(a, lay, wait, mem)?;
        let mut r = self.launch(wait, limit, timing, mem)?;
        r.out = read_out(mem, lay, a);
        Ok(r)
    }
}

impl TopDriver {
    /// Runs a varlen batch (its image in `mem`) to the end: the first sequence's problem
    /// registers (the lengths are ignored), `BATCH` and the two offset lists, START, wait,
    /// STATUS, counters; returns the run (O of every sequence, one after the other) and each
    /// sequence's O.
    #[allow(clippy::too_many_arguments)]
    pub fn run_batch(
        &mut self,
        p: &CoreParams,
        batch: &Batch,
        timing: &MemoryTiming,
        wait: Wait,
        mem: &mut Memory,
        img: &BatchImage,
    ) -> Result<(CoreRun, Vec<Vec<u32>>)> {
        let limit: u64 = batch
            .seqs
            .iter()
            .map(|a| cycle_limit(p, a, timing, mem).1 + 4 * timing.latency as u64 + 200)
            .sum();
        self.program(&batch.seqs[0], &img.lay, wait, mem)?;
        self.write("BATCH", batch.seqs.len() as u64, mem)?;
        for (name, at) in [("CU_Q_ADDR", img.cu_q), ("CU_K_ADDR", img.cu_k)] {
            self.write(&format!("{name}_LO"), at & 0xFFFF_FFFF, mem)?;
            self.write(&format!("{name}_HI"), at >> 32, mem)?;
        }
        let mut r = self.launch(wait, limit, timing, mem)?;
        let outs = batch.outputs(mem, img);
        r.out = outs.concat();
        Ok((r, outs))
    }
}

/// Runs a varlen batch on a fresh instance of the top's model through its registers, and checks
/// it (each sequence bit-exact, the counters summed over the sequences).
pub fn run_batch_top(
    model: &Model,
    p: &CoreParams,
    batch: &Batch,
    timing: &MemoryTiming,
    wait: Wait,
    axi_seed: u64,
) -> Result<(CoreRun, CoreCheck)> {
    let (mut mem, img) = batch.image(p, timing)?;
    let mut d = TopDriver::new(model, p, axi_seed, timing, &mut mem)?;
    let before = mem.stats;
    let (mut run, outs) = d.run_batch(p, batch, timing, wait, &mut mem, &img)?;
    // Only the batch's own memory traffic (not the ID read at reset).
    run.memory.reads -= before.reads;
    run.memory.writes -= before.writes;
    let chk = check_batch(p, &batch.seqs, &outs, batch.list_reads(), &run);
    Ok((run, chk))
}

/// Runs `a` on a fresh instance of the top's model through its registers.
pub fn run_top(
    model: &Model,
    p: &CoreParams,
    a: &Attention,
    timing: &MemoryTiming,
    wait: Wait,
    axi_seed: u64,
) -> Result<CoreRun> {
    let (mut mem, lay) = memory_image(p, a, timing)?;
    let mut d = TopDriver::new(model, p, axi_seed, timing, &mut mem)?;
    d.run(p, a, timing, wait, &mut mem, &lay)
}
