//! One target for every parser of herd's input, chosen by the input's
//! first byte, so one corpus and one run cover them all (and an input can
//! migrate between formats under mutation). The checks are in
//! `herd_cli::fuzz::one`, shared with the corpus test in the suite.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    herd_cli::fuzz::one(data);
});
