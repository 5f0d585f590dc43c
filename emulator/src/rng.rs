//! A tiny seeded PRNG (SplitMix64). Deterministic across platforms; not cryptographic.

/// SplitMix64 generator: every emulator decision that looks random is drawn from one of these,
/// seeded from [`crate::EmulatorConfig::seed`], so a run is reproducible.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    #[cfg(test)]
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// A generator for one derived stream (e.g. one task), independent of the order of other draws.
    pub(crate) fn derived(seed: u64, stream: u64, index: u64) -> Self {
        let mut g = SplitMix64(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let base = g.next_u64();
        SplitMix64(base ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi] (inclusive). Returns `lo` when `hi <= lo`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo + 1;
        lo + self.next_u64() % span
    }

    /// True with probability `p` (clamped to [0, 1]).
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }

    /// `n` characters drawn uniformly from `alphabet` (ASCII).
    pub(crate) fn chars(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n).map(|_| alphabet[(self.next_u64() % alphabet.len() as u64) as usize] as char).collect()
    }
}

pub(crate) const HEX: &[u8] = b"0123456789abcdef";
pub(crate) const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub(crate) const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut g = SplitMix64::new(1);
        for _ in 0..1000 {
            let v = g.range(3, 9);
            assert!((3..=9).contains(&v));
            let f = g.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
        assert_ne!(SplitMix64::derived(1, 2, 3).next_u64(), SplitMix64::derived(1, 2, 4).next_u64());
    }
}
