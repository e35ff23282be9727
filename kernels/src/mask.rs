//! The causal mask, bottom-right aligned as FlashAttention does when query and key lengths
//! differ: query i (of `q_len`) may see key j (of `k_len`) when j ≤ i + (k_len − q_len).
//! Positions past the end of either sequence (tile padding) are masked too.

/// Sequence lengths and the causal switch of one attention problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskSpec {
    pub q_len: usize,
    pub k_len: usize,
    pub causal: bool,
}

impl MaskSpec {
    /// True if query `i` must not see key `j` (absolute indices).
    pub fn masked(&self, i: usize, j: usize) -> bool {
        i >= self.q_len || j >= self.k_len || (self.causal && j + self.q_len > i + self.k_len)
    }

    /// True if every position of the Q tile starting at `q_base` (`br` rows) against the K block
    /// starting at `k_base` is masked: such blocks are not fetched or computed at all.
    pub fn block_skipped(&self, q_base: usize, br: usize, k_base: usize) -> bool {
        if k_base >= self.k_len || q_base >= self.q_len {
            return true;
        }
        let last_row = (q_base + br).min(self.q_len) - 1;
        self.causal && k_base + self.q_len > last_row + self.k_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bottom_right_alignment() {
        // 2 queries, 4 keys: the last query sees all keys, the first all but the last.
        let m = MaskSpec {
            q_len: 2,
            k_len: 4,
            causal: true,
        };
        assert!(!m.masked(0, 2) && m.masked(0, 3));
        assert!(!m.masked(1, 3));
        // 4 queries, 2 keys: the first two queries see nothing.
        let m = MaskSpec {
            q_len: 4,
            k_len: 2,
            causal: true,
        };
        assert!(m.masked(0, 0) && m.masked(1, 0));
        assert!(!m.masked(2, 0) && m.masked(2, 1) && !m.masked(3, 1));
    }

    #[test]
    fn block_skip_agrees_with_every_position() {
        for (q_len, k_len) in [(7, 7), (5, 13), (13, 5), (64, 64), (1, 9)] {
            let m = MaskSpec {
                q_len,
                k_len,
                causal: true,
            };
            for q_base in (0..q_len).step_by(4) {
                for k_base in (0..k_len).step_by(3) {
                    let all =
                        (q_base..q_base + 4).all(|i| (k_base..k_base + 3).all(|j| m.masked(i, j)));
                    assert_eq!(
                        m.block_skipped(q_base, 4, k_base),
                        all,
                        "{q_len} {k_len} {q_base} {k_base}"
                    );
                }
            }
        }
    }
}
