//! What herd's two netlink users share (`proc_events`, `taskstats`): a
//! bound socket, a receive that does not wait, and reading native-endian
//! fields out of a message.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A netlink header's length.
pub(crate) const NLMSG_HDR_LEN: usize = 16;

/// A netlink socket of `kind` (`SOCK_DGRAM`, `SOCK_RAW`) for `protocol`,
/// bound with the kernel-chosen port and multicast `groups`.
pub(crate) fn socket(kind: i32, protocol: i32, groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with plain integer arguments; the descriptor is owned at once.
    let raw = unsafe { libc::socket(libc::AF_NETLINK, kind | libc::SOCK_CLOEXEC, protocol) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_nl is plain data; all zeros is valid.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    addr.nl_pid = 0;
    addr.nl_groups = groups;
    // SAFETY: `addr` is a live sockaddr_nl of the size passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Sends `msg` whole.
pub(crate) fn send(fd: &OwnedFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: `msg` is a live buffer of the length passed.
    if unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One datagram into `buf`, if one is there (`WouldBlock` if none).
pub(crate) fn recv_now(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is live and as long as passed.
    let got = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(got as usize)
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
