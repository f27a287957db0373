//! Writing to stdout without panicking when the reader goes away.

use std::io::Write;

/// Writes `text` to stdout. A closed pipe is returned as an error that
/// `main` treats as success, like `cat` does.
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes `value` as pretty JSON and a newline.
pub fn print_json<T: serde::Serialize>(value: &T) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    text.push('\n');
    print(&text)
}

/// Whether an error is stdout's reader having gone away.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
