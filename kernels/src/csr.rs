//! The control and status registers (`hdl::soc::csr`) at the transaction level: what each
//! AXI4-Lite write and read does to the registers and returns, and what reaches the core.
//!
//! The register layout comes in as a list of (byte offset, [`Reg`]); the semantics are this
//! model's own: a write to an unmapped offset or a read-only register answers SLVERR and
//! changes nothing; byte strobes select the bits a write touches (a W1S or W1C bit acts only
//! if its byte is strobed); unimplemented bits read 0; an unmapped read answers SLVERR with 0;
//! reading a counter's LO copies its upper half into the shadow every HI returns (so does a
//! GLB bank counter's LO, of the bank group the select register names: 0 past the last, which
//! only a one-bit select of one group can name); the
//! interrupt is pending from the end of a launch (`finish`) until software clears it; START is
//! refused when an address value has bits the core cannot represent ([`AddressCheck`]).

/// AXI response codes.
pub const OKAY: u8 = 0;
pub const SLVERR: u8 = 2;

/// What a register is, to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// Reads a constant; read-only.
    Const(u32),
    /// Write 1 to bit 0 to start, to bit 1 to abort; reads 0.
    Ctrl,
    /// BUSY [0], DONE [1], ERROR [2] (done with a nonzero code), ERR_CODE [11:8]; read-only.
    Status,
    /// Bit 0, read-write.
    IrqEnable,
    /// Bit 0 pending, write 1 to clear.
    IrqStatus,
    /// Bits `lsb .. lsb + width` of problem value `value`, read-write.
    Value { value: usize, lsb: u32, width: u32 },
    /// Bits 31..0 of counter `index`; reading copies bits 63..32 into the shadow.
    CounterLo(usize),
    /// The shadow.
    CounterHi,
    /// The GLB bank window's select: `width` bits, read-write.
    BankSel { width: u32 },
    /// Bits 31..0 of the selected bank group's reads (`writes = false`) or writes; reading
    /// copies bits 63..32 into the shadow.
    BankLo { writes: bool },
    /// The vertical links' test: TESTING [0], BAD [1], CYCLES [31:16]; read-only.
    LinkStatus,
    /// The failed lanes the last link test found; read-only.
    LinkFailed,
    /// The probed lane: bits 23..0, read-write.
    LinkProbe,
}

/// What the vertical links' self-test shows the registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkView {
    pub testing: bool,
    pub bad: bool,
    pub failed: u32,
    pub cycles: u16,
    /// The lanes that failed, to this model: lane value v (LINK_PROBE) failed when bit v mod
    /// 32 is set.
    pub failed_mask: u32,
}

impl LinkView {
    /// Whether the lane LINK_PROBE names (`probe`) failed.
    pub fn probed(&self, probe: u32) -> bool {
        self.failed_mask >> (probe % 32) & 1 == 1
    }
}

/// What the core shows the registers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreStatus {
    pub busy: bool,
    pub done: bool,
    pub error: u8,
    pub counters: Vec<u64>,
    /// Per GLB bank group: (reads, writes).
    pub banks: Vec<(u64, u64)>,
    pub link: LinkView,
}

/// What a write did: the response, and the pulses it sends the core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteEffect {
    pub resp: u8,
    pub start: bool,
    pub abort: bool,
    /// CTRL bit 2 (a design with spare lanes tests its links).
    pub link_test: bool,
}

/// Which problem values are addresses the core takes `addr_bits` of: any bit above refuses
/// START. The lists' addresses count only while `batch` is nonzero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressCheck {
    pub addr_bits: u32,
    /// Bases and strides (indices into the problem values).
    pub always: Vec<usize>,
    /// The varlen lists' addresses.
    pub lists: Vec<usize>,
    /// The `batch` value.
    pub batch: usize,
}

/// The register file.
#[derive(Clone, Debug)]
pub struct Csr {
    regs: Vec<(u32, Reg)>,
    values: Vec<u64>,
    irq_enable: bool,
    pending: bool,
    shadow: u32,
    bank_sel: u32,
    link_probe: u32,
    check: AddressCheck,
}

impl Csr {
    /// The registers at their offsets, with `values` problem values (all zero, as after
    /// reset).
    pub fn new(regs: Vec<(u32, Reg)>, values: usize, check: AddressCheck) -> Self {
        Csr {
            regs,
            values: vec![0; values],
            irq_enable: false,
            pending: false,
            shadow: 0,
            bank_sel: 0,
            link_probe: 0,
            check,
        }
    }

    /// An address value has a bit at or above `addr_bits`: START is refused (ERR_ADDRESS).
    pub fn addr_over(&self) -> bool {
        let c = &self.check;
        let high = |i: &usize| c.addr_bits < 64 && self.values[*i] >> c.addr_bits != 0;
        c.always.iter().any(high) || (self.values[c.batch] != 0 && c.lists.iter().any(high))
    }

    fn find(&self, addr: u32) -> Option<Reg> {
        let off = addr & 0xFFC;
        self.regs.iter().find(|r| r.0 == off).map(|r| r.1)
    }

    /// Problem value `i`.
    pub fn value(&self, i: usize) -> u64 {
        self.values[i]
    }

    /// The interrupt output.
    pub fn irq(&self) -> bool {
        self.irq_enable && self.pending
    }

    /// A launch ended (the `finish` pulse): the interrupt becomes pending.
    pub fn finish(&mut self) {
        self.pending = true;
    }

    /// A write of `data` under byte strobes `strb` to byte address `addr`.
    pub fn write(&mut self, addr: u32, data: u32, strb: u8) -> WriteEffect {
        let mask = (0..4).fold(0u32, |m, b| {
            if strb >> b & 1 == 1 {
                m | 0xFF << (8 * b)
            } else {
                m
            }
        });
        let set = data & mask;
        let mut e = WriteEffect {
            resp: OKAY,
            ..Default::default()
        };
        match self.find(addr) {
            None
            | Some(
                Reg::Const(_)
                | Reg::Status
                | Reg::CounterLo(_)
                | Reg::CounterHi
                | Reg::BankLo { .. }
                | Reg::LinkStatus
                | Reg::LinkFailed,
            ) => e.resp = SLVERR,
            Some(Reg::BankSel { width }) => {
                let field = (1u32 << width) - 1;
                self.bank_sel = (self.bank_sel & !(mask & field)) | (data & mask & field);
            }
            Some(Reg::LinkProbe) => {
                let field = (1u32 << 24) - 1;
                self.link_probe = (self.link_probe & !(mask & field)) | (data & mask & field);
            }
            Some(Reg::Ctrl) => {
                e.start = set & 1 == 1;
                e.abort = set & 2 == 2;
                e.link_test = set & 4 == 4;
            }
            Some(Reg::IrqEnable) => {
                if mask & 1 == 1 {
                    self.irq_enable = data & 1 == 1;
                }
            }
            Some(Reg::IrqStatus) => {
                if set & 1 == 1 {
                    self.pending = false;
                }
            }
            Some(Reg::Value { value, lsb, width }) => {
                let field = if width >= 32 {
                    u32::MAX
                } else {
                    (1u32 << width) - 1
                };
                let m = ((mask & field) as u64) << lsb;
                let v = &mut self.values[value];
                *v = (*v & !m) | (((data & field) as u64) << lsb & m);
            }
        }
        e
    }

    /// A read of byte address `addr` while the core shows `st`: (data, response).
    pub fn read(&mut self, addr: u32, st: &CoreStatus) -> (u32, u8) {
        let Some(reg) = self.find(addr) else {
            return (0, SLVERR);
        };
        let v = match reg {
            Reg::Const(c) => c,
            Reg::Ctrl => 0,
            Reg::Status => {
                let error = st.done && st.error != 0;
                st.busy as u32
                    | (st.done as u32) << 1
                    | (error as u32) << 2
                    | ((st.error & 15) as u32) << 8
            }
            Reg::IrqEnable => self.irq_enable as u32,
            Reg::IrqStatus => self.pending as u32,
            Reg::Value { value, lsb, width } => {
                let field = if width >= 32 {
                    u32::MAX as u64
                } else {
                    (1u64 << width) - 1
                };
                ((self.values[value] >> lsb) & field) as u32
            }
            Reg::CounterLo(i) => {
                self.shadow = (st.counters[i] >> 32) as u32;
                st.counters[i] as u32
            }
            Reg::CounterHi => self.shadow,
            Reg::BankSel { .. } => self.bank_sel,
            Reg::BankLo { writes } => {
                let v =
                    st.banks
                        .get(self.bank_sel as usize)
                        .map_or(0, |b| if writes { b.1 } else { b.0 });
                self.shadow = (v >> 32) as u32;
                v as u32
            }
            Reg::LinkStatus => {
                let l = &st.link;
                l.testing as u32
                    | (l.bad as u32) << 1
                    | (l.probed(self.link_probe) as u32) << 2
                    | (l.cycles as u32) << 16
            }
            Reg::LinkProbe => self.link_probe,
            Reg::LinkFailed => st.link.failed,
        };
        (v, OKAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr() -> Csr {
        Csr::new(
            vec![
                (0x0, Reg::Const(7)),
                (0x20, Reg::Ctrl),
                (0x28, Reg::IrqEnable),
                (0x2C, Reg::IrqStatus),
                (
                    0x40,
                    Reg::Value {
                        value: 0,
                        lsb: 0,
                        width: 32,
                    },
                ),
                (
                    0x44,
                    Reg::Value {
                        value: 0,
                        lsb: 32,
                        width: 4,
                    },
                ),
                (
                    0x48,
                    Reg::Value {
                        value: 1,
                        lsb: 0,
                        width: 32,
                    },
                ),
                (
                    0x4C,
                    Reg::Value {
                        value: 1,
                        lsb: 32,
                        width: 32,
                    },
                ),
                (0xE0, Reg::BankSel { width: 2 }),
                (0xE8, Reg::BankLo { writes: false }),
                (0xEC, Reg::CounterHi),
                (0xF0, Reg::BankLo { writes: true }),
                (0xF4, Reg::CounterHi),
                (0x100, Reg::CounterLo(0)),
                (0x104, Reg::CounterHi),
            ],
            2,
            AddressCheck {
                addr_bits: 36,
                always: vec![1],
                lists: vec![],
                batch: 0,
            },
        )
    }

    #[test]
    fn strobes_widths_and_errors() {
        let mut c = csr();
        let st = CoreStatus {
            counters: vec![0x1234_5678_9ABC],
            ..Default::default()
        };
        assert_eq!(c.write(0x40, 0xAABB_CCDD, 0b0101).resp, OKAY);
        assert_eq!(c.value(0), 0x00BB_00DD);
        c.write(0x44, 0xFFFF_FFFF, 0xF);
        assert_eq!(c.value(0), 0xF_00BB_00DD);
        assert_eq!(c.read(0x44, &st), (0xF, OKAY));
        assert_eq!(c.write(0x0, 1, 0xF).resp, SLVERR);
        assert_eq!(c.read(0x8, &st), (0, SLVERR));
        assert_eq!(c.read(0x104, &st).0, 0);
        assert_eq!(c.read(0x100, &st).0, 0x5678_9ABC);
        assert_eq!(c.read(0x104, &st).0, 0x1234);
        let e = c.write(0x20, 3, 0x1);
        assert!(e.start && e.abort);
        assert!(!c.write(0x20, 1, 0x2).start);
    }

    /// The bank window shows the selected group, 0 past the last (here a 2-bit select of three
    /// groups); its LO fills the shadow.
    #[test]
    fn bank_window_follows_its_select() {
        let mut c = csr();
        let st = CoreStatus {
            counters: vec![7],
            banks: vec![(0x5_0000_0001, 2), (3, 0x6_0000_0004), (5, 6)],
            ..Default::default()
        };
        assert_eq!(c.read(0xE8, &st), (1, OKAY));
        assert_eq!(c.read(0xEC, &st), (5, OKAY));
        assert_eq!(c.write(0xE0, 0xFFFF_FFFD, 0xF).resp, OKAY);
        assert_eq!(c.read(0xE0, &st).0, 1, "two bits");
        assert_eq!(c.read(0xF0, &st).0, 4);
        assert_eq!(c.read(0xF4, &st).0, 6);
        // Counter and bank LO reads share the shadow.
        assert_eq!(c.read(0x100, &st).0, 7);
        assert_eq!(c.read(0xF4, &st).0, 0);
        c.write(0xE0, 3, 0x2);
        assert_eq!(c.read(0xE0, &st).0, 1, "an unstrobed byte is kept");
        c.write(0xE0, 3, 0x1);
        assert_eq!(c.read(0xE8, &st), (0, OKAY), "past the last group");
        assert_eq!(c.write(0xE8, 1, 0xF).resp, SLVERR);
    }

    #[test]
    fn interrupt_follows_each_finish_until_cleared() {
        let mut c = csr();
        c.finish();
        assert!(!c.irq());
        c.write(0x28, 1, 1);
        assert!(c.irq());
        c.write(0x2C, 1, 1);
        assert!(!c.irq());
        // A second launch that ends the same way (no fall of `done` between) is a new event.
        c.finish();
        assert!(c.irq());
    }

    #[test]
    fn address_bits_beyond_the_range_refuse_start() {
        let mut c = csr();
        c.write(0x4C, 0xF, 0xF);
        assert!(!c.addr_over(), "bits 35..32 exist");
        c.write(0x4C, 0x10, 0xF);
        assert!(c.addr_over(), "bit 36 does not");
        let st = CoreStatus {
            counters: vec![0],
            ..Default::default()
        };
        assert_eq!(c.read(0x4C, &st).0, 0x10, "held as written");
    }
}
