//! `pe_grid`: an R×C grid of PEs with row and column operand buses and a row-select read port.
//!
//! Ports: `a` (R × 16 bits; bits [16r+15:16r] go to every PE of row r), `b` (C × 16 bits;
//! bits [16c+15:16c] go to every PE of column c), `op`, `addr`, `ld_data`, `shift` (shared by
//! every PE), `en` (R × C bits, PE (r, c) at bit rC + c), `rd_addr` and, when R > 1, `rd_row` →
//! `rd_data` (C × 32 bits: register `rd_addr` of every PE in row `rd_row`, column c at bits
//! [32c+31:32c]).
//!
//! One PE module definition serves every grid position. Until the FlashAttention core exists,
//! this is the top of a preset; the controller that drives it comes with the core.

use anyhow::{ensure, Result};

use crate::pe::PeIn;
use crate::pe::{self, PeConfig};
use crate::{bits_for, cat, mux_index, Design, ModRef};

/// Configuration of a PE grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeGridConfig {
    pub rows: u32,
    pub cols: u32,
    pub pe: PeConfig,
}

impl PeGridConfig {
    pub fn validate(&self) -> Result<()> {
        ensure!(
            (1..=256).contains(&self.rows) && (1..=256).contains(&self.cols),
            "a {}x{} PE grid is not supported: rows and columns must be 1 to 256",
            self.rows,
            self.cols
        );
        self.pe.validate()
    }

    pub fn module_name(&self) -> String {
        format!(
            "pe_grid_{}x{}_{}",
            self.rows,
            self.cols,
            self.pe.module_name()
        )
    }
}

/// Defines the grid (and its PE) in `d`.
pub fn build(d: &mut Design, cfg: &PeGridConfig) -> ModRef {
    let pe = pe::build_plain(d, &cfg.pe);
    d.define(&cfg.module_name(), |_, m| {
        m.doc(&format!(
            "pe_grid: {} x {} PEs ({}); operands broadcast along rows (a) and columns (b);\n\
             op/addr/ld_data/shift shared, en per PE; rd_data returns register rd_addr of every\n\
             PE in row rd_row.\n\
             Latency {} cycle(s) from issue to rd_data.",
            cfg.rows, cfg.cols, pe.module.name, pe.module.latency
        ));
        let aw = cfg.pe.addr_width();
        let a = m.input("a", 16 * cfg.rows);
        let b = m.input("b", 16 * cfg.cols);
        let op = m.input("op", pe::OP_BITS);
        let en = m.input("en", cfg.rows * cfg.cols);
        let addr = m.input("addr", aw);
        let ld_data = m.input("ld_data", 32);
        let shift = m.input("shift", 8);
        let rd_addr = m.input("rd_addr", aw);
        let rd_row = (cfg.rows > 1).then(|| m.input("rd_row", bits_for(cfg.rows as u64 - 1)));

        let mut rows = vec![];
        for r in 0..cfg.rows {
            let a_r = a.slice(16 * r + 15, 16 * r);
            let mut row = vec![];
            for c in 0..cfg.cols {
                let b_c = b.slice(16 * c + 15, 16 * c);
                let en_rc = en.bit(r * cfg.cols + c);
                let ins = PeIn {
                    a: a_r,
                    b: b_c,
                    op,
                    en: en_rc,
                    addr,
                    ld_data,
                    shift,
                    rd_addr,
                };
                row.push(m.instantiate(&pe, &format!("pe_{r}_{c}"), &ins).rd_data);
            }
            row.reverse(); // column 0 in the low bits
            let row_data = cat(&row);
            rows.push(m.name(&format!("row{r}_data"), row_data));
        }
        let rd_data = match rd_row {
            Some(sel) => mux_index(sel, &rows),
            None => rows[0],
        };
        m.output("rd_data", rd_data);
        m.set_latency(pe.module.latency);
    })
}
