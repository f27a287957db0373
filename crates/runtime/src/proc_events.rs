//! The kernel's process events (the netlink proc connector): every fork,
//! exec and exit on the machine as it happens, so the daemon knows a
//! process that has just exec'd its program (a `/proc` scan between a
//! shell's fork and its exec sees the shell) and a pid reused between two
//! scans. It needs `CAP_NET_ADMIN` (root) and a kernel built with
//! `CONFIG_PROC_EVENTS`; without either, [`ProcEvents::open`] fails and the
//! daemon scans `/proc` alone.
//!
//! Written here rather than taken from a crate: the protocol is three
//! fixed C structures (`linux/connector.h`, `linux/cn_proc.h`), and the
//! crates that wrap it are small, little used and unmaintained.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::netlink::{self, NLMSG_HDR_LEN, u32_at};
use std::time::Duration;

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const CN_MSG_LEN: usize = 20;
const NLMSG_DONE: u16 = 3;
const PROC_EVENT_FORK: u32 = 0x1;
const PROC_EVENT_EXEC: u32 = 0x2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// One process event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A new process (not a new thread): its pid and its parent's.
    Fork {
        /// The new process.
        pid: i32,
        /// Its parent process.
        parent: i32,
        /// The parent's thread that forked it (its tid).
        creator: i32,
    },
    /// A new thread of an existing process.
    Thread {
        /// The new thread.
        tid: i32,
        /// Its process.
        pid: i32,
        /// The thread that made it (its tid).
        creator: i32,
    },
    /// Process `pid` exec'd a new program.
    Exec {
        /// The process.
        pid: i32,
    },
    /// Process `pid` ended (its last thread, or its leader).
    Exit {
        /// The process.
        pid: i32,
    },
}

/// A subscription to the kernel's process events.
#[derive(Debug)]
pub struct ProcEvents {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl ProcEvents {
    /// Subscribes: fails without `CAP_NET_ADMIN` or the connector.
    pub fn open() -> io::Result<ProcEvents> {
        let fd = netlink::socket(libc::SOCK_DGRAM, NETLINK_CONNECTOR, CN_IDX_PROC)?;
        let msg = listen_message(std::process::id());
        netlink::send(&fd, &msg)?;
        Ok(ProcEvents {
            fd,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Has the kernel pass only forks (of processes and of threads) made
    /// by the processes `pids`, dropping every other event before it wakes
    /// anyone: a subscriber that cares about a few processes' children
    /// otherwise wakes for every fork, exec and exit on the machine
    /// (herd's loop spent 0.2 s of CPU over 2,100 forks of an unrelated
    /// shell loop). No processes: no event at all. More than one filter
    /// can name ([`FILTER_MAX_PIDS`]): every fork. Replaces the filter set
    /// before; events already queued stay.
    pub fn only_forks_of(&self, pids: &[i32]) -> io::Result<()> {
        let mut prog = fork_filter(pids);
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_mut_ptr(),
        };
        // SAFETY: fprog points at `prog`, alive for the call; the kernel
        // copies the program.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&raw const fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// The socket's descriptor, for a caller that polls it with others.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// The events that come within `timeout` (none if none came). An
    /// `ENOBUFS` error means the kernel dropped events: scan `/proc`.
    pub fn recv(&mut self, timeout: Duration) -> io::Result<Vec<Event>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(Vec::new())
            } else {
                Err(e)
            };
        }
        let mut out = Vec::new();
        if n == 0 {
            return Ok(out);
        }
        loop {
            match netlink::recv_now(&self.fd, &mut self.buf) {
                Ok(got) => parse(&self.buf[..got], &mut out),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(out),
                Err(e) => return Err(e),
            }
        }
    }
}

/// The most processes [`fork_filter`] names (a classic BPF jump reaches
/// 255 instructions on).
pub const FILTER_MAX_PIDS: usize = 200;

/// A classic BPF program over one proc connector message: accept a fork
/// whose parent process is one of `pids` (any fork when there are more
/// than [`FILTER_MAX_PIDS`]), drop everything else. Each event
/// comes in a message of its own: the netlink header, the connector's,
/// then the event (what, cpu, timestamp, and for a fork the parent's
/// thread and process, the child's thread and process).
fn fork_filter(pids: &[i32]) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let what = (NLMSG_HDR_LEN + CN_MSG_LEN) as u32;
    let parent_tgid = what + 16 + 4;
    // BPF loads words in network order; the kernel wrote these in its own.
    let word = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
    let every = pids.len() > FILTER_MAX_PIDS;
    let pids = if every { &[][..] } else { pids };
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let n = pids.len() as u8;
    let mut prog = vec![insn(LD_W_ABS, 0, 0, what)];
    if every {
        // A fork jumps over the drop.
        prog.push(insn(JEQ_K, 1, 0, word(PROC_EVENT_FORK)));
    } else {
        // Not a fork: to the drop, past the load and the pid tests.
        prog.push(insn(JEQ_K, 0, n + 1, word(PROC_EVENT_FORK)));
        prog.push(insn(LD_W_ABS, 0, 0, parent_tgid));
        for (i, &pid) in pids.iter().enumerate() {
            // A match jumps over the remaining tests and the drop.
            prog.push(insn(JEQ_K, n - i as u8, 0, word(pid as u32)));
        }
    }
    prog.push(insn(RET_K, 0, 0, 0));
    prog.push(insn(RET_K, 0, 0, u32::MAX));
    prog
}

/// The message that subscribes: a netlink header, a connector header
/// naming the proc connector, and the LISTEN operation.
fn listen_message(pid: u32) -> Vec<u8> {
    let len = NLMSG_HDR_LEN + CN_MSG_LEN + 4;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&pid.to_ne_bytes());
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // ack
    m.extend_from_slice(&4u16.to_ne_bytes()); // data length
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
    m
}

/// The events in one datagram (netlink messages back to back), appended
/// to `out`; what does not parse is skipped.
pub fn parse(mut b: &[u8], out: &mut Vec<Event>) {
    while b.len() >= NLMSG_HDR_LEN {
        let Some(len) = u32_at(b, 0).map(|l| l as usize) else {
            return;
        };
        if len < NLMSG_HDR_LEN || len > b.len() {
            return;
        }
        let msg = &b[..len];
        // The connector's header, then the proc event: what (u32), cpu
        // (u32), timestamp (u64), then the event's data.
        let ev = NLMSG_HDR_LEN + CN_MSG_LEN;
        if u32_at(msg, NLMSG_HDR_LEN) == Some(CN_IDX_PROC) {
            let data = ev + 16;
            let field = |i: usize| u32_at(msg, data + 4 * i).map(|v| v as i32);
            let event = match u32_at(msg, ev) {
                // parent pid, parent tgid, child pid, child tgid (the
                // kernel's "pid" is a thread's id): a thread has a child
                // pid other than its tgid.
                Some(PROC_EVENT_FORK) => match (field(0), field(1), field(2), field(3)) {
                    (Some(creator), Some(parent), Some(child), Some(tgid)) if child == tgid => {
                        Some(Event::Fork {
                            pid: tgid,
                            parent,
                            creator,
                        })
                    }
                    (Some(creator), Some(_), Some(tid), Some(pid)) => {
                        Some(Event::Thread { tid, pid, creator })
                    }
                    _ => None,
                },
                // process pid, process tgid
                Some(PROC_EVENT_EXEC) => field(1).map(|pid| Event::Exec { pid }),
                Some(PROC_EVENT_EXIT) => match (field(0), field(1)) {
                    (Some(p), Some(tgid)) if p == tgid => Some(Event::Exit { pid: tgid }),
                    _ => None,
                },
                _ => None,
            };
            out.extend(event);
        }
        // Messages are 4-byte aligned.
        let next = len.div_ceil(4) * 4;
        b = b.get(next..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(what: u32, fields: &[i32]) -> Vec<u8> {
        let mut m = listen_message(0);
        m.truncate(NLMSG_HDR_LEN + CN_MSG_LEN);
        m.extend_from_slice(&what.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&0u64.to_ne_bytes());
        for f in fields {
            m.extend_from_slice(&f.to_ne_bytes());
        }
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn forks_threads_execs_and_exits_parse() {
        let mut b = message(PROC_EVENT_FORK, &[14, 10, 11, 11]); // forked by thread 14
        b.extend(message(PROC_EVENT_FORK, &[10, 10, 12, 10])); // a thread
        b.extend(message(PROC_EVENT_EXEC, &[11, 11]));
        b.extend(message(PROC_EVENT_EXIT, &[11, 11, 0, 17]));
        b.extend(message(PROC_EVENT_EXIT, &[13, 11, 0, 17])); // a thread's exit
        b.extend([1, 2, 3]); // a torn tail
        let mut out = Vec::new();
        parse(&b, &mut out);
        assert_eq!(
            out,
            vec![
                Event::Fork {
                    pid: 11,
                    parent: 10,
                    creator: 14
                },
                Event::Thread {
                    tid: 12,
                    pid: 10,
                    creator: 10
                },
                Event::Exec { pid: 11 },
                Event::Exit { pid: 11 }
            ]
        );
    }

    /// With a filter, the kernel passes the forks of the processes it
    /// names and nothing else: not an unrelated process's fork, exec or
    /// exit.
    #[test]
    fn as_root_a_filter_passes_only_the_named_processes_forks() {
        let Ok(mut ev) = ProcEvents::open() else {
            eprintln!("skipped: no proc connector here (not root, or no CONFIG_PROC_EVENTS)");
            return;
        };
        // A shell that forks on a line of its input: the named parent.
        let mut parent = std::process::Command::new("sh")
            .args(["-c", "read x; /bin/true; read y"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let named = parent.id() as i32;
        ev.only_forks_of(&[named]).unwrap();
        // What came before the filter is in the socket already.
        ev.recv(Duration::ZERO).unwrap();
        // Unnamed: this test forks a child of its own first.
        let mut other = std::process::Command::new("true").spawn().unwrap();
        let other_pid = other.id() as i32;
        other.wait().unwrap();
        use std::io::Write;
        let stdin = parent.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline && seen.is_empty() {
            seen.extend(ev.recv(Duration::from_millis(100)).unwrap());
        }
        // Anything else that came meanwhile would be here too.
        seen.extend(ev.recv(Duration::from_millis(200)).unwrap());
        stdin.write_all(b"end\n").unwrap();
        parent.wait().unwrap();
        assert!(!seen.is_empty(), "the named shell's fork did not come");
        for e in &seen {
            assert!(
                matches!(e, Event::Fork { parent, .. } if *parent == named),
                "{e:?} came through (the unnamed child was {other_pid}): {seen:?}"
            );
        }
    }

    #[test]
    fn the_fork_filter_jumps_land_on_accept_and_drop() {
        // Run the program by hand over a fork of process 7 and an exit.
        let run = |prog: &[libc::sock_filter], what: u32, parent: i32| -> u32 {
            let word = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
            let (mut pc, mut acc) = (0usize, 0u32);
            loop {
                let i = prog[pc];
                pc += 1;
                match i.code as u32 {
                    c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                        acc = if i.k == (NLMSG_HDR_LEN + CN_MSG_LEN) as u32 {
                            word(what)
                        } else {
                            word(parent as u32)
                        };
                    }
                    c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                        pc += usize::from(if acc == i.k { i.jt } else { i.jf });
                    }
                    _ => return i.k,
                }
            }
        };
        let many: Vec<i32> = (0..=FILTER_MAX_PIDS as i32).collect();
        for pids in [&[3, 7, 9][..], &[7][..], &many[..]] {
            assert_eq!(run(&fork_filter(pids), PROC_EVENT_FORK, 7), u32::MAX, "{pids:?}");
            assert_eq!(run(&fork_filter(pids), PROC_EVENT_EXIT, 7), 0, "{pids:?}");
        }
        assert_eq!(run(&fork_filter(&[3, 9]), PROC_EVENT_FORK, 7), 0);
        assert_eq!(
            run(&fork_filter(&[]), PROC_EVENT_FORK, 7),
            0,
            "none named: nothing"
        );
        assert_eq!(
            run(&fork_filter(&many), PROC_EVENT_FORK, 100_000),
            u32::MAX,
            "too many: every fork"
        );
    }

    #[test]
    fn as_root_the_kernel_tells_of_a_child_forked_and_execd() {
        let Ok(mut ev) = ProcEvents::open() else {
            eprintln!("skipped: no proc connector here (not root, or no CONFIG_PROC_EVENTS)");
            return;
        };
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline && !seen.contains(&Event::Exit { pid }) {
            seen.extend(ev.recv(Duration::from_millis(100)).unwrap());
        }
        assert!(
            seen.iter()
                .any(|e| matches!(e, Event::Fork { pid: p, .. } if *p == pid)),
            "{seen:?}"
        );
        assert!(seen.contains(&Event::Exec { pid }), "{seen:?}");
        assert!(seen.contains(&Event::Exit { pid }), "{seen:?}");
    }
}
