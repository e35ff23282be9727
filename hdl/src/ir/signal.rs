//! Signals as values: `a & b`, `a + 1`, `!a`, `a.eq(b)`, `a.slice(7, 0)`, `mux(c, a, b)`.
//!
//! A [`Sig`] names a node in the expression arena of the module being built, and carries that
//! module's serial number. Operators find the arena through a per-thread registry of the
//! modules under construction ([`Design::define`](crate::Design::define) nests, so several
//! can be open at once), so hardware expressions are ordinary Rust expressions and need no
//! builder argument. Width rules are checked as nodes are created, exactly as before: operands
//! of bitwise and arithmetic operators have equal widths, comparisons give one bit, shifts
//! keep the shifted width. A `u64` operand is a constant of the other operand's width (it must
//! fit). Combining signals of two modules, or using a signal after its module is finished, is
//! a generator bug and panics with both module names.
//!
//! The arena hash-conses pure nodes (equal expressions share one node) and folds constants and
//! identities, so the emitted Verilog has no dead constants.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{Add, BitAnd, BitOr, BitXor, Not, Shl, Shr, Sub};
use std::rc::Rc;

use crate::ir::*;

/// Bits needed to count `0..=n`.
pub fn bits_for(n: u64) -> u32 {
    (64 - n.leading_zeros()).max(1)
}

/// Bits needed to address `depth` entries (at least 1).
pub fn addr_bits(depth: u32) -> u32 {
    bits_for(depth.saturating_sub(1) as u64)
}

/// The expression nodes of one module under construction.
pub(crate) struct Arena {
    pub(crate) module: u32,
    pub(crate) name: String,
    pub(crate) nodes: Vec<Node>,
    pub(crate) discards: Vec<NodeId>,
    pub(crate) symbols: Vec<Symbol>,
    /// Hash-consing: every pure node is created once, so equal expressions share a node.
    pure: HashMap<(NodeKind, u32), NodeId>,
}

type Shared = Rc<RefCell<Arena>>;

thread_local! {
    /// The modules being built on this thread, innermost last.
    static OPEN: RefCell<Vec<(u32, Shared)>> = const { RefCell::new(Vec::new()) };
    static SERIAL: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Opens the arena of a new module and registers it; [`close`] removes it.
pub(crate) fn open(name: &str) -> Shared {
    let module = SERIAL.with(|s| {
        let n = s.get();
        s.set(n + 1);
        n
    });
    let arena = Rc::new(RefCell::new(Arena {
        module,
        name: name.to_string(),
        nodes: vec![],
        discards: vec![],
        symbols: vec![],
        pure: HashMap::new(),
    }));
    OPEN.with(|o| o.borrow_mut().push((module, arena.clone())));
    arena
}

/// Unregisters a module's arena (it is finished, or its build was abandoned).
pub(crate) fn close(module: u32) {
    OPEN.with(|o| o.borrow_mut().retain(|(m, _)| *m != module));
}

/// Runs `f` on the arena of module `module`.
fn with<R>(module: u32, f: impl FnOnce(&mut Arena) -> R) -> R {
    let arena = OPEN
        .with(|o| {
            o.borrow()
                .iter()
                .rev()
                .find(|(m, _)| *m == module)
                .map(|(_, a)| a.clone())
        })
        .unwrap_or_else(|| {
            panic!("generator bug: a signal of a module that is finished (or on another thread)")
        });
    let mut a = arena.borrow_mut();
    f(&mut a)
}

/// The module shared by `sigs`; panics (a generator bug) if they come from different modules.
fn module_of(sigs: &[Sig]) -> u32 {
    let m = sigs[0].module;
    if let Some(other) = sigs.iter().find(|s| s.module != m) {
        let name = |k: u32| {
            OPEN.with(|o| {
                o.borrow()
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, a)| a.borrow().name.clone())
                    .unwrap_or_else(|| "a finished module".into())
            })
        };
        panic!(
            "generator bug: signals of `{}` and `{}` combined in one expression",
            name(m),
            name(other.module)
        );
    }
    m
}

/// Runs `f` on the arena the signals `sigs` belong to.
fn on<R>(sigs: &[Sig], f: impl FnOnce(&mut Arena) -> R) -> R {
    with(module_of(sigs), f)
}

/// A second operand: another signal, or a `u64` constant of the first operand's width.
pub trait Operand {
    /// This operand as a signal in `like`'s module, of `like`'s width for constants.
    fn to_sig(self, like: Sig) -> Sig;
}

impl Operand for Sig {
    fn to_sig(self, _like: Sig) -> Sig {
        self
    }
}

impl Operand for u64 {
    fn to_sig(self, like: Sig) -> Sig {
        with(like.module, |a| a.lit(like.width, self))
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $arena:ident) => {
        impl $trait for Sig {
            type Output = Sig;
            fn $method(self, rhs: Sig) -> Sig {
                on(&[self, rhs], |a| a.$arena(self, rhs))
            }
        }
        impl $trait<u64> for Sig {
            type Output = Sig;
            fn $method(self, rhs: u64) -> Sig {
                let rhs = rhs.to_sig(self);
                self.$method(rhs)
            }
        }
    };
}

binary_operator!(BitAnd, bitand, and);
binary_operator!(BitOr, bitor, or);
binary_operator!(BitXor, bitxor, xor);
binary_operator!(Add, add, add);
binary_operator!(Sub, sub, sub);

impl Not for Sig {
    type Output = Sig;
    fn not(self) -> Sig {
        on(&[self], |a| a.not(self))
    }
}

/// `a << n` for a constant `n`: wiring; bits shifted past the top are lost.
impl Shl<u32> for Sig {
    type Output = Sig;
    fn shl(self, n: u32) -> Sig {
        on(&[self], |a| a.shl_const(self, n))
    }
}

/// `a >> n` for a constant `n`: wiring, zeros shifted in.
impl Shr<u32> for Sig {
    type Output = Sig;
    fn shr(self, n: u32) -> Sig {
        on(&[self], |a| a.shr_const(self, n))
    }
}

/// `a << amount`: a logical left shifter by a variable amount (any width).
impl Shl<Sig> for Sig {
    type Output = Sig;
    fn shl(self, amount: Sig) -> Sig {
        on(&[self, amount], |a| a.shl(self, amount))
    }
}

/// `a >> amount`: a logical right shifter by a variable amount (any width).
impl Shr<Sig> for Sig {
    type Output = Sig;
    fn shr(self, amount: Sig) -> Sig {
        on(&[self, amount], |a| a.shr(self, amount))
    }
}

macro_rules! compare {
    ($($(#[$doc:meta])* $name:ident => $arena:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(self, b: impl Operand) -> Sig {
                let b = b.to_sig(self);
                on(&[self, b], |a| a.$arena(self, b))
            }
        )*
    };
}

impl Sig {
    compare! {
        /// `a == b` (one bit).
        eq => eq;
        /// `a != b` (one bit).
        ne => ne;
        /// Unsigned `a < b`.
        lt => lt;
        /// Unsigned `a <= b`.
        le => le;
        /// Unsigned `a > b`.
        gt => gt;
        /// Unsigned `a >= b`.
        ge => ge;
        /// Signed (two's complement) `a < b`.
        lt_signed => lt_signed;
        /// Signed `a <= b`.
        le_signed => le_signed;
        /// Signed `a > b`.
        gt_signed => gt_signed;
        /// Signed `a >= b`.
        ge_signed => ge_signed;
        /// Unsigned minimum of `a` and `b`.
        min => min;
        /// `a + b` with its carry out: one bit wider than the operands.
        add_wide => add_wide;
        /// The full unsigned product: width `a.width + b.width`.
        mul_wide => mul;
        /// The full two's-complement product: width `a.width + b.width`.
        mul_wide_signed => mul_signed;
        /// An arithmetic (sign-filling) right shifter by a variable amount.
        sra => sra;
    }

    /// The low `width` bits of the unsigned product (operands zero-extended or truncated to
    /// `width` first): an address computation that cannot overflow needs no more.
    pub fn mul_lo(self, b: Sig, width: u32) -> Sig {
        on(&[self, b], |a| a.mul_lo(self, b, width))
    }

    /// Bits `hi..=lo`.
    pub fn slice(self, hi: u32, lo: u32) -> Sig {
        on(&[self], |a| a.slice(self, hi, lo))
    }
    /// Bit `i`.
    pub fn bit(self, i: u32) -> Sig {
        self.slice(i, i)
    }
    /// The most significant bit.
    pub fn msb(self) -> Sig {
        self.bit(self.width - 1)
    }
    /// The low `width` bits.
    pub fn trunc(self, width: u32) -> Sig {
        self.slice(width - 1, 0)
    }
    /// This value repeated `n` times.
    pub fn repeat(self, n: u32) -> Sig {
        on(&[self], |a| a.repeat(self, n))
    }
    /// Zero-extended to `width` bits.
    pub fn zext(self, width: u32) -> Sig {
        on(&[self], |a| a.zext(self, width))
    }
    /// Fitted to `width` bits: the low bits when narrower, zero-extended when wider.
    pub fn resize(self, width: u32) -> Sig {
        if self.width >= width {
            self.trunc(width)
        } else {
            self.zext(width)
        }
    }
    /// Sign-extended to `width` bits.
    pub fn sext(self, width: u32) -> Sig {
        on(&[self], |a| a.sext(self, width))
    }
    /// OR of all bits.
    pub fn any(self) -> Sig {
        on(&[self], |a| a.any(self))
    }
    /// AND of all bits.
    pub fn all(self) -> Sig {
        on(&[self], |a| a.all(self))
    }
    /// XOR of all bits.
    pub fn parity(self) -> Sig {
        on(&[self], |a| a.parity(self))
    }
    /// True when every bit is zero.
    pub fn is_zero(self) -> Sig {
        on(&[self], |a| a.is_zero(self))
    }
    /// The constant value, if this is a constant.
    pub fn const_value(self) -> Option<u64> {
        on(&[self], |a| a.const_value(self))
    }
}

/// `sel ? t : f` (`sel` one bit, `t` and `f` of equal width).
pub fn mux(sel: Sig, t: Sig, f: Sig) -> Sig {
    on(&[sel, t, f], |a| a.mux(sel, t, f))
}

/// `choices[index]`, a balanced tree of 2:1 muxes; an index past the end selects one of the
/// choices (which one is unspecified). Index bits that select nothing are marked unread.
pub fn mux_index(index: Sig, choices: &[Sig]) -> Sig {
    let all: Vec<Sig> = std::iter::once(index)
        .chain(choices.iter().copied())
        .collect();
    on(&all, |a| a.mux_index(index, choices))
}

/// Concatenation, most significant part first (at least one part).
pub fn cat(parts: &[Sig]) -> Sig {
    assert!(!parts.is_empty(), "empty concatenation");
    on(parts, |a| a.cat(parts))
}

/// AND of several equal-width values (at least one).
pub fn and_all(xs: &[Sig]) -> Sig {
    assert!(!xs.is_empty(), "and_all of no values");
    on(xs, |a| a.and_all(xs))
}

/// OR of several equal-width values (at least one).
pub fn or_all(xs: &[Sig]) -> Sig {
    assert!(!xs.is_empty(), "or_all of no values");
    on(xs, |a| a.or_all(xs))
}

/// The named constant `name` = `value` of `like`'s width, in `like`'s module: the code of an FSM
/// state, printed as a `localparam` (see `fsm.rs`).
pub(crate) fn symbol(like: Sig, name: &str, value: u64) -> Sig {
    on(&[like], |a| a.symbol(name, like.width, value))
}

impl Arena {
    fn symbol(&mut self, name: &str, width: u32, value: u64) -> Sig {
        assert!(
            width >= 64 || value >> width == 0,
            "state {name} = {value} does not fit in {width} bits"
        );
        let idx = match self.symbols.iter().position(|s| s.name == name) {
            Some(i) => {
                let s = &self.symbols[i];
                assert!(
                    s.width == width && s.value == value,
                    "`{name}` is defined twice in `{}` with different values",
                    self.name
                );
                i
            }
            None => {
                self.symbols.push(Symbol {
                    name: name.to_string(),
                    width,
                    value,
                });
                self.symbols.len() - 1
            }
        };
        self.node(NodeKind::Symbol(idx), width)
    }

    fn sig(&self, id: NodeId) -> Sig {
        Sig {
            id,
            width: self.nodes[id as usize].width,
            module: self.module,
        }
    }

    pub(crate) fn node(&mut self, kind: NodeKind, width: u32) -> Sig {
        assert!(width > 0, "zero-width node in `{}`: {kind:?}", self.name);
        let pure = !matches!(
            kind,
            NodeKind::Input(_)
                | NodeKind::Reset
                | NodeKind::Net(_)
                | NodeKind::Reg(_)
                | NodeKind::InstOut { .. }
        );
        if pure {
            if let Some(&id) = self.pure.get(&(kind.clone(), width)) {
                return Sig {
                    id,
                    width,
                    module: self.module,
                };
            }
        }
        let id = self.nodes.len() as NodeId;
        if pure {
            self.pure.insert((kind.clone(), width), id);
        }
        self.nodes.push(Node { kind, width });
        Sig {
            id,
            width,
            module: self.module,
        }
    }

    pub(crate) fn kind(&self, s: Sig) -> &NodeKind {
        &self.nodes[s.id as usize].kind
    }

    // ----- constants -----------------------------------------------------------------------

    /// A `width`-bit constant. Panics if `value` does not fit.
    pub(crate) fn lit(&mut self, width: u32, value: u64) -> Sig {
        assert!(
            width >= 64 || value >> width == 0,
            "constant {value:#x} does not fit in {width} bits"
        );
        self.node(NodeKind::Const(value), width)
    }

    /// All zeros.
    pub(crate) fn zero(&mut self, width: u32) -> Sig {
        self.lit(width, 0)
    }

    /// All ones, any width.
    pub(crate) fn ones(&mut self, width: u32) -> Sig {
        if width <= 64 {
            self.lit(width, u64::MAX >> (64 - width))
        } else {
            let one = self.lit(1, 1);
            self.repeat(one, width)
        }
    }

    /// True if `s` is a constant with every bit set (any width).
    pub(crate) fn is_all_ones(&self, s: Sig) -> bool {
        match self.kind(s) {
            NodeKind::Const(v) => s.width <= 64 && *v == u64::MAX >> (64 - s.width),
            NodeKind::Repeat { a, .. } => {
                let a = self.sig(*a);
                self.is_all_ones(a)
            }
            _ => false,
        }
    }

    /// The constant value of `s`, if it is a constant.
    pub(crate) fn const_value(&self, s: Sig) -> Option<u64> {
        match self.kind(s) {
            NodeKind::Const(v) => Some(*v),
            _ => None,
        }
    }

    // ----- bitwise and arithmetic -------------------------------------------------------

    fn same_width(&self, op: &str, a: Sig, b: Sig) {
        assert_eq!(
            a.width, b.width,
            "`{op}` in module `{}` needs equal widths, got {} and {}",
            self.name, a.width, b.width
        );
    }

    fn binary(&mut self, op: BinOp, a: Sig, b: Sig) -> Sig {
        if !op.is_shift() {
            self.same_width(&format!("{op:?}"), a, b);
        }
        if let Some(folded) = self.fold_binary(op, a, b) {
            return folded;
        }
        let width = if op.is_compare() { 1 } else { a.width };
        self.node(NodeKind::Binary(op, a.id, b.id), width)
    }

    /// Constant folding and identities that keep the emitted Verilog free of dead constants.
    fn fold_binary(&mut self, op: BinOp, a: Sig, b: Sig) -> Option<Sig> {
        let w = a.width;
        let (ca, cb) = (self.const_value(a), self.const_value(b));
        if op.is_shift() {
            // A constant shift amount is wiring.
            let n = u32::try_from(cb?).unwrap_or(u32::MAX);
            return Some(match op {
                BinOp::Shl => self.shl_const(a, n),
                BinOp::Shr => self.shr_const(a, n),
                _ => {
                    let n = n.min(w - 1);
                    if n == 0 {
                        a
                    } else {
                        let kept = self.slice(a, w - 1, n);
                        self.sext(kept, w)
                    }
                }
            });
        }
        // Unsigned comparisons decided by a constant at the end of the range (Verilator's lint
        // rejects them as constant): 0 <= x, x < 0, x <= max, max < x. Any width.
        if op == BinOp::Leu && (ca == Some(0) || self.is_all_ones(b)) {
            return Some(self.lit(1, 1));
        }
        if op == BinOp::Ltu && (cb == Some(0) || self.is_all_ones(a)) {
            return Some(self.lit(1, 0));
        }
        if w > 64 {
            return None;
        }
        let mask = u64::MAX >> (64 - w);
        if let (Some(x), Some(y)) = (ca, cb) {
            let sx = ((x << (64 - w)) as i64) >> (64 - w);
            let sy = ((y << (64 - w)) as i64) >> (64 - w);
            let v = match op {
                BinOp::And => x & y,
                BinOp::Or => x | y,
                BinOp::Xor => x ^ y,
                BinOp::Add => x.wrapping_add(y) & mask,
                BinOp::Sub => x.wrapping_sub(y) & mask,
                BinOp::Mul => x.wrapping_mul(y) & mask,
                BinOp::Eq => (x == y) as u64,
                BinOp::Ne => (x != y) as u64,
                BinOp::Ltu => (x < y) as u64,
                BinOp::Leu => (x <= y) as u64,
                BinOp::Lts => (sx < sy) as u64,
                BinOp::Les => (sx <= sy) as u64,
                BinOp::Shl | BinOp::Shr | BinOp::Sra => unreachable!(),
            };
            let width = if op.is_compare() { 1 } else { w };
            return Some(self.lit(width, v));
        }
        // Identities with one constant operand (commutative ones checked both ways).
        let (c, other) = match (ca, cb) {
            (Some(c), None) => (c, b),
            (None, Some(c)) => (c, a),
            _ => return None,
        };
        let const_on_right = cb.is_some();
        match op {
            BinOp::And if c == 0 => Some(self.zero(w)),
            BinOp::And if c == mask => Some(other),
            BinOp::Or if c == 0 => Some(other),
            BinOp::Or if c == mask => Some(self.lit(w, mask)),
            BinOp::Xor if c == 0 => Some(other),
            BinOp::Add if c == 0 => Some(other),
            BinOp::Sub if c == 0 && const_on_right => Some(other),
            _ => None,
        }
    }

    pub(crate) fn not(&mut self, a: Sig) -> Sig {
        self.unary(UnOp::Not, a)
    }

    fn node_parts(&self, s: Sig) -> usize {
        match self.kind(s) {
            NodeKind::Concat(parts) => parts.len(),
            _ => 1,
        }
    }

    fn unary(&mut self, op: UnOp, a: Sig) -> Sig {
        let w = a.width;
        if op != UnOp::Not && w == 1 {
            return a;
        }
        if let (Some(v), true) = (self.const_value(a), w <= 64) {
            let mask = u64::MAX >> (64 - w);
            return match op {
                UnOp::Not => self.lit(w, !v & mask),
                UnOp::RedAnd => self.lit(1, (v == mask) as u64),
                UnOp::RedOr => self.lit(1, (v != 0) as u64),
                UnOp::RedXor => self.lit(1, (v.count_ones() & 1) as u64),
            };
        }
        // A reduction over a concatenation with constant parts: a nonzero part settles an OR,
        // a part with a zero bit settles an AND, and all-zero (OR) or all-one (AND) parts drop.
        if let (UnOp::RedOr | UnOp::RedAnd, NodeKind::Concat(parts)) = (op, self.kind(a).clone()) {
            let parts: Vec<Sig> = parts.iter().map(|&p| self.sig(p)).collect();
            let mut rest = vec![];
            for p in parts {
                match (self.const_value(p), p.width <= 64) {
                    (Some(v), true) => {
                        let full = v == u64::MAX >> (64 - p.width);
                        match op {
                            UnOp::RedOr if v != 0 => return self.lit(1, 1),
                            UnOp::RedAnd if !full => return self.lit(1, 0),
                            _ => {}
                        }
                    }
                    _ => rest.push(p),
                }
            }
            if rest.is_empty() {
                return self.lit(1, (op == UnOp::RedAnd) as u64);
            }
            if rest.len() < self.node_parts(a) {
                let c = self.cat(&rest);
                return self.unary(op, c);
            }
        }
        // ~~x = x
        if let (UnOp::Not, NodeKind::Unary(UnOp::Not, inner)) = (op, self.kind(a)) {
            let id = *inner;
            return self.sig(id);
        }
        let width = if op == UnOp::Not { w } else { 1 };
        self.node(NodeKind::Unary(op, a.id), width)
    }
    pub(crate) fn and(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::And, a, b)
    }
    pub(crate) fn or(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Or, a, b)
    }
    pub(crate) fn xor(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Xor, a, b)
    }

    /// AND of several equal-width values.
    pub(crate) fn and_all(&mut self, xs: &[Sig]) -> Sig {
        self.fold(xs, Self::and)
    }
    /// OR of several equal-width values.
    pub(crate) fn or_all(&mut self, xs: &[Sig]) -> Sig {
        self.fold(xs, Self::or)
    }
    fn fold(&mut self, xs: &[Sig], f: fn(&mut Self, Sig, Sig) -> Sig) -> Sig {
        let (&first, rest) = xs.split_first().expect("fold of no values");
        rest.iter().fold(first, |acc, &x| f(self, acc, x))
    }

    /// `a + b` modulo 2^width.
    pub(crate) fn add(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Add, a, b)
    }
    /// `a - b` modulo 2^width.
    pub(crate) fn sub(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Sub, a, b)
    }
    /// `a + b` with its carry out: returns a value one bit wider than the operands.
    pub(crate) fn add_wide(&mut self, a: Sig, b: Sig) -> Sig {
        self.same_width("add_wide", a, b);
        let w = a.width + 1;
        let a = self.zext(a, w);
        let b = self.zext(b, w);
        self.add(a, b)
    }
    /// Full unsigned product: width `a.width + b.width`.
    pub(crate) fn mul(&mut self, a: Sig, b: Sig) -> Sig {
        let w = a.width + b.width;
        let a = self.zext(a, w);
        let b = self.zext(b, w);
        self.binary(BinOp::Mul, a, b)
    }
    /// The low `width` bits of the unsigned product (operands zero-extended or truncated to
    /// `width` first): an address computation that cannot overflow needs no more.
    pub(crate) fn mul_lo(&mut self, a: Sig, b: Sig, width: u32) -> Sig {
        let fit = |m: &mut Self, x: Sig| {
            if x.width > width {
                // Bits above `width` cannot reach the low `width` bits of the product.
                let high = m.slice(x, x.width - 1, width);
                m.discard(high);
                m.trunc(x, width)
            } else if x.width == width {
                x
            } else {
                m.zext(x, width)
            }
        };
        let a = fit(self, a);
        let b = fit(self, b);
        self.binary(BinOp::Mul, a, b)
    }

    /// Full two's-complement product: width `a.width + b.width`.
    pub(crate) fn mul_signed(&mut self, a: Sig, b: Sig) -> Sig {
        let w = a.width + b.width;
        let a = self.sext(a, w);
        let b = self.sext(b, w);
        self.binary(BinOp::Mul, a, b)
    }

    // ----- comparisons -------------------------------------------------------------------

    pub(crate) fn eq(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Eq, a, b)
    }
    pub(crate) fn ne(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Ne, a, b)
    }
    /// Unsigned `a < b`.
    pub(crate) fn lt(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Ltu, a, b)
    }
    /// Unsigned `a <= b`.
    pub(crate) fn le(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Leu, a, b)
    }
    /// Unsigned `a > b`.
    pub(crate) fn gt(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Ltu, b, a)
    }
    /// Unsigned `a >= b`.
    pub(crate) fn ge(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Leu, b, a)
    }
    /// Signed `a < b`.
    pub(crate) fn lt_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Lts, a, b)
    }
    /// Signed `a <= b`.
    pub(crate) fn le_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Les, a, b)
    }
    /// Signed `a > b`.
    pub(crate) fn gt_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Lts, b, a)
    }
    /// Signed `a >= b`.
    pub(crate) fn ge_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Les, b, a)
    }
    /// Unsigned minimum.
    pub(crate) fn min(&mut self, a: Sig, b: Sig) -> Sig {
        let a_lt = self.lt(a, b);
        self.mux(a_lt, a, b)
    }

    // ----- shifts --------------------------------------------------------------------------

    /// Logical left shift by a variable amount; bits shifted past the top are lost.
    pub(crate) fn shl(&mut self, a: Sig, amount: Sig) -> Sig {
        self.binary(BinOp::Shl, a, amount)
    }
    /// Logical right shift by a variable amount.
    pub(crate) fn shr(&mut self, a: Sig, amount: Sig) -> Sig {
        self.binary(BinOp::Shr, a, amount)
    }
    /// Arithmetic (sign-filling) right shift by a variable amount.
    pub(crate) fn sra(&mut self, a: Sig, amount: Sig) -> Sig {
        self.binary(BinOp::Sra, a, amount)
    }
    /// Left shift by a constant: wiring only.
    pub(crate) fn shl_const(&mut self, a: Sig, n: u32) -> Sig {
        if n == 0 {
            return a;
        }
        if n >= a.width {
            return self.zero(a.width);
        }
        let kept = self.slice(a, a.width - n - 1, 0);
        let zeros = self.zero(n);
        self.cat(&[kept, zeros])
    }
    /// Logical right shift by a constant: wiring only.
    pub(crate) fn shr_const(&mut self, a: Sig, n: u32) -> Sig {
        if n == 0 {
            return a;
        }
        if n >= a.width {
            return self.zero(a.width);
        }
        let kept = self.slice(a, a.width - 1, n);
        self.zext(kept, a.width)
    }

    // ----- structure -----------------------------------------------------------------------

    /// Concatenation, most significant part first.
    pub(crate) fn cat(&mut self, parts: &[Sig]) -> Sig {
        assert!(!parts.is_empty(), "empty concatenation");
        if parts.len() == 1 {
            return parts[0];
        }
        let width = parts.iter().map(|p| p.width).sum();
        if width <= 64 {
            let values: Option<Vec<u64>> = parts.iter().map(|&p| self.const_value(p)).collect();
            if let Some(values) = values {
                let v = parts
                    .iter()
                    .zip(values)
                    .fold(0u64, |acc, (p, v)| (acc << p.width) | v);
                return self.lit(width, v);
            }
        }
        self.node(
            NodeKind::Concat(parts.iter().map(|p| p.id).collect()),
            width,
        )
    }

    /// Bits `hi..=lo` of `a`.
    ///
    /// Slices are pushed through concatenations, repeats, muxes and bitwise operators (which
    /// costs no logic: those work bit by bit), so a slice only ever reads a value that needs a
    /// wire anyway, and no wire is left with bits nobody reads.
    pub(crate) fn slice(&mut self, a: Sig, hi: u32, lo: u32) -> Sig {
        assert!(
            hi >= lo && hi < a.width,
            "slice [{hi}:{lo}] out of range for a {}-bit value in `{}`",
            a.width,
            self.name
        );
        let width = hi - lo + 1;
        if width == a.width {
            return a;
        }
        match self.kind(a).clone() {
            NodeKind::Const(v) => {
                let v = if lo >= 64 { 0 } else { v >> lo };
                let v = if width >= 64 {
                    v
                } else {
                    v & ((1u64 << width) - 1)
                };
                self.lit(width, v)
            }
            NodeKind::Slice { a: inner, lo: l2 } => {
                let inner = self.sig(inner);
                self.slice(inner, hi + l2, lo + l2)
            }
            NodeKind::Concat(parts) => {
                let parts: Vec<Sig> = parts.iter().map(|&p| self.sig(p)).collect();
                self.slice_parts(&parts, hi, lo)
            }
            NodeKind::Repeat { a: inner, n } => {
                let parts = vec![self.sig(inner); n as usize];
                self.slice_parts(&parts, hi, lo)
            }
            NodeKind::Mux { sel, t, f } => {
                let (sel, t, f) = (self.sig(sel), self.sig(t), self.sig(f));
                let t = self.slice(t, hi, lo);
                let f = self.slice(f, hi, lo);
                self.mux(sel, t, f)
            }
            NodeKind::Unary(UnOp::Not, x) => {
                let x = self.sig(x);
                let x = self.slice(x, hi, lo);
                self.not(x)
            }
            NodeKind::Binary(op @ (BinOp::And | BinOp::Or | BinOp::Xor), x, y) => {
                let x = self.sig(x);
                let y = self.sig(y);
                let x = self.slice(x, hi, lo);
                let y = self.slice(y, hi, lo);
                self.binary(op, x, y)
            }
            _ => self.node(NodeKind::Slice { a: a.id, lo }, width),
        }
    }

    /// Bits `hi..=lo` of the concatenation of `parts` (most significant first).
    fn slice_parts(&mut self, parts: &[Sig], hi: u32, lo: u32) -> Sig {
        let mut top: u32 = parts.iter().map(|p| p.width).sum();
        let mut pieces = vec![];
        for &p in parts {
            let bottom = top - p.width;
            if hi >= bottom && lo < top {
                let h = hi.min(top - 1) - bottom;
                let l = lo.max(bottom) - bottom;
                pieces.push(self.slice(p, h, l));
            }
            top = bottom;
        }
        self.cat(&pieces)
    }

    /// Bit `i` of `a`.
    pub(crate) fn bit(&mut self, a: Sig, i: u32) -> Sig {
        self.slice(a, i, i)
    }

    /// The most significant bit.
    pub(crate) fn msb(&mut self, a: Sig) -> Sig {
        self.bit(a, a.width - 1)
    }

    /// `a` repeated `n` times.
    pub(crate) fn repeat(&mut self, a: Sig, n: u32) -> Sig {
        assert!(n > 0, "repeat count must be positive");
        if n == 1 {
            return a;
        }
        self.node(NodeKind::Repeat { a: a.id, n }, a.width * n)
    }

    /// Zero-extends `a` to `width` bits.
    pub(crate) fn zext(&mut self, a: Sig, width: u32) -> Sig {
        assert!(width >= a.width, "zext to a narrower width");
        if width == a.width {
            return a;
        }
        if let Some(v) = self.const_value(a) {
            if width <= 64 {
                return self.lit(width, v);
            }
        }
        let z = self.zero(width - a.width);
        self.cat(&[z, a])
    }

    /// Sign-extends `a` to `width` bits.
    pub(crate) fn sext(&mut self, a: Sig, width: u32) -> Sig {
        assert!(width >= a.width, "sext to a narrower width");
        if width == a.width {
            return a;
        }
        let s = self.msb(a);
        let ext = self.repeat(s, width - a.width);
        self.cat(&[ext, a])
    }

    /// The low `width` bits of `a`.
    pub(crate) fn trunc(&mut self, a: Sig, width: u32) -> Sig {
        self.slice(a, width - 1, 0)
    }

    /// `sel ? t : f`.
    pub(crate) fn mux(&mut self, sel: Sig, t: Sig, f: Sig) -> Sig {
        assert_eq!(sel.width, 1, "mux select must be one bit");
        self.same_width("mux", t, f);
        if t == f {
            return t;
        }
        match self.const_value(sel) {
            Some(1) => t,
            Some(_) => f,
            None => self.node(
                NodeKind::Mux {
                    sel: sel.id,
                    t: t.id,
                    f: f.id,
                },
                t.width,
            ),
        }
    }

    /// `choices[index]`, a balanced tree of 2:1 muxes; an index past the end selects one of the
    /// choices (which one is unspecified).
    pub(crate) fn mux_index(&mut self, index: Sig, choices: &[Sig]) -> Sig {
        assert!(!choices.is_empty(), "mux_index with no choices");
        // Index bits that select nothing (one choice, or more bits than choices need) are
        // intentionally unread.
        if choices.len() == 1 {
            self.discard(index);
        } else {
            let need = bits_for(choices.len() as u64 - 1);
            if index.width > need {
                let high = self.slice(index, index.width - 1, need);
                self.discard(high);
            }
        }
        self.mux_tree(index, 0, choices)
    }

    fn mux_tree(&mut self, index: Sig, level: u32, choices: &[Sig]) -> Sig {
        if choices.len() == 1 || level >= index.width {
            return choices[0];
        }
        // Split on bit `level`: even indices vs odd indices.
        let even: Vec<Sig> = choices.iter().step_by(2).copied().collect();
        let odd: Vec<Sig> = choices.iter().skip(1).step_by(2).copied().collect();
        let e = self.mux_tree(index, level + 1, &even);
        let o = if odd.is_empty() {
            e
        } else {
            self.mux_tree(index, level + 1, &odd)
        };
        let b = self.bit(index, level);
        self.mux(b, o, e)
    }

    /// Declares that the bits of `value` are intentionally not used (for instance the top of a
    /// right shift known to be zero). Every other unread bit is an error at emission time.
    pub(crate) fn discard(&mut self, value: Sig) {
        self.discards.push(value.id);
    }

    // ----- reductions ------------------------------------------------------------------

    /// OR of all bits.
    pub(crate) fn any(&mut self, a: Sig) -> Sig {
        self.unary(UnOp::RedOr, a)
    }
    /// AND of all bits.
    pub(crate) fn all(&mut self, a: Sig) -> Sig {
        self.unary(UnOp::RedAnd, a)
    }
    /// XOR of all bits.
    pub(crate) fn parity(&mut self, a: Sig) -> Sig {
        self.unary(UnOp::RedXor, a)
    }
    /// True when every bit is zero.
    pub(crate) fn is_zero(&mut self, a: Sig) -> Sig {
        let any = self.any(a);
        self.not(any)
    }
}

#[cfg(test)]
mod tests {
    use crate::{cat, mux, Design, Sig};

    /// Builds a one-input module and hands its input to `f`, which returns the output.
    fn one_input(width: u32, f: impl FnOnce(Sig) -> Sig) -> u32 {
        let mut d = Design::new();
        let mut out_width = 0;
        d.define("t", |_, m| {
            let x = m.input("x", width);
            let y = f(x);
            out_width = y.width();
            m.output("y", y);
        });
        out_width
    }

    #[test]
    fn a_constant_operand_takes_the_other_operands_width() {
        assert_eq!(one_input(8, |x| x + 1), 8);
        assert_eq!(one_input(8, |x| x.eq(3)), 1);
        assert_eq!(one_input(8, |x| (x & 0x0F).slice(3, 0)), 4);
        assert_eq!(one_input(8, |x| cat(&[x, !x]) >> 4u32), 16);
        assert_eq!(one_input(8, |x| mux(x.msb(), x, x - 1).zext(12)), 12);
        assert_eq!(one_input(8, |x| x.resize(3)), 3);
        assert_eq!(one_input(8, |x| x.resize(12)), 12);
    }

    #[test]
    #[should_panic(expected = "does not fit in 8 bits")]
    fn a_constant_that_does_not_fit_is_a_generator_bug() {
        one_input(8, |x| x + 300);
    }

    #[test]
    #[should_panic(expected = "needs equal widths")]
    fn operands_of_unequal_width_are_a_generator_bug() {
        one_input(8, |x| x & x.slice(3, 0));
    }

    #[test]
    #[should_panic(expected = "signals of `outer` and `inner` combined")]
    fn signals_of_two_modules_do_not_mix() {
        let mut d = Design::new();
        d.define("outer", |d, m| {
            let x = m.input("x", 4);
            d.define("inner", |_, c| {
                let y = c.input("y", 4);
                c.output("z", x & y);
            });
            m.output("w", x);
        });
    }

    #[test]
    #[should_panic(expected = "a signal of a module that is finished")]
    fn a_signal_does_not_outlive_its_module() {
        let mut d = Design::new();
        let mut kept = None;
        d.define("gone", |_, m| {
            let x = m.input("x", 4);
            kept = Some(x);
            m.output("y", x);
        });
        let _ = !kept.unwrap();
    }
}
