//! Typed port groups: a module's ports as Rust structs.
//!
//! An interface is a struct generic over its leaf type, declared with [`interface!`] (leaves)
//! or [`group!`] (interfaces of interfaces): `Desc<u32>` holds the widths of the ports,
//! `Desc<Sig>` their signals, so the widths are written once, as a struct literal the compiler
//! checks, and everything else (declaring inputs and outputs, forward nets, connecting an
//! instance) is derived. A leaf's port name is its field path joined with `_` under the
//! group's prefix: field `base` of the `q` descriptor is port `q_base`.
//!
//! A [`Block`] is a module defined with typed inputs and outputs; [`ModuleBuilder::instantiate`]
//! takes the input struct and returns the output struct, so a renamed or missing port is a
//! compile error in the parent, not a panic at generation time.

use std::marker::PhantomData;

use super::builder::ModuleBuilder;
use super::{Design, Sig};
use crate::ir::ModRef;

/// A struct of ports with leaves of type `T` (widths `u32`, or signals [`Sig`]).
pub trait Ports<T: Copy>: Sized {
    /// The same struct with leaves of type `U`.
    type With<U: Copy>: Ports<U>;
    /// Every leaf with its port name under `prefix`, in declaration order.
    fn leaves(&self, prefix: &str, out: &mut Vec<(String, T)>);
    /// The same struct with `f(port name, leaf)` at every leaf, in declaration order.
    fn map<U: Copy>(&self, prefix: &str, f: &mut dyn FnMut(&str, T) -> U) -> Self::With<U>;

    /// Every leaf with its port name (no prefix).
    fn named(&self) -> Vec<(String, T)> {
        let mut out = vec![];
        self.leaves("", &mut out);
        out
    }
}

/// `prefix_name`, or `name` without a prefix.
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}_{name}")
    }
}

impl<T: Copy, P: Ports<T>> Ports<T> for Vec<P> {
    type With<U: Copy> = Vec<P::With<U>>;
    /// Element `i` is named `prefix{i}` (`row0_busy`).
    fn leaves(&self, prefix: &str, out: &mut Vec<(String, T)>) {
        for (i, p) in self.iter().enumerate() {
            p.leaves(&format!("{prefix}{i}"), out);
        }
    }
    fn map<U: Copy>(&self, prefix: &str, f: &mut dyn FnMut(&str, T) -> U) -> Self::With<U> {
        self.iter()
            .enumerate()
            .map(|(i, p)| p.map(&format!("{prefix}{i}"), f))
            .collect()
    }
}

/// An optional interface (a port group present in some configurations only, such as the
/// memory port of one `mem_if`): `None` has no ports, `Some` the interface's under `prefix`.
impl<T: Copy, P: Ports<T>> Ports<T> for Option<P> {
    type With<U: Copy> = Option<P::With<U>>;
    fn leaves(&self, prefix: &str, out: &mut Vec<(String, T)>) {
        if let Some(p) = self {
            p.leaves(prefix, out);
        }
    }
    fn map<U: Copy>(&self, prefix: &str, f: &mut dyn FnMut(&str, T) -> U) -> Self::With<U> {
        self.as_ref().map(|p| p.map(prefix, f))
    }
}

/// Declares an interface of leaf ports: `interface! { /// doc
/// pub struct Desc { start, base } }` gives `pub struct Desc<T = Sig> { pub start: T, pub
/// base: T }` implementing [`Ports`].
#[macro_export]
macro_rules! interface {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $($(#[$fmeta:meta])* $field:ident),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        $vis struct $name<T = $crate::ir::Sig> {
            $($(#[$fmeta])* pub $field: T),+
        }
        impl<T: Copy> $crate::ir::iface::Ports<T> for $name<T> {
            type With<U: Copy> = $name<U>;
            fn leaves(&self, prefix: &str, out: &mut Vec<(String, T)>) {
                $(out.push(($crate::ir::iface::join(prefix, stringify!($field)), self.$field));)+
            }
            fn map<U: Copy>(
                &self,
                prefix: &str,
                f: &mut dyn FnMut(&str, T) -> U,
            ) -> $name<U> {
                $name {
                    $($field: f(&$crate::ir::iface::join(prefix, stringify!($field)), self.$field)),+
                }
            }
        }
    };
}

/// Declares an interface of leaves and interfaces: `group! { pub struct DmaIn<T> { start,
/// busy; q: Desc<T>, rows: Vec<Row<T>>, problem => Problem<T> } }`: leaves first (ports
/// `start`, `busy`), then the sub-interfaces: `field: Type` prefixes the field's ports with
/// `field_` (`q_base`), `field => Type` keeps their names (`q_addr`, not `problem_q_addr`).
#[macro_export]
macro_rules! group {
    ($(#[$meta:meta])* $vis:vis struct $name:ident<$t:ident> {
        $($(#[$lmeta:meta])* $leaf:ident),* ;
        $($(#[$fmeta:meta])* $field:ident $sep:tt $fty:ty),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        $vis struct $name<$t = $crate::ir::Sig> {
            $($(#[$lmeta])* pub $leaf: $t,)*
            $($(#[$fmeta])* pub $field: $fty),*
        }
        impl<$t: Copy> $crate::ir::iface::Ports<$t> for $name<$t> {
            type With<U: Copy> = $name<U>;
            fn leaves(&self, prefix: &str, out: &mut Vec<(String, $t)>) {
                $(out.push(($crate::ir::iface::join(prefix, stringify!($leaf)), self.$leaf));)*
                $($crate::ir::iface::Ports::leaves(
                    &self.$field,
                    &$crate::group!(@prefix $sep prefix, stringify!($field)),
                    out,
                );)*
            }
            fn map<U: Copy>(
                &self,
                prefix: &str,
                f: &mut dyn FnMut(&str, $t) -> U,
            ) -> $name<U> {
                $name {
                    $($leaf: f(&$crate::ir::iface::join(prefix, stringify!($leaf)), self.$leaf),)*
                    $($field: $crate::ir::iface::Ports::map(
                        &self.$field,
                        &$crate::group!(@prefix $sep prefix, stringify!($field)),
                        f,
                    )),*
                }
            }
        }
    };
    (@prefix : $prefix:expr, $name:expr) => { $crate::ir::iface::join($prefix, $name) };
    (@prefix => $prefix:expr, $name:expr) => { $prefix.to_string() };
}

/// `t` where `sel` is high, else `f`, leaf by leaf (the same struct, so the same leaves).
pub fn select<P: Ports<Sig>>(sel: Sig, t: &P, f: &P) -> P::With<Sig> {
    let fs: Vec<Sig> = f.named().into_iter().map(|(_, x)| x).collect();
    let mut k = 0;
    t.map("", &mut |_, x| {
        k += 1;
        super::signal::mux(sel, x, fs[k - 1])
    })
}

/// No ports (a simulation-only checker's outputs).
impl<T: Copy> Ports<T> for () {
    type With<U: Copy> = ();
    fn leaves(&self, _prefix: &str, _out: &mut Vec<(String, T)>) {}
    fn map<U: Copy>(&self, _prefix: &str, _f: &mut dyn FnMut(&str, T) -> U) {}
}

/// The widths of a struct of signals.
pub fn widths_of<P: Ports<Sig>>(sigs: &P) -> P::With<u32> {
    sigs.map("", &mut |_, s| s.width())
}

impl ModuleBuilder {
    /// Declares the input ports of `widths` under `prefix` and returns their signals.
    pub fn inputs<P: Ports<u32>>(&mut self, prefix: &str, widths: &P) -> P::With<Sig> {
        widths.map(prefix, &mut |name, w| self.input(name, w))
    }

    /// Declares output ports under `prefix` driven by `values`.
    pub fn outputs<P: Ports<Sig>>(&mut self, prefix: &str, values: &P) {
        let mut leaves = vec![];
        values.leaves(prefix, &mut leaves);
        for (name, s) in leaves {
            self.output(&name, s);
        }
    }

    /// Forward-declared nets (named after the ports under `prefix`), to be driven later with
    /// [`ModuleBuilder::drive_all`].
    pub fn nets<P: Ports<u32>>(&mut self, prefix: &str, widths: &P) -> P::With<Sig> {
        widths.map(prefix, &mut |name, w| self.net(name, w))
    }

    /// Drives every net of `nets` with the same leaf of `values`.
    pub fn drive_all<P: Ports<Sig>>(&mut self, nets: &P, values: &P) {
        for ((_, n), (_, v)) in nets.named().into_iter().zip(values.named()) {
            self.drive(n, v);
        }
    }

    /// Marks every leaf of `values` as intentionally unread.
    pub fn discard_all<P: Ports<Sig>>(&mut self, values: &P) {
        for (_, v) in values.named() {
            self.discard(v);
        }
    }

    /// An instance of `block` named `name`, its inputs driven by `inputs`; returns its outputs.
    pub fn instantiate<I: Ports<Sig>, O: Ports<u32>>(
        &mut self,
        block: &Block<I, O>,
        name: &str,
        inputs: &I,
    ) -> O::With<Sig> {
        let conns = inputs.named();
        let refs: Vec<(&str, Sig)> = conns.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let outs = self.instance(&block.module, name, &refs);
        block.outputs.map("", &mut |port, _| outs.get(port))
    }
}

impl ModuleBuilder {
    /// [`ModuleBuilder::instantiate`], the instance's `rst` driven by `reset` (see
    /// [`ModuleBuilder::instance_with_reset`]).
    pub fn instantiate_with_reset<I: Ports<Sig>, O: Ports<u32>>(
        &mut self,
        block: &Block<I, O>,
        name: &str,
        inputs: &I,
        reset: Sig,
    ) -> O::With<Sig> {
        let conns = inputs.named();
        let refs: Vec<(&str, Sig)> = conns.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let outs = self.instance_with_reset(&block.module, name, &refs, reset);
        block.outputs.map("", &mut |port, _| outs.get(port))
    }
}

/// A module with typed ports: inputs `I` (a struct of signals), outputs described by `O` (a
/// struct of widths).
pub struct Block<I, O> {
    /// The module's interface.
    pub module: ModRef,
    /// The output widths.
    pub outputs: O,
    _inputs: PhantomData<I>,
}

impl<I, O: Clone> Clone for Block<I, O> {
    fn clone(&self) -> Self {
        Block {
            module: self.module.clone(),
            outputs: self.outputs.clone(),
            _inputs: PhantomData,
        }
    }
}

impl<I: Ports<Sig>, O: Ports<u32>> Block<I, O> {
    /// A typed view of a module built port by port: panics (a generator bug) unless its ports
    /// are exactly the leaves of `inputs` and `outputs`, by name, direction and width.
    pub fn view(module: ModRef, inputs: &I::With<u32>, outputs: O) -> Self
    where
        I::With<u32>: Ports<u32>,
    {
        let mut want: Vec<(String, crate::ir::Dir, u32)> = vec![];
        let dirs = [
            (inputs.named(), crate::ir::Dir::Input),
            (outputs.named(), crate::ir::Dir::Output),
        ];
        for (leaves, dir) in dirs {
            want.extend(leaves.into_iter().map(|(n, w)| (n, dir, w)));
        }
        // A module built for fault injection also takes the select (and the TSV lane faults),
        // which its parents pass down by themselves (the builder's threaded inputs).
        let mut have: Vec<(String, crate::ir::Dir, u32)> = module
            .ports
            .iter()
            .filter(|p| p.name != crate::fault::SELECT && p.name != crate::ir::builder::CORE_FAULTS)
            .map(|p| (p.name.clone(), p.dir, p.width))
            .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        have.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            have, want,
            "the ports of `{}` differ from its typed view",
            module.name
        );
        Block {
            module,
            outputs,
            _inputs: PhantomData,
        }
    }
}

impl<I, O> Block<I, O>
where
    I: Ports<Sig>,
    I::With<u32>: Ports<u32, With<u32> = I::With<u32>> + Default,
    O: Ports<u32, With<u32> = O> + Default,
{
    /// The typed view of a module whose ports are flat interfaces (no vectors): the widths
    /// are the module's own, and every port must be a leaf of `I` or `O` (see
    /// [`Block::view`]).
    pub fn of(module: ModRef) -> Self {
        let width = |dir: crate::ir::Dir, name: &str| {
            module
                .port(name)
                .filter(|p| p.dir == dir)
                .unwrap_or_else(|| panic!("`{}` has no {dir:?} port `{name}`", module.name))
                .width
        };
        let inputs = I::With::<u32>::default().map("", &mut |n, _| width(crate::ir::Dir::Input, n));
        let outputs = O::default().map("", &mut |n, _| width(crate::ir::Dir::Output, n));
        Block::view(module.clone(), &inputs, outputs)
    }
}

impl Design {
    /// Defines module `name` with the inputs `inputs` (widths) and the outputs `outputs`
    /// (widths): `build` gets the input signals and returns the output signals, whose widths
    /// must be `outputs`. Like [`Design::define`], a name defined before is reused.
    pub fn define_block<IW, OW>(
        &mut self,
        name: &str,
        inputs: &IW,
        outputs: OW,
        build: impl FnOnce(&mut Design, &mut ModuleBuilder, IW::With<Sig>) -> OW::With<Sig>,
    ) -> Block<IW::With<Sig>, OW>
    where
        IW: Ports<u32>,
        OW: Ports<u32> + PartialEq + std::fmt::Debug,
        OW::With<Sig>: Ports<Sig, With<u32> = OW>,
    {
        let module = self.define(name, |d, m| {
            let ins = m.inputs("", inputs);
            let names: Vec<String> = outputs.named().into_iter().map(|(n, _)| n).collect();
            m.reserve_outputs(&names);
            let outs = build(d, m, ins);
            let got = widths_of(&outs);
            assert_eq!(
                got, outputs,
                "`{name}`: output widths differ from its declaration"
            );
            m.outputs("", &outs);
        });
        Block {
            module,
            outputs,
            _inputs: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::interface! {
        /// A test descriptor.
        struct Desc { start, base }
    }

    crate::interface! {
        /// A test result.
        struct Res { done, sum }
    }

    crate::group! {
        struct Pair<T> { go; q: Desc<T>, rows: Vec<Desc<T>>, flat => Desc<T> }
    }

    #[test]
    fn port_names_follow_the_field_paths() {
        let w = Pair {
            go: 1,
            q: Desc { start: 1, base: 32 },
            rows: vec![Desc { start: 1, base: 8 }; 2],
            flat: Desc { start: 1, base: 4 },
        };
        let names: Vec<String> = w.named().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "go",
                "q_start",
                "q_base",
                "rows0_start",
                "rows0_base",
                "rows1_start",
                "rows1_base",
                "start",
                "base"
            ]
        );
    }

    #[test]
    fn a_block_takes_and_returns_structs() {
        let mut d = Design::new();
        let inner = d.define_block(
            "inner",
            &Desc { start: 1, base: 8 },
            Res { done: 1, sum: 8 },
            |_, _, i| Res {
                done: !i.start,
                sum: i.base + 1,
            },
        );
        d.define("outer", |_, m| {
            let i = m.inputs("x", &Desc { start: 1, base: 8 });
            let o = m.instantiate(&inner, "u_inner", &i);
            assert_eq!(widths_of(&o), Res { done: 1, sum: 8 });
            m.outputs("y", &o);
        });
        let outer = d.module("outer").unwrap();
        let ports: Vec<&str> = outer.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(ports, ["x_start", "x_base", "y_done", "y_sum"]);
    }
}
