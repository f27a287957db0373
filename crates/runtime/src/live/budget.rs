//! A core budget that changes while the program runs, read from a file an
//! outside controller writes (`herd run --cores-from FILE`; S4's server
//! consolidation and power capping). The file holds one whole number, the
//! cores the program may use; a controller should replace it atomically
//! (write a temporary file, rename it over), though a reader that finds it
//! empty (a writer between truncating and writing) just keeps the budget
//! it had.

use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

/// How often the file is read at most. A budget follows load or power on
/// a scale of tenths of seconds; PALM decides every 0.125 ms at first, and
/// a read per decision would cost it a few percent for nothing.
pub const READ_EVERY_NS: u64 = 10_000_000;

/// The budget in `text`: one whole number >= 1, blanks around it allowed.
/// `Ok(None)`: empty (a writer mid-write).
pub fn parse(text: &str) -> Result<Option<u32>, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match t.parse::<u32>() {
        Ok(0) => Err("0 cores: a budget is at least 1".into()),
        Ok(n) => Ok(Some(n)),
        Err(_) => Err(format!(
            "'{}' is not a whole number of cores",
            t.chars().take(40).collect::<String>()
        )),
    }
}

/// The file and what was last read from it.
#[derive(Debug)]
pub struct BudgetFile {
    path: PathBuf,
    read_ns: Option<u64>,
    cores: Option<u32>,
    /// The last problem reported, so a bad file is reported once, not
    /// every read.
    complaint: Option<String>,
    messages: Sender<String>,
}

impl BudgetFile {
    /// Follows `path`; `cores` is what it holds now (read by the caller, so
    /// a bad path fails before the program starts). Problems later go to
    /// `messages`, and the budget stays as it was.
    pub fn new(path: &Path, cores: u32, messages: Sender<String>) -> Self {
        BudgetFile {
            path: path.to_path_buf(),
            read_ns: None,
            cores: Some(cores),
            complaint: None,
            messages,
        }
    }

    /// The budget at `now_ns`, reading the file when it is due.
    pub fn poll(&mut self, now_ns: u64) -> Option<u32> {
        if self
            .read_ns
            .is_some_and(|r| now_ns.saturating_sub(r) < READ_EVERY_NS)
        {
            return self.cores;
        }
        self.read_ns = Some(now_ns);
        let problem = match std::fs::read_to_string(&self.path) {
            Ok(text) => match parse(&text) {
                Ok(Some(n)) => {
                    self.cores = Some(n);
                    None
                }
                Ok(None) => None,
                Err(e) => Some(e),
            },
            Err(e) => Some(e.to_string()),
        };
        if let Some(p) = &problem
            && self.complaint.as_ref() != Some(p)
        {
            let keep = self.cores.map_or("none".to_string(), |n| n.to_string());
            // The receiver may be gone (the caller stopped listening): the
            // budget still holds.
            let _ = self.messages.send(format!(
                "--cores-from {}: {p}; the budget stays {keep}",
                self.path.display()
            ));
        }
        self.complaint = problem;
        self.cores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_takes_one_whole_number_of_cores() {
        assert_eq!(parse(" 3\n"), Ok(Some(3)));
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("\n"), Ok(None));
        assert!(parse("0").unwrap_err().contains("at least 1"));
        assert!(parse("two").unwrap_err().contains("'two' is not a whole number"));
        assert!(parse("-1").is_err());
        assert!(parse("2 3").is_err());
    }

    #[test]
    fn the_file_is_followed_and_a_bad_one_keeps_the_budget_and_says_so_once() {
        let dir = std::env::temp_dir().join(format!("herd-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("budget");
        std::fs::write(&path, "2\n").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut b = BudgetFile::new(&path, 2, tx);
        assert_eq!(b.poll(0), Some(2));
        std::fs::write(&path, "1").unwrap();
        // Not due yet: the last budget.
        assert_eq!(b.poll(READ_EVERY_NS / 2), Some(2));
        assert_eq!(b.poll(READ_EVERY_NS), Some(1));
        std::fs::write(&path, "lots").unwrap();
        assert_eq!(b.poll(2 * READ_EVERY_NS), Some(1));
        assert_eq!(b.poll(3 * READ_EVERY_NS), Some(1));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(b.poll(4 * READ_EVERY_NS), Some(1));
        std::fs::write(&path, "4").unwrap();
        assert_eq!(b.poll(5 * READ_EVERY_NS), Some(4));
        let said: Vec<String> = rx.try_iter().collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("'lots' is not a whole number") && said[0].contains("stays 1"));
        assert!(said[1].contains("No such file"), "{said:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
