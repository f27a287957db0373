//! Instruction-pointer sampling of one thread, for S1's phase detection:
//! where a thread's instructions were over a period, as samples per hashed
//! code region (`herd_profile::code_bucket`).
//!
//! perf_event samples the software `cpu-clock` event (a timer on the
//! thread's CPU time, so it works in VMs without a PMU) with
//! `PERF_SAMPLE_IP`, user space only, into a ring buffer shared with the
//! kernel. herd drains the buffer once a period. No crate wraps this ring
//! for a raw perf fd in a way that lets herd read only the IPs it needs
//! without an allocation per record, so the reader is here: a header, an
//! IP, and the kernel's head/tail protocol.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{Ordering, fence};

use herd_profile::{CODE_BUCKETS, code_bucket};
use perf_event_open_sys as sys;
use perf_event_open_sys::bindings as b;

/// Data pages of the ring: 8 x 4 KiB holds ~500 samples of 16 bytes,
/// five periods' worth at one sample per ms.
const DATA_PAGES: usize = 8;

/// One thread's IP sampler.
#[derive(Debug)]
pub struct IpSampler {
    /// Held, never read: closing it ends the sampling. Dropped after the
    /// mapping is unmapped in `drop`.
    _fd: OwnedFd,
    /// The mapping: one metadata page, then the data ring.
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping belongs to this sampler alone; the kernel writes the
// ring concurrently by design, and the head/tail protocol below orders it.
unsafe impl Send for IpSampler {}

impl IpSampler {
    /// Samples user-space IPs of thread `tid` every `period_ns` of its CPU time.
    pub fn open(tid: i32, period_ns: u64) -> io::Result<IpSampler> {
        let mut attr = b::perf_event_attr {
            type_: b::PERF_TYPE_SOFTWARE,
            config: u64::from(b::PERF_COUNT_SW_CPU_CLOCK),
            size: std::mem::size_of::<b::perf_event_attr>() as u32,
            sample_type: u64::from(b::PERF_SAMPLE_IP),
            __bindgen_anon_1: b::perf_event_attr__bindgen_ty_1 {
                sample_period: period_ns.max(10_000),
            },
            ..Default::default()
        };
        // The programs' own code: kernel IPs need perf_event_paranoid <= 1
        // and say nothing about which phase the program is in.
        attr.set_exclude_kernel(1);
        attr.set_exclude_hv(1);
        // SAFETY: attr is a fully initialised perf_event_attr whose size
        // field matches the struct; the kernel only reads it.
        let fd = unsafe { sys::perf_event_open(&mut attr, tid, -1, -1, b::PERF_FLAG_FD_CLOEXEC as u64) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor the kernel just returned.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (1 + DATA_PAGES);
        // SAFETY: mapping a perf fd with 1 + 2^n pages, shared and
        // writable (herd writes data_tail), is the documented use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(IpSampler { _fd: fd, base, len })
    }

    /// The samples since the last drain, per code bucket.
    pub fn drain(&mut self) -> [u32; CODE_BUCKETS] {
        let mut counts = [0u32; CODE_BUCKETS];
        let meta = self.base.as_ptr().cast::<b::perf_event_mmap_page>();
        // SAFETY: the first page of the mapping is the kernel's
        // perf_event_mmap_page; data_head is written by the kernel, so it
        // is read volatile, then fenced before the data it covers is read.
        let (head, tail, offset, size) = unsafe {
            let head = std::ptr::addr_of!((*meta).data_head).read_volatile();
            fence(Ordering::Acquire);
            (
                head,
                std::ptr::addr_of!((*meta).data_tail).read_volatile(),
                std::ptr::addr_of!((*meta).data_offset).read_volatile() as usize,
                std::ptr::addr_of!((*meta).data_size).read_volatile() as usize,
            )
        };
        let page = self.len / (1 + DATA_PAGES);
        let (offset, size) = if size == 0 {
            (page, self.len - page)
        } else {
            (offset, size)
        };
        // SAFETY: [offset, offset + size) lies inside the mapping.
        let data = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), size) };
        let byte = |at: u64| data[(at % size as u64) as usize];
        let read =
            |at: u64, n: usize| (0..n).fold(0u64, |v, k| v | u64::from(byte(at + k as u64)) << (8 * k));
        let mut at = tail;
        while at + 8 <= head {
            // struct perf_event_header { u32 type; u16 misc; u16 size; }
            let kind = read(at, 4) as u32;
            let len = read(at + 6, 2);
            if len < 8 {
                break;
            }
            if kind == b::PERF_RECORD_SAMPLE && len >= 16 {
                let ip = read(at + 8, 8);
                let c = &mut counts[code_bucket(ip)];
                *c = c.saturating_add(1);
            }
            at += len;
        }
        // SAFETY: data_tail is herd's to write; the fence orders the reads
        // above before the kernel may overwrite the records.
        unsafe {
            fence(Ordering::Release);
            std::ptr::addr_of_mut!((*meta).data_tail).write_volatile(head);
        }
        counts
    }
}

impl Drop for IpSampler {
    fn drop(&mut self) {
        // SAFETY: base and len are the mapping made in open, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins in one of two functions far apart in the binary.
    #[inline(never)]
    fn spin_a(n: u64) -> u64 {
        (0..n).fold(1u64, |a, x| std::hint::black_box(a.wrapping_mul(x | 1)))
    }

    #[test]
    fn this_thread_samples_its_own_code() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let mut s = match IpSampler::open(tid, 100_000) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipped: cpu-clock sampling refused here: {e}");
                return;
            }
        };
        let t0 = std::time::Instant::now();
        while t0.elapsed().as_millis() < 50 {
            std::hint::black_box(spin_a(10_000));
        }
        let counts = s.drain();
        let total: u32 = counts.iter().sum();
        // 50 ms of CPU at one sample per 0.1 ms: hundreds, minus what the
        // ring (≈500) and scheduling cost.
        assert!(total >= 50, "{counts:?}");
        // A loop lives in a few code pages (more in a debug build, where
        // nothing is inlined: 7 buckets were seen), never all 16.
        let used = counts.iter().filter(|&&c| c > 0).count();
        assert!(used <= 12, "{counts:?}");
        // Drained: nothing left until more runs.
        assert!(s.drain().iter().sum::<u32>() <= 5);
    }
}
