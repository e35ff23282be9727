//! The association orders of the row reductions, which the hardware reproduces bit for bit.
//!
//! A PE first reduces its own `b` values as a tree, then the row-reduction tree combines the C
//! per-PE results: both trees combine level by level, at each level neighbours (0, 1), (2, 3),
//! ... and an odd last element passes through unchanged. (A PE's tree, unlike an in-order chain
//! ((v0 ⊕ v1) ⊕ v2) ⊕ ..., has no operation waiting on the one before it at a value's rate, so
//! the hardware pipelines it at the adder's latency; for b ≤ 2 the two are the same.)

use crate::fp::{f32_is_nan, f32_order_key, fp32_add_native, F32_QNAN, F32_SIGN};

/// The row-reduction tree over `values` (one per PE of a row) with operator `op`.
pub fn tree(values: &[u32], op: fn(u32, u32) -> u32) -> u32 {
    tree_in_place(&mut values.to_vec(), op)
}

/// [`tree`] in `values`' own storage: each level's results overwrite its front (result i is
/// written after its inputs 2i and 2i + 1 are read, and no later pair reads below 2i + 2).
#[inline(always)]
fn tree_in_place(values: &mut [u32], op: impl Fn(u32, u32) -> u32) -> u32 {
    assert!(
        !values.is_empty(),
        "a tree reduction needs at least one value"
    );
    let mut n = values.len();
    while n > 1 {
        for i in 0..n / 2 {
            values[i] = op(values[2 * i], values[2 * i + 1]);
        }
        if n % 2 == 1 {
            values[n / 2] = values[n - 1];
        }
        n = n.div_ceil(2);
    }
    values[0]
}

/// Levels of the tree for `n` inputs: ceil(log2 n).
pub fn tree_levels(n: usize) -> u32 {
    usize::BITS - (n.max(1) - 1).leading_zeros()
}

/// Row sum as the array computes it: `values` (a row of one block, Bc of them) split into
/// `cols` contiguous groups of Bc/cols, each summed by its PE as a tree, then the row's tree.
#[inline(always)]
pub fn row_sum(values: &[u32], cols: usize) -> u32 {
    row_reduce(values, cols, fp32_add_native) // = fp32_add, on the host's FPU
}

/// Row maximum. The hardware takes it in [`row_sum`]'s shape, but `fp32_max` is the max of a
/// total order (−0 below +0) with NaN absorbing, so every order gives the same bits: one pass
/// over the values, on order keys (it vectorizes). `row_max_is_the_tree` holds it to the tree.
pub fn row_max(values: &[u32], cols: usize) -> u32 {
    per_pe(values, cols);
    let (mut nan, mut key) = (false, 0u32);
    for &x in values {
        nan |= f32_is_nan(x);
        key = key.max(f32_order_key(x));
    }
    match (nan, key & F32_SIGN != 0) {
        (true, _) => F32_QNAN,
        (false, true) => key & !F32_SIGN,
        (false, false) => !key,
    }
}

#[inline(always)]
fn row_reduce(values: &[u32], cols: usize, op: impl Fn(u32, u32) -> u32 + Copy) -> u32 {
    let b = per_pe(values, cols);
    // The PEs' results, and one PE's values while its tree runs, on the stack (the model runs
    // this for every row of every block).
    let (mut stack, mut heap) = ([0u32; 64], vec![]);
    let (mut part, mut part_heap) = ([0u32; 64], vec![]);
    let locals = scratch(&mut stack, &mut heap, cols);
    let part = scratch(&mut part, &mut part_heap, b);
    for (l, c) in locals.iter_mut().zip(values.chunks(b)) {
        part.copy_from_slice(c);
        *l = tree_in_place(part, op);
    }
    tree_in_place(locals, op)
}

/// `n` words of `stack`, or of `heap` when they do not fit.
/// The values each of a row's `cols` PEs holds, `values` split evenly over them (at least one
/// each).
#[inline(always)]
fn per_pe(values: &[u32], cols: usize) -> usize {
    assert!(
        cols > 0 && !values.is_empty() && values.len().is_multiple_of(cols),
        "{} values do not split over {cols} PEs",
        values.len()
    );
    values.len() / cols
}

fn scratch<'a>(stack: &'a mut [u32; 64], heap: &'a mut Vec<u32>, n: usize) -> &'a mut [u32] {
    if n <= stack.len() {
        &mut stack[..n]
    } else {
        heap.resize(n, 0);
        heap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::{fp32_max, F32_INF};

    proptest::proptest! {
        /// The one-pass max is the tree's, NaNs, infinities and signed zeros included.
        #[test]
        fn row_max_is_the_tree(
            raw in proptest::collection::vec(proptest::prelude::any::<u32>(), 1..64),
            special in proptest::collection::vec(0usize..6, 64),
            cols in 1usize..5,
        ) {
            let picks = [0, F32_SIGN, F32_INF, F32_INF | F32_SIGN, F32_QNAN, 0x7F80_0001];
            let n = raw.len() / cols * cols;
            proptest::prop_assume!(n > 0);
            let values: Vec<u32> = raw[..n]
                .iter()
                .zip(&special)
                .map(|(&x, &k)| if k < picks.len() && x % 7 == 0 { picks[k] } else { x })
                .collect();
            proptest::prop_assert_eq!(row_max(&values, cols), row_reduce(&values, cols, fp32_max));
        }
    }

    #[test]
    fn tree_shape() {
        assert_eq!(tree_levels(1), 0);
        assert_eq!(tree_levels(2), 1);
        assert_eq!(tree_levels(3), 2);
        assert_eq!(tree_levels(4), 2);
        assert_eq!(tree_levels(5), 3);
        assert_eq!(tree_levels(32), 5);
        // ((a+b)+(c+d))+e, checked with an operator that records the order.
        fn cat(a: u32, b: u32) -> u32 {
            a * 10 + b
        }
        assert_eq!(
            tree(&[1, 2, 3, 4, 5], cat),
            cat(cat(cat(1, 2), cat(3, 4)), 5)
        );
        assert_ne!(
            tree(&[1, 2, 3, 4, 5], cat),
            cat(cat(cat(cat(1, 2), 3), 4), 5)
        );
        // Each PE's values as a tree, then the PEs' results: 2 PEs of 3 values.
        assert_eq!(
            row_reduce(&[1, 2, 3, 4, 5, 6], 2, cat),
            cat(cat(cat(1, 2), 3), cat(cat(4, 5), 6))
        );
        assert_eq!(
            row_reduce(&[1, 2, 3, 4, 5, 6, 7, 8], 2, cat),
            cat(cat(cat(1, 2), cat(3, 4)), cat(cat(5, 6), cat(7, 8)))
        );
    }
}
