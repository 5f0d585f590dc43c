//! The emulator's randomness: `rand_xoshiro`'s SplitMix64, seeded per stream from
//! [`crate::EmulatorConfig::seed`] so that a run is reproducible, and the draws the other
//! modules share. Deterministic across platforms; not cryptographic.

use rand_core::{Rng, SeedableRng};
pub(crate) use rand_xoshiro::SplitMix64;

/// A generator for one stream (e.g. one task), independent of the order of other draws.
pub(crate) fn stream(seed: u64, stream: u64, index: u64) -> SplitMix64 {
    let base = SplitMix64::seed_from_u64(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64();
    SplitMix64::seed_from_u64(base ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Draws on top of any generator.
pub(crate) trait Draw: Rng {
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi] (inclusive; the modulo bias is at most span / 2^64). Returns `lo`
    /// when `hi <= lo`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(span) => lo + self.next_u64() % span,
            None => self.next_u64(),
        }
    }

    /// True with probability `p` (never for `p <= 0`).
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

impl<R: Rng + ?Sized> Draw for R {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = SplitMix64::seed_from_u64(7);
        let mut b = SplitMix64::seed_from_u64(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut g = SplitMix64::seed_from_u64(1);
        for _ in 0..1000 {
            let v = g.range(3, 9);
            assert!((3..=9).contains(&v));
            let f = g.unit();
            assert!((0.0..1.0).contains(&f));
        }
        assert_ne!(stream(1, 2, 3).next_u64(), stream(1, 2, 4).next_u64());
    }
}
