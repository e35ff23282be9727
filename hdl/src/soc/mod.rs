//! What an SoC integrates: the stable top (`top`, named by `top_name`, `regflash_top` by
//! default), its AXI4-Lite control and status registers (`csr`), the varlen batch controller
//! (`batch`), the register map they and the software share (`regmap`), and the C header and
//! markdown map generated from it (`header`).

pub mod batch;
pub mod csr;
pub mod header;
pub mod regmap;
pub mod top;
