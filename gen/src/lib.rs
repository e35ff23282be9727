//! IR -> Verilog, manifests, output folders, and the lint/synthesis flows that check them.

pub mod asic;
pub mod cache;
pub mod constraints;
pub mod diagram;
pub mod flow;
pub mod loads;
pub mod manifest;
pub mod output;
pub mod tools;
pub mod verilog;

pub use manifest::Manifest;
pub use output::{render, write_design, OutputSpec};
