//! The kernel's per-process accounting (taskstats over generic netlink):
//! one request returns, summed over a process's threads, how often they
//! were put on a CPU and their CPU time in nanoseconds. A live turn uses
//! it to learn that none of a many-threaded process's threads ran since
//! the last turn with one message, instead of one `schedstat` read per
//! thread (issue 28: that read alone is 2 ms a turn at 1,024 threads on
//! the development VM). It needs `CAP_NET_ADMIN` (the kernel marks the
//! command admin-only) and a kernel with `CONFIG_TASKSTATS`; without
//! either, [`Taskstats::open`] or the first request fails and every thread
//! is read as before.
//!
//! Written here rather than taken from a crate: the exchange is two fixed
//! messages and two fields of `struct taskstats` (`linux/taskstats.h`,
//! whose field order the kernel keeps for compatibility), and the crate
//! that wraps it (linux-taskstats) generates its bindings with bindgen at
//! build time, which would need libclang on every machine that builds
//! herd.

use std::io;
use std::os::fd::OwnedFd;

use crate::netlink::{self, NLMSG_HDR_LEN, u16_at, u32_at, u64_at};

const GENL_HDR_LEN: usize = 4;
const NLA_HDR_LEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_GENL_VERSION: u8 = 1;
const TASKSTATS_CMD_ATTR_TGID: u16 = 2;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_TGID: u16 = 5;
/// Offsets in `struct taskstats` (version 1 onwards): `cpu_count` (times
/// put on a CPU, from sched_info) and `cpu_run_virtual_total` (the
/// scheduler's CPU time, ns).
const CPU_COUNT_AT: usize = 16;
const CPU_VIRTUAL_NS_AT: usize = 72;

/// What a process's threads have had of the CPUs so far, summed: two
/// readings that are equal mean no thread of it ran between them (a
/// thread running throughout adds CPU time; one put on a CPU adds a count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCpu {
    /// Times its threads were put on a CPU.
    pub runs: u64,
    /// Their CPU time, ns.
    pub cpu_ns: u64,
}

/// A generic-netlink socket that asks for processes' taskstats.
#[derive(Debug)]
pub struct Taskstats {
    fd: OwnedFd,
    family: u16,
    seq: u32,
    buf: Vec<u8>,
}

impl Taskstats {
    /// Opens the socket and finds the taskstats family; fails where the
    /// kernel has no taskstats. (Permission is checked per request.)
    pub fn open() -> io::Result<Taskstats> {
        let fd = netlink::socket(libc::SOCK_RAW, libc::NETLINK_GENERIC, 0)?;
        let mut ts = Taskstats {
            fd,
            family: 0,
            seq: 0,
            buf: vec![0; 4096],
        };
        let reply = ts.ask(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            1,
            CTRL_ATTR_FAMILY_NAME,
            b"TASKSTATS\0",
        )?;
        ts.family = attrs(&ts.buf[reply])
            .find(|(kind, _)| *kind == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, v)| Some(u16::from_ne_bytes(v.get(..2)?.try_into().ok()?)))
            .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "no taskstats family"))?;
        Ok(ts)
    }

    /// Process `pid`'s threads' CPU so far. Fails without `CAP_NET_ADMIN`
    /// (`PermissionDenied`) or once the process is gone.
    pub fn group(&mut self, pid: i32) -> io::Result<GroupCpu> {
        let family = self.family;
        let reply = self.ask(
            family,
            TASKSTATS_CMD_GET,
            TASKSTATS_GENL_VERSION,
            TASKSTATS_CMD_ATTR_TGID,
            &(pid as u32).to_ne_bytes(),
        )?;
        stats_of(&self.buf[reply])
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no taskstats in the reply"))
    }

    /// Sends one request with one attribute; where the reply's attributes
    /// are in `buf`.
    fn ask(
        &mut self,
        kind: u16,
        cmd: u8,
        version: u8,
        attr: u16,
        value: &[u8],
    ) -> io::Result<std::ops::Range<usize>> {
        self.seq = self.seq.wrapping_add(1);
        let attr_len = NLA_HDR_LEN + value.len();
        let len = NLMSG_HDR_LEN + GENL_HDR_LEN + attr_len.next_multiple_of(4);
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes()); // to the kernel
        m.extend_from_slice(&[cmd, version, 0, 0]);
        m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
        m.extend_from_slice(&attr.to_ne_bytes());
        m.extend_from_slice(value);
        m.resize(len, 0);
        netlink::send(&self.fd, &m)?;
        loop {
            // The kernel answers within send(2): nothing there is an error,
            // not a reason to wait.
            let got = netlink::recv_now(&self.fd, &mut self.buf)?;
            let msg = &self.buf[..got];
            let (Some(mlen), Some(mkind), Some(mseq)) = (u32_at(msg, 0), u16_at(msg, 4), u32_at(msg, 8))
            else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a short netlink reply",
                ));
            };
            if mseq != self.seq {
                // A late answer to an earlier request: not this one.
                continue;
            }
            let end = mlen as usize;
            let body = NLMSG_HDR_LEN + GENL_HDR_LEN;
            if end > msg.len() || end < body {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a cut netlink reply"));
            }
            if mkind == NLMSG_ERROR {
                let errno =
                    i32::from_ne_bytes(msg.get(16..20).and_then(|b| b.try_into().ok()).unwrap_or([0; 4]));
                return Err(io::Error::from_raw_os_error(-errno));
            }
            return Ok(body..end);
        }
    }
}

/// Netlink attributes back to back: (type, value), each padded to 4 bytes.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = u16_at(b, 0)? as usize;
        let kind = u16_at(b, 2)? & 0x3fff; // less the nested and byte-order flags
        if len < NLA_HDR_LEN || len > b.len() {
            return None;
        }
        let value = &b[NLA_HDR_LEN..len];
        b = b.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some((kind, value))
    })
}

/// The two figures from a reply to a TGID request: the aggregate holds the
/// process id and then `struct taskstats`.
fn stats_of(reply: &[u8]) -> Option<GroupCpu> {
    let (_, aggregate) = attrs(reply).find(|(kind, _)| *kind == TASKSTATS_TYPE_AGGR_TGID)?;
    let (_, stats) = attrs(aggregate).find(|(kind, _)| *kind == TASKSTATS_TYPE_STATS)?;
    Some(GroupCpu {
        runs: u64_at(stats, CPU_COUNT_AT)?,
        cpu_ns: u64_at(stats, CPU_VIRTUAL_NS_AT)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((NLA_HDR_LEN + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    #[test]
    fn a_reply_gives_the_runs_and_the_cpu_time() {
        let mut stats = vec![0u8; 120];
        stats[..2].copy_from_slice(&9u16.to_ne_bytes());
        stats[CPU_COUNT_AT..CPU_COUNT_AT + 8].copy_from_slice(&42u64.to_ne_bytes());
        stats[CPU_VIRTUAL_NS_AT..CPU_VIRTUAL_NS_AT + 8].copy_from_slice(&123_456_789u64.to_ne_bytes());
        let mut inner = attr(2, &77u32.to_ne_bytes());
        inner.extend(attr(TASKSTATS_TYPE_STATS, &stats));
        // The nested flag (0x8000) on the aggregate is ignored.
        let reply = attr(TASKSTATS_TYPE_AGGR_TGID | 0x8000, &inner);
        assert_eq!(
            stats_of(&reply),
            Some(GroupCpu {
                runs: 42,
                cpu_ns: 123_456_789
            })
        );
        // Cut short, or without the stats: nothing, not a panic.
        assert_eq!(stats_of(&reply[..20]), None);
        assert_eq!(stats_of(&attr(TASKSTATS_TYPE_AGGR_TGID, &attr(2, &[0; 4]))), None);
    }

    #[test]
    fn a_sleeping_process_reads_the_same_twice_and_a_busy_one_does_not() {
        let Ok(mut ts) = Taskstats::open() else {
            eprintln!("no taskstats here: skipped");
            return;
        };
        let mut sleeper = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let pair = |ts: &mut Taskstats| (ts.group(sleeper.id() as i32), ts.group(busy.id() as i32));
        let first = pair(&mut ts);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let second = pair(&mut ts);
        let _ = (sleeper.kill(), busy.kill(), sleeper.wait(), busy.wait());
        match (first, second) {
            ((Ok(s1), Ok(b1)), (Ok(s2), Ok(b2))) => {
                assert_eq!(s1, s2, "a process asleep throughout reads the same");
                assert!(
                    b2.cpu_ns > b1.cpu_ns,
                    "a busy process's CPU time grows: {b1:?} {b2:?}"
                );
            }
            ((Err(e), _), _) if e.kind() == io::ErrorKind::PermissionDenied => {
                eprintln!("taskstats needs CAP_NET_ADMIN: skipped");
            }
            other => panic!("taskstats answered {other:?}"),
        }
    }
}
