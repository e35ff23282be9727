//! State machines with named states.
//!
//! A state type is a Rust enum declared with [`states!`]; a state's code is its position in the
//! declaration. [`Fsm`] is the state register: `fsm.is(S::Run)` compares it against the state,
//! `fsm.code(S::Run)` is the state as a value for next-state logic, and
//! [`Fsm::set_transitions`] gives the next state of every state. In the Verilog every state is
//! a `localparam` (`S_RUN`), so the RTL reads `state_q == S_RUN`, and `regflash gen` writes a
//! GTKWave translate file per state register (`waves/`) so a waveform shows the names.

use std::marker::PhantomData;

use super::builder::{ModuleBuilder, RegHandle};
use super::signal::symbol;
use super::signal::{addr_bits, mux_index};
use super::Sig;
use crate::ir::FsmInfo;

/// A set of named states (implemented by [`states!`]).
pub trait States: Copy + Eq + std::fmt::Debug + 'static {
    /// Every state in code order: a state's code is its index.
    const ALL: &'static [Self];
    /// The prefix of the states' `localparam` names (`S` gives `S_RUN`).
    const PREFIX: &'static str;
    /// The Rust type's name.
    const TYPE: &'static str;
    /// The variant's name (`TileGo`).
    fn label(self) -> &'static str;

    /// The state's code.
    fn code(self) -> u64 {
        Self::ALL
            .iter()
            .position(|&s| s == self)
            .expect("a state is in ALL") as u64
    }

    /// The `localparam` name: the prefix and the variant in upper snake case (`S_TILE_GO`).
    fn param_name(self) -> String {
        let mut name = format!("{}_", Self::PREFIX);
        for (i, c) in self.label().chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
        }
        name
    }

    /// Bits of the state register.
    fn bits() -> u32 {
        addr_bits(Self::ALL.len() as u32)
    }
}

/// Declares a state enum: `states! { /// doc
/// pub enum Phase = "PH" { None, Qk, Pv } }` (the string is the localparam prefix).
#[macro_export]
macro_rules! states {
    ($(#[$meta:meta])* $vis:vis enum $name:ident = $prefix:literal {
        $($(#[$vmeta:meta])* $variant:ident),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }
        impl $crate::ir::fsm::States for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];
            const PREFIX: &'static str = $prefix;
            const TYPE: &'static str = stringify!($name);
            fn label(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant)),+
                }
            }
        }
    };
}

/// A state register holding one of the states `S` (reset to a given state).
pub struct Fsm<S: States> {
    reg: RegHandle,
    /// The register's output.
    pub q: Sig,
    reset: S,
    _states: PhantomData<S>,
}

impl<S: States> Fsm<S> {
    /// Declares the state register `name` (Verilog `name_q`), reset to `reset`.
    pub fn new(m: &mut ModuleBuilder, name: &str, reset: S) -> Self {
        let reg = m.reg(name, S::bits(), Some(reset.code()));
        m.add_fsm(FsmInfo {
            reg: m.reg_name(reg).to_string(),
            states_type: S::TYPE.to_string(),
            states: S::ALL.iter().map(|s| (s.param_name(), s.code())).collect(),
        });
        Fsm {
            reg,
            q: reg.q,
            reset,
            _states: PhantomData,
        }
    }

    /// The state `s` as a value (its `localparam`).
    pub fn code(&self, s: S) -> Sig {
        symbol(self.q, &s.param_name(), s.code())
    }

    /// One bit: the register holds `s`.
    pub fn is(&self, s: S) -> Sig {
        self.q.eq(self.code(s))
    }

    /// The next state: `next(s)` in state `s`. Codes that name no state go to the reset state,
    /// so a corrupted register recovers.
    pub fn set_transitions(&self, m: &mut ModuleBuilder, next: impl Fn(S) -> Sig) {
        let mut table: Vec<Sig> = S::ALL.iter().map(|&s| next(s)).collect();
        table.resize(1 << S::bits(), self.code(self.reset));
        let d = mux_index(self.q, &table);
        m.set_next(self.reg, d);
    }

    /// The next state as one value (for machines whose next state is not a per-state table).
    pub fn set_next(&self, m: &mut ModuleBuilder, d: Sig) {
        m.set_next(self.reg, d);
    }

    /// Makes the register load only when `en` is high.
    pub fn set_enable(&self, m: &mut ModuleBuilder, en: Sig) {
        m.set_enable(self.reg, en);
    }
}
