//! Deterministic choices for the machines' in-memory tests: xorshift64*
//! from a seed, so that a failure repeats.

pub(crate) struct Dice(pub(crate) u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33
    }

    /// 0..n.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// 1..=n.
    pub(crate) fn upto(&mut self, n: usize) -> usize {
        1 + self.next() as usize % n.max(1)
    }
}
