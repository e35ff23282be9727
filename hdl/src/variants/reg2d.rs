//! reg2d: S in the PE registers (two blocks), P in each row's two-port P bank, one tier of
//! PEs on which QK and PV take turns. Every default of [`Dataflow`] is reg2d's.

use super::Dataflow;

/// reg2d has no knobs of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reg2d;

impl Dataflow for Reg2d {}
