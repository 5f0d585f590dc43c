//! The simulation's only source of randomness: `rand_xoshiro`'s SplitMix64, the generator the
//! engine's jitter and the emulator draw from too. Every stream is reproducible from its seed.

use rand_core::{Rng as _, SeedableRng as _};
use rand_xoshiro::SplitMix64;

/// A seeded stream with the draws the simulation needs.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`; the tiny modulo bias does not matter here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` (0.0..=1.0).
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A 64-bit hash of `z`: the first draw of a stream seeded with it. Derives per-solve seeds and
/// folds transcripts into fingerprints.
pub fn mix(z: u64) -> u64 {
    Rng::new(z).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crate's stream is SplitMix64 as the reference defines it (the values the simulation's
    /// own copy of the algorithm gave for the same seed).
    #[test]
    fn the_stream_is_reference_splitmix64() {
        let mut rng = Rng::new(1_477_776_061_723_855_037);
        assert_eq!([rng.next_u64(), rng.next_u64()], [1_985_237_415_132_408_290, 2_979_275_885_539_914_483]);
    }
}
