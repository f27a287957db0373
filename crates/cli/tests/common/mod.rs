//! Helpers shared by the integration tests.

/// The state letter of process `pid` from /proc (R, S, T, Z...), or `None` if it is gone.
pub fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}
