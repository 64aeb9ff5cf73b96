//! Test hooks named by `CAIRN_FAILPOINT=<name>`, for tests that must crash or hold the
//! real binary at a precise point. They exist only with the `testing` feature, which
//! `cargo test` and `cargo bench` turn on (the crate's dev-dependency on itself); every
//! build a user runs (`cargo build`, `cargo install`) has none, and ignores the variable.

/// Whether the failpoint `name` is set for this process.
#[cfg(feature = "testing")]
pub(crate) fn is_set(name: &str) -> bool {
    std::env::var("CAIRN_FAILPOINT").is_ok_and(|v| v == name)
}

/// Whether the failpoint `name` is set for this process: never, in this build.
#[cfg(not(feature = "testing"))]
pub(crate) fn is_set(_name: &str) -> bool {
    false
}
