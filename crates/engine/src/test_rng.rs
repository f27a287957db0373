//! A small deterministic generator for the engine's randomized tests: the
//! same sequence from the same seed on every machine, and one copy of it.

/// xorshift64's sequence from `seed` (not 0), one number a call.
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
