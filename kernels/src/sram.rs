//! The SRAM bank (`hdl::mem::sram`): words of up to 64 bits, a registered read, read-first.

/// A bank's state: its words and the read data register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sram {
    words: Vec<u64>,
    mask: u64,
    rd_data: u64,
}

impl Sram {
    /// `depth` words of `width` bits (1..=64), all zero (the RTL leaves them undefined; no
    /// design reads a word before writing it).
    pub fn new(depth: usize, width: u32) -> Self {
        assert!((1..=64).contains(&width), "width {width} out of 1..=64");
        Sram {
            words: vec![0; depth],
            mask: if width == 64 {
                u64::MAX
            } else {
                (1 << width) - 1
            },
            rd_data: 0,
        }
    }

    /// The read data register: the word the last read returned.
    pub fn rd_data(&self) -> u64 {
        self.rd_data
    }

    /// One clock edge: a write of `wdata` at `waddr` when `we`, a read of `raddr` into the
    /// read data register when `re`. A read of the word written in the same cycle returns the
    /// old word. Addresses past the depth wrap (the designs' depths are powers of two). A
    /// single-port bank must not be given `we` and `re` together (its one address is `waddr`
    /// then); this model does not describe that case.
    pub fn clock(&mut self, we: bool, waddr: usize, wdata: u64, re: bool, raddr: usize) {
        let n = self.words.len();
        if re {
            self.rd_data = self.words[raddr % n];
        }
        if we {
            self.words[waddr % n] = wdata & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_first_and_holds_until_the_next_read() {
        let mut s = Sram::new(4, 16);
        s.clock(true, 1, 0x1_2345, false, 0);
        assert_eq!(s.rd_data(), 0);
        s.clock(true, 1, 7, true, 1);
        assert_eq!(
            s.rd_data(),
            0x2345,
            "read-first, and the write was masked to 16 bits"
        );
        s.clock(false, 0, 0, false, 1);
        assert_eq!(s.rd_data(), 0x2345, "held without a read");
        s.clock(false, 0, 0, true, 1);
        assert_eq!(s.rd_data(), 7);
    }
}
