//! [`ModuleBuilder`]: builds one module's logic with ordinary Rust calls.
//!
//! Width rules are checked as nodes are created; a violation is a generator bug and panics with
//! the operator and the widths involved. Small constant folds (slices of constants, slices of
//! slices, muxes with a constant select) keep the emitted Verilog short.

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Result};

use crate::ir::*;

/// A register being built: its output value `q` and its index.
#[derive(Clone, Copy, Debug)]
pub struct RegHandle {
    pub q: Sig,
    index: usize,
}

/// A memory being built.
#[derive(Clone, Copy, Debug)]
pub struct MemHandle {
    index: usize,
    pub depth: u32,
    pub width: u32,
    pub addr_width: u32,
}

/// The outputs of an instance, by port name.
#[derive(Clone, Debug)]
pub struct InstOutputs {
    instance: String,
    outputs: HashMap<String, Sig>,
}

impl InstOutputs {
    /// The output called `port`. Panics (a generator bug) if the child has no such output.
    pub fn get(&self, port: &str) -> Sig {
        *self
            .outputs
            .get(port)
            .unwrap_or_else(|| panic!("instance `{}` has no output `{port}`", self.instance))
    }
}

/// Builds one module. Obtained from [`Design::define`].
pub struct ModuleBuilder {
    name: String,
    doc: String,
    ports: Vec<Port>,
    nodes: Vec<Node>,
    nets: Vec<Net>,
    regs: Vec<Reg>,
    mems: Vec<Memory>,
    insts: Vec<Instance>,
    discards: Vec<NodeId>,
    assertions: Vec<(String, NodeId, String)>,
    hints: HashMap<NodeId, String>,
    names: HashSet<String>,
    latency: u32,
    child_clk: bool,
    child_rst: bool,
    /// Hash-consing: every pure node is created once, so equal expressions share a node.
    pure: HashMap<(NodeKind, u32), NodeId>,
}

/// Checks a pipelined block's latency against the most it supports.
pub fn check_latency(block: &str, latency: u32, max: u32) -> Result<()> {
    if latency > max {
        bail!(
            "{block} latency {latency} is not supported: choose {}",
            (0..=max)
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// Bits needed to count `0..=n`.
pub fn bits_for(n: u64) -> u32 {
    (64 - n.leading_zeros()).max(1)
}

/// Bits needed to address `depth` entries (at least 1).
pub fn addr_bits(depth: u32) -> u32 {
    bits_for(depth.saturating_sub(1) as u64)
}

impl ModuleBuilder {
    pub(crate) fn new(name: &str) -> Self {
        assert!(
            is_valid_identifier(name),
            "module name `{name}` is not a legal Verilog identifier"
        );
        let mut names = HashSet::new();
        names.insert("clk".to_string());
        names.insert("rst".to_string());
        ModuleBuilder {
            name: name.to_string(),
            doc: String::new(),
            ports: vec![],
            nodes: vec![],
            nets: vec![],
            regs: vec![],
            mems: vec![],
            insts: vec![],
            discards: vec![],
            assertions: vec![],
            hints: HashMap::new(),
            names,
            latency: 0,
            child_clk: false,
            child_rst: false,
            pure: HashMap::new(),
        }
    }

    /// The module's name.
    pub fn module_name(&self) -> &str {
        &self.name
    }

    /// Sets the doc comment emitted above the module: its contract.
    pub fn doc(&mut self, text: &str) {
        self.doc = text.trim().to_string();
    }

    /// Declares the module's latency in cycles (0 = combinational), reported in the manifest.
    pub fn set_latency(&mut self, cycles: u32) {
        self.latency = cycles;
    }

    fn node(&mut self, kind: NodeKind, width: u32) -> Sig {
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
                return Sig { id, width };
            }
        }
        let id = self.nodes.len() as NodeId;
        if pure {
            self.pure.insert((kind.clone(), width), id);
        }
        self.nodes.push(Node { kind, width });
        Sig { id, width }
    }

    fn kind(&self, s: Sig) -> &NodeKind {
        &self.nodes[s.id as usize].kind
    }

    /// Reserves a unique identifier based on `base` (suffixing `_1`, `_2`, ... on clashes).
    fn unique(&mut self, base: &str) -> String {
        let base = if is_valid_identifier(base) {
            base.to_string()
        } else {
            format!("{base}_n")
        };
        assert!(
            is_valid_identifier(&base),
            "`{base}` cannot be made a Verilog identifier"
        );
        let mut name = base.clone();
        let mut i = 1;
        while !self.names.insert(name.clone()) {
            name = format!("{base}_{i}");
            i += 1;
        }
        name
    }

    fn reserve_exact(&mut self, name: &str, what: &str) {
        assert!(
            is_valid_identifier(name),
            "{what} name `{name}` is not a legal Verilog identifier or is reserved"
        );
        assert!(
            self.names.insert(name.to_string()),
            "{what} name `{name}` is used twice in module `{}`",
            self.name
        );
    }

    // ----- ports ---------------------------------------------------------------------------

    /// Declares an input port.
    pub fn input(&mut self, name: &str, width: u32) -> Sig {
        self.reserve_exact(name, "port");
        let idx = self.ports.len();
        self.ports.push(Port {
            name: name.to_string(),
            dir: Dir::Input,
            width,
            driver: None,
        });
        self.node(NodeKind::Input(idx), width)
    }

    /// Declares an output port driven by `value`.
    pub fn output(&mut self, name: &str, value: Sig) {
        self.reserve_exact(name, "port");
        self.ports.push(Port {
            name: name.to_string(),
            dir: Dir::Output,
            width: value.width,
            driver: Some(value.id),
        });
    }

    // ----- constants -----------------------------------------------------------------------

    /// A `width`-bit constant. Panics if `value` does not fit.
    pub fn lit(&mut self, width: u32, value: u64) -> Sig {
        assert!(
            width >= 64 || value >> width == 0,
            "constant {value:#x} does not fit in {width} bits"
        );
        self.node(NodeKind::Const(value), width)
    }

    /// All zeros.
    pub fn zero(&mut self, width: u32) -> Sig {
        self.lit(width, 0)
    }

    /// All ones, any width.
    pub fn ones(&mut self, width: u32) -> Sig {
        if width <= 64 {
            self.lit(width, u64::MAX >> (64 - width))
        } else {
            let one = self.lit(1, 1);
            self.repeat(one, width)
        }
    }

    /// True if `s` is a constant with every bit set (any width).
    pub fn is_all_ones(&self, s: Sig) -> bool {
        match self.kind(s) {
            NodeKind::Const(v) => s.width <= 64 && *v == u64::MAX >> (64 - s.width),
            NodeKind::Repeat { a, .. } => {
                let a = Sig {
                    id: *a,
                    width: self.nodes[*a as usize].width,
                };
                self.is_all_ones(a)
            }
            _ => false,
        }
    }

    /// The constant value of `s`, if it is a constant.
    pub fn const_value(&self, s: Sig) -> Option<u64> {
        match self.kind(s) {
            NodeKind::Const(v) => Some(*v),
            _ => None,
        }
    }

    // ----- naming --------------------------------------------------------------------------

    /// Gives `value` a name: a net that appears in the Verilog and in waveforms. Returns the net.
    pub fn name(&mut self, name: &str, value: Sig) -> Sig {
        let name = self.unique(name);
        let idx = self.nets.len();
        self.nets.push(Net {
            name,
            width: value.width,
            driver: Some(value.id),
        });
        self.node(NodeKind::Net(idx), value.width)
    }

    /// Suggests a name for `value` without creating a net: if the emitter gives the value a
    /// wire of its own (it is shared, or sliced), the wire gets this name; if the value is used
    /// once and printed inline, or never used, nothing is emitted. Helpers use hints to name
    /// everything they compute without leaving unread nets behind. The first hint wins.
    pub fn hint(&mut self, name: &str, value: Sig) -> Sig {
        if is_valid_identifier(name) && self.const_value(value).is_none() {
            self.hints
                .entry(value.id)
                .or_insert_with(|| name.to_string());
        }
        value
    }

    /// Declares a net to be driven later with [`ModuleBuilder::drive`] (for values needed before
    /// they can be computed).
    pub fn net(&mut self, name: &str, width: u32) -> Sig {
        let name = self.unique(name);
        let idx = self.nets.len();
        self.nets.push(Net {
            name,
            width,
            driver: None,
        });
        self.node(NodeKind::Net(idx), width)
    }

    /// Drives a net declared with [`ModuleBuilder::net`].
    pub fn drive(&mut self, net: Sig, value: Sig) {
        let NodeKind::Net(idx) = *self.kind(net) else {
            panic!("drive: target is not a net");
        };
        let n = &mut self.nets[idx];
        assert!(n.driver.is_none(), "net `{}` is driven twice", n.name);
        assert_eq!(
            n.width, value.width,
            "net `{}` has width {} but its driver has width {}",
            n.name, n.width, value.width
        );
        n.driver = Some(value.id);
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

    pub fn not(&mut self, a: Sig) -> Sig {
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
            let parts: Vec<Sig> = parts
                .iter()
                .map(|&p| Sig {
                    id: p,
                    width: self.nodes[p as usize].width,
                })
                .collect();
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
            return Sig { id, width: w };
        }
        let width = if op == UnOp::Not { w } else { 1 };
        self.node(NodeKind::Unary(op, a.id), width)
    }
    pub fn and(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::And, a, b)
    }
    pub fn or(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Or, a, b)
    }
    pub fn xor(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Xor, a, b)
    }
    /// `a & !b`.
    pub fn and_not(&mut self, a: Sig, b: Sig) -> Sig {
        let nb = self.not(b);
        self.and(a, nb)
    }

    /// AND of several equal-width values.
    pub fn and_all(&mut self, xs: &[Sig]) -> Sig {
        self.fold(xs, Self::and)
    }
    /// OR of several equal-width values.
    pub fn or_all(&mut self, xs: &[Sig]) -> Sig {
        self.fold(xs, Self::or)
    }
    fn fold(&mut self, xs: &[Sig], f: fn(&mut Self, Sig, Sig) -> Sig) -> Sig {
        let (&first, rest) = xs.split_first().expect("fold of no values");
        rest.iter().fold(first, |acc, &x| f(self, acc, x))
    }

    /// `a + b` modulo 2^width.
    pub fn add(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Add, a, b)
    }
    /// `a - b` modulo 2^width.
    pub fn sub(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Sub, a, b)
    }
    /// `a + b` with its carry out: returns a value one bit wider than the operands.
    pub fn add_wide(&mut self, a: Sig, b: Sig) -> Sig {
        self.same_width("add_wide", a, b);
        let w = a.width + 1;
        let a = self.zext(a, w);
        let b = self.zext(b, w);
        self.add(a, b)
    }
    /// The sum of `values`, each zero-extended to `width` bits, modulo 2^width (a population
    /// count when they are single bits).
    pub fn sum(&mut self, values: &[Sig], width: u32) -> Sig {
        let mut acc = self.zero(width);
        for &v in values {
            let x = self.zext(v, width);
            acc = self.add(acc, x);
        }
        acc
    }

    /// `a + k` for a constant `k`, modulo 2^width.
    pub fn add_lit(&mut self, a: Sig, k: u64) -> Sig {
        let k = self.lit(a.width, k);
        self.add(a, k)
    }
    /// `a - k` for a constant `k`, modulo 2^width.
    pub fn sub_lit(&mut self, a: Sig, k: u64) -> Sig {
        let k = self.lit(a.width, k);
        self.sub(a, k)
    }
    /// Full unsigned product: width `a.width + b.width`.
    pub fn mul(&mut self, a: Sig, b: Sig) -> Sig {
        let w = a.width + b.width;
        let a = self.zext(a, w);
        let b = self.zext(b, w);
        self.binary(BinOp::Mul, a, b)
    }
    /// The low `width` bits of the unsigned product (operands zero-extended or truncated to
    /// `width` first): an address computation that cannot overflow needs no more.
    pub fn mul_lo(&mut self, a: Sig, b: Sig, width: u32) -> Sig {
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
    pub fn mul_signed(&mut self, a: Sig, b: Sig) -> Sig {
        let w = a.width + b.width;
        let a = self.sext(a, w);
        let b = self.sext(b, w);
        self.binary(BinOp::Mul, a, b)
    }

    // ----- comparisons -------------------------------------------------------------------

    pub fn eq(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Eq, a, b)
    }
    pub fn ne(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Ne, a, b)
    }
    /// `a == k` for a constant `k`.
    pub fn eq_lit(&mut self, a: Sig, k: u64) -> Sig {
        let k = self.lit(a.width, k);
        self.eq(a, k)
    }
    /// Unsigned `a < b`.
    pub fn lt(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Ltu, a, b)
    }
    /// Unsigned `a <= b`.
    pub fn le(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Leu, a, b)
    }
    /// Unsigned `a > b`.
    pub fn gt(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Ltu, b, a)
    }
    /// Unsigned `a >= b`.
    pub fn ge(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Leu, b, a)
    }
    /// Signed `a < b`.
    pub fn lt_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Lts, a, b)
    }
    /// Signed `a <= b`.
    pub fn le_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Les, a, b)
    }
    /// Signed `a > b`.
    pub fn gt_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Lts, b, a)
    }
    /// Signed `a >= b`.
    pub fn ge_signed(&mut self, a: Sig, b: Sig) -> Sig {
        self.binary(BinOp::Les, b, a)
    }
    /// Unsigned minimum.
    pub fn min(&mut self, a: Sig, b: Sig) -> Sig {
        let a_lt = self.lt(a, b);
        self.mux(a_lt, a, b)
    }

    // ----- shifts --------------------------------------------------------------------------

    /// Logical left shift by a variable amount; bits shifted past the top are lost.
    pub fn shl(&mut self, a: Sig, amount: Sig) -> Sig {
        self.binary(BinOp::Shl, a, amount)
    }
    /// Logical right shift by a variable amount.
    pub fn shr(&mut self, a: Sig, amount: Sig) -> Sig {
        self.binary(BinOp::Shr, a, amount)
    }
    /// Arithmetic (sign-filling) right shift by a variable amount.
    pub fn sra(&mut self, a: Sig, amount: Sig) -> Sig {
        self.binary(BinOp::Sra, a, amount)
    }
    /// Left shift by a constant: wiring only.
    pub fn shl_const(&mut self, a: Sig, n: u32) -> Sig {
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
    pub fn shr_const(&mut self, a: Sig, n: u32) -> Sig {
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
    pub fn cat(&mut self, parts: &[Sig]) -> Sig {
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
    pub fn slice(&mut self, a: Sig, hi: u32, lo: u32) -> Sig {
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
        let sig = |id: NodeId, nodes: &Vec<Node>| Sig {
            id,
            width: nodes[id as usize].width,
        };
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
                let inner = sig(inner, &self.nodes);
                self.slice(inner, hi + l2, lo + l2)
            }
            NodeKind::Concat(parts) => {
                let parts: Vec<Sig> = parts.iter().map(|&p| sig(p, &self.nodes)).collect();
                self.slice_parts(&parts, hi, lo)
            }
            NodeKind::Repeat { a: inner, n } => {
                let parts = vec![sig(inner, &self.nodes); n as usize];
                self.slice_parts(&parts, hi, lo)
            }
            NodeKind::Mux { sel, t, f } => {
                let (sel, t, f) = (
                    sig(sel, &self.nodes),
                    sig(t, &self.nodes),
                    sig(f, &self.nodes),
                );
                let t = self.slice(t, hi, lo);
                let f = self.slice(f, hi, lo);
                self.mux(sel, t, f)
            }
            NodeKind::Unary(UnOp::Not, x) => {
                let x = sig(x, &self.nodes);
                let x = self.slice(x, hi, lo);
                self.not(x)
            }
            NodeKind::Binary(op @ (BinOp::And | BinOp::Or | BinOp::Xor), x, y) => {
                let x = sig(x, &self.nodes);
                let y = sig(y, &self.nodes);
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
    pub fn bit(&mut self, a: Sig, i: u32) -> Sig {
        self.slice(a, i, i)
    }

    /// The most significant bit.
    pub fn msb(&mut self, a: Sig) -> Sig {
        self.bit(a, a.width - 1)
    }

    /// `a` repeated `n` times.
    pub fn repeat(&mut self, a: Sig, n: u32) -> Sig {
        assert!(n > 0, "repeat count must be positive");
        if n == 1 {
            return a;
        }
        self.node(NodeKind::Repeat { a: a.id, n }, a.width * n)
    }

    /// Zero-extends `a` to `width` bits.
    pub fn zext(&mut self, a: Sig, width: u32) -> Sig {
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
    pub fn sext(&mut self, a: Sig, width: u32) -> Sig {
        assert!(width >= a.width, "sext to a narrower width");
        if width == a.width {
            return a;
        }
        let s = self.msb(a);
        let ext = self.repeat(s, width - a.width);
        self.cat(&[ext, a])
    }

    /// The low `width` bits of `a`.
    pub fn trunc(&mut self, a: Sig, width: u32) -> Sig {
        self.slice(a, width - 1, 0)
    }

    /// `sel ? t : f`.
    pub fn mux(&mut self, sel: Sig, t: Sig, f: Sig) -> Sig {
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
    pub fn mux_index(&mut self, index: Sig, choices: &[Sig]) -> Sig {
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
    pub fn discard(&mut self, value: Sig) {
        self.names.insert("unused".to_string());
        self.discards.push(value.id);
    }

    /// A simulation-only check: `holds` must be 1 at every clock edge outside reset, else the
    /// simulator reports `regflash assertion `name` failed: message`. Emitted under
    /// `ifdef REGFLASH_ASSERTIONS` (regflash's Verilator builds define it; synthesis does not).
    /// Signals read only by assertions are rejected at emission: they would be unused in
    /// synthesis.
    pub fn assert_always(&mut self, name: &str, holds: Sig, message: &str) {
        assert_eq!(holds.width, 1, "an assertion's condition is one bit");
        assert!(
            is_valid_identifier(name) && !message.contains('"') && !message.contains('\\'),
            "assertion names are identifiers and messages plain text"
        );
        self.assertions
            .push((name.to_string(), holds.id, message.to_string()));
    }

    // ----- reductions ------------------------------------------------------------------

    /// OR of all bits.
    pub fn any(&mut self, a: Sig) -> Sig {
        self.unary(UnOp::RedOr, a)
    }
    /// AND of all bits.
    pub fn all(&mut self, a: Sig) -> Sig {
        self.unary(UnOp::RedAnd, a)
    }
    /// XOR of all bits.
    pub fn parity(&mut self, a: Sig) -> Sig {
        self.unary(UnOp::RedXor, a)
    }
    /// True when every bit is zero.
    pub fn is_zero(&mut self, a: Sig) -> Sig {
        let any = self.any(a);
        self.not(any)
    }

    // ----- state ---------------------------------------------------------------------------

    /// A register named `name` (the Verilog name gets a `_q` suffix). `reset` is the value a
    /// synchronous reset loads (`None`: no reset). Set its input with [`ModuleBuilder::set_next`].
    pub fn reg(&mut self, name: &str, width: u32, reset: Option<u64>) -> RegHandle {
        let name = self.unique(&format!("{name}_q"));
        let index = self.regs.len();
        self.regs.push(Reg {
            name,
            width,
            reset,
            next: None,
            enable: None,
        });
        let q = self.node(NodeKind::Reg(index), width);
        RegHandle { q, index }
    }

    /// Sets what a register loads at the next clock edge.
    pub fn set_next(&mut self, r: RegHandle, d: Sig) {
        let reg = &mut self.regs[r.index];
        assert!(reg.next.is_none(), "register `{}` has two inputs", reg.name);
        assert_eq!(
            reg.width, d.width,
            "register `{}` has width {}, its input {}",
            reg.name, reg.width, d.width
        );
        reg.next = Some(d.id);
    }

    /// Makes a register load only when `en` is high.
    pub fn set_enable(&mut self, r: RegHandle, en: Sig) {
        assert_eq!(en.width, 1, "register enable must be one bit");
        let reg = &mut self.regs[r.index];
        assert!(
            reg.enable.is_none(),
            "register `{}` has two enables",
            reg.name
        );
        reg.enable = Some(en.id);
    }

    /// `d` delayed by one cycle through a register that resets to 0.
    pub fn delay(&mut self, name: &str, d: Sig) -> Sig {
        let r = self.reg(name, d.width, Some(0));
        self.set_next(r, d);
        r.q
    }

    /// A register (reset to 0) that loads `d` in cycles where `enable` is high and holds
    /// otherwise. Returns its output.
    pub fn hold(&mut self, name: &str, d: Sig, enable: Sig) -> Sig {
        let r = self.reg(name, d.width, Some(0));
        self.set_next(r, d);
        self.set_enable(r, enable);
        r.q
    }

    /// `d` delayed by `n` cycles (registers reset to 0); `n = 0` returns `d`.
    pub fn delay_n(&mut self, name: &str, d: Sig, n: u32) -> Sig {
        (0..n).fold(d, |v, i| self.delay(&format!("{name}_d{}", i + 1), v))
    }

    /// A pipeline cut: `d` registered when `enabled`, passed through otherwise. Used at the stage
    /// boundaries of pipelined blocks, so one build function serves every latency.
    pub fn stage(&mut self, name: &str, d: Sig, enabled: bool) -> Sig {
        if enabled {
            self.delay(name, d)
        } else {
            d
        }
    }

    /// A memory of `depth` words of `width` bits (no reset).
    pub fn memory(&mut self, name: &str, depth: u32, width: u32) -> MemHandle {
        let name = self.unique(name);
        let index = self.mems.len();
        self.mems.push(Memory {
            name,
            depth,
            width,
            writes: vec![],
        });
        MemHandle {
            index,
            depth,
            width,
            addr_width: addr_bits(depth),
        }
    }

    /// Asynchronous read of `mem` at `addr`.
    pub fn mem_read(&mut self, mem: MemHandle, addr: Sig) -> Sig {
        assert_eq!(
            addr.width, mem.addr_width,
            "memory read address must have {} bits",
            mem.addr_width
        );
        self.node(
            NodeKind::MemRead {
                mem: mem.index,
                addr: addr.id,
            },
            mem.width,
        )
    }

    /// A synchronous write port: when `enable`, `mem[addr] <= data` at the clock edge.
    pub fn mem_write(&mut self, mem: MemHandle, enable: Sig, addr: Sig, data: Sig) {
        assert_eq!(enable.width, 1, "memory write enable must be one bit");
        assert_eq!(
            addr.width, mem.addr_width,
            "memory write address must have {} bits",
            mem.addr_width
        );
        assert_eq!(data.width, mem.width, "memory write data width");
        self.mems[mem.index].writes.push(MemWrite {
            enable: enable.id,
            addr: addr.id,
            data: data.id,
        });
    }

    // ----- hierarchy -----------------------------------------------------------------------

    /// Instantiates `module` as `name`, connecting every data input by name. Clock and reset are
    /// connected automatically. Returns the instance's outputs.
    pub fn instance(&mut self, module: &ModRef, name: &str, inputs: &[(&str, Sig)]) -> InstOutputs {
        self.instance_inner(module, name, inputs, None)
    }

    /// `rst | x`: this module's reset, or `x` (one bit): a reset for a child that also clears
    /// on `x`.
    pub fn rst_or(&mut self, x: Sig) -> Sig {
        let rst = self.node(NodeKind::Reset, 1);
        self.or(rst, x)
    }

    /// [`ModuleBuilder::instance`], with the instance's `rst` driven by `reset` (one bit, a
    /// synchronous reset) instead of this module's `rst`.
    pub fn instance_with_reset(
        &mut self,
        module: &ModRef,
        name: &str,
        inputs: &[(&str, Sig)],
        reset: Sig,
    ) -> InstOutputs {
        assert_eq!(reset.width, 1, "a reset is one bit");
        assert!(module.has_rst, "`{}` has no reset to drive", module.name);
        self.instance_inner(module, name, inputs, Some(reset))
    }

    fn instance_inner(
        &mut self,
        module: &ModRef,
        name: &str,
        inputs: &[(&str, Sig)],
        reset: Option<Sig>,
    ) -> InstOutputs {
        let inst_name = self.unique(name);
        let index = self.insts.len();
        let mut in_nodes = vec![];
        for p in module.ports.iter().filter(|p| p.dir == Dir::Input) {
            let (_, s) = inputs
                .iter()
                .find(|(n, _)| *n == p.name)
                .unwrap_or_else(|| {
                    panic!(
                        "instance `{inst_name}` of `{}`: input `{}` is not connected",
                        module.name, p.name
                    )
                });
            assert_eq!(
                s.width, p.width,
                "instance `{inst_name}` of `{}`: input `{}` has width {} but is driven with {}",
                module.name, p.name, p.width, s.width
            );
            in_nodes.push(s.id);
        }
        for (n, _) in inputs {
            assert!(
                module
                    .ports
                    .iter()
                    .any(|p| p.name == *n && p.dir == Dir::Input),
                "instance `{inst_name}` of `{}` has no input `{n}`",
                module.name
            );
        }
        let mut outputs = HashMap::new();
        let mut out_nodes = vec![];
        for (pi, p) in module
            .ports
            .iter()
            .filter(|p| p.dir == Dir::Output)
            .enumerate()
        {
            let s = self.node(
                NodeKind::InstOut {
                    inst: index,
                    port: pi,
                },
                p.width,
            );
            // Reserve the wire name the emitter gives this output.
            self.unique(&format!("{inst_name}_{}", p.name));
            outputs.insert(p.name.clone(), s);
            out_nodes.push(s.id);
        }
        self.child_clk |= module.has_clk;
        self.child_rst |= module.has_rst;
        self.insts.push(Instance {
            name: inst_name.clone(),
            module: module.clone(),
            inputs: in_nodes,
            outputs: out_nodes,
            reset: reset.map(|r| r.id),
        });
        InstOutputs {
            instance: inst_name,
            outputs,
        }
    }

    // ----- finishing -----------------------------------------------------------------------

    pub(crate) fn finish(self) -> Result<Module> {
        for n in &self.nets {
            if n.driver.is_none() {
                bail!("net `{}` is never driven", n.name);
            }
        }
        for r in &self.regs {
            if r.next.is_none() {
                bail!("register `{}` has no input", r.name);
            }
        }
        if !self.ports.iter().any(|p| p.dir == Dir::Output) {
            bail!("module has no outputs");
        }
        if !self.assertions.is_empty()
            && self.regs.iter().all(|r| r.reset.is_none())
            && !self.child_rst
        {
            bail!("a module with assertions needs a reset (they are checked outside reset)");
        }
        let has_state =
            !self.regs.is_empty() || !self.mems.is_empty() || !self.assertions.is_empty();
        let reads_rst = self.nodes.iter().any(|n| n.kind == NodeKind::Reset);
        let has_rst = self.child_rst || reads_rst || self.regs.iter().any(|r| r.reset.is_some());
        let module = Module {
            name: self.name,
            doc: self.doc,
            ports: self.ports,
            nodes: self.nodes,
            nets: self.nets,
            regs: self.regs,
            mems: self.mems,
            insts: self.insts,
            discards: self.discards,
            assertions: self.assertions,
            hints: self.hints,
            has_clk: has_state || self.child_clk,
            has_rst,
            latency: self.latency,
            names: self.names,
        };
        check_combinational_loops(&module)?;
        Ok(module)
    }
}

/// Rejects combinational cycles through named nets (the only way the builder can form one).
fn check_combinational_loops(m: &Module) -> Result<()> {
    // Node ids are created in order, so every operand edge points to an older node except
    // through forward-declared nets. Follow net drivers with a DFS.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut mark = vec![Mark::New; m.nodes.len()];
    fn visit(m: &Module, id: NodeId, mark: &mut [Mark], path: &mut Vec<String>) -> Result<()> {
        match mark[id as usize] {
            Mark::Done => return Ok(()),
            Mark::Active => bail!("combinational loop through {}", path.join(" -> ")),
            Mark::New => {}
        }
        mark[id as usize] = Mark::Active;
        let mut next = m.operands(id);
        if let NodeKind::Net(i) = m.node(id).kind {
            path.push(m.nets[i].name.clone());
            next.extend(m.nets[i].driver);
        }
        for op in next {
            visit(m, op, mark, path)?;
        }
        if let NodeKind::Net(_) = m.node(id).kind {
            path.pop();
        }
        mark[id as usize] = Mark::Done;
        Ok(())
    }
    for id in 0..m.nodes.len() as NodeId {
        visit(m, id, &mut mark, &mut vec![])?;
    }
    Ok(())
}
