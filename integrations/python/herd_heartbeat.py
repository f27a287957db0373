"""herd heartbeats from Python (S4): say "one more unit of work done" per
thread, and herd (pack:palm) reads how far each thread got, with no
system call per beat.

    import herd_heartbeat
    def worker():
        for item in items:
            process(item)
            herd_heartbeat.beat()

Pure Python (mmap), no build: it writes the same shared-memory file as
herd's C and Rust library (format in crates/heartbeat/src/lib.rs): a file
herd-hb.<pid> in $HERD_HEARTBEAT_DIR (default /dev/shm), a 64-byte header,
then one 64-byte slot per thread (its thread id, whether it has exited,
its beats). A thread
claims a slot on its first beat, under a lock (the C library uses an
atomic add; in Python a lock is the atomic step); every later beat is one
8-byte aligned store to the thread's own slot, which only that thread
writes. The file is removed at exit; after a kill herd removes it.

Put this directory on PYTHONPATH (or copy the file next to the program).
"""

import atexit
import mmap
import os
import struct
import threading

MAGIC = b"HERDHB\0\x01"
VERSION = 1
CAPACITY = 1024
LINE = 64

_lock = threading.Lock()
_state = None  # (mmap, memoryview as u64, path, pid, slots handed out)
_local = threading.local()


def _path():
    return os.path.join(os.environ.get("HERD_HEARTBEAT_DIR", "/dev/shm"), f"herd-hb.{os.getpid()}")


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


def _open():
    """The process's file, made on first use. Returns None when it cannot
    be made (beats are then dropped: progress reporting never stops the
    program)."""
    global _state
    with _lock:
        if _state is not None and _state[3] == os.getpid():
            return _state
        path = _path()
        length = LINE * (1 + CAPACITY)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError:
            return None
        try:
            os.ftruncate(fd, length)
            m = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:
            _remove(path)
            return None
        finally:
            os.close(fd)
        # The magic last: a reader that sees it sees the rest.
        struct.pack_into("=II", m, 8, VERSION, CAPACITY)
        m[0:8] = MAGIC
        atexit.register(_remove, path)
        _state = [m, memoryview(m).cast("Q"), path, os.getpid(), 0]
        return _state


class _ExitMark:
    """Sets a slot's exited flag when the thread that owns it ends."""

    def __init__(self, mapping, offset):
        self.mapping, self.offset, self.pid = mapping, offset, os.getpid()

    def __del__(self):
        # A forked child drops the parent's thread-locals too, but its
        # parent's threads live on: only the process that made the mark
        # sets it.
        if os.getpid() != self.pid:
            return
        try:
            struct.pack_into("=I", self.mapping, self.offset, 1)
        except (ValueError, TypeError):
            pass  # the mapping is already closed (interpreter exit)


def _after_fork():
    # The child is another process: its own file, its threads new slots.
    global _state
    _state = None
    _local.__dict__.clear()


os.register_at_fork(after_in_child=_after_fork)


def init():
    """Makes the file now rather than at the first beat. True when it exists."""
    return _open() is not None


def beat(n=1):
    """Counts n more units of work for the calling thread. False when the
    beat was dropped (no file, or more than CAPACITY threads beat)."""
    index = getattr(_local, "index", None)
    if index is None:
        state = _open()
        if state is None:
            return False
        with _lock:
            slot = state[4]
            state[4] += 1
            struct.pack_into("=I", state[0], 16, state[4])
        if slot >= CAPACITY:
            _local.index = -1
            return False
        struct.pack_into("=i", state[0], LINE * (1 + slot), threading.get_native_id())
        # When the thread ends, its thread-locals go, and this marks the
        # slot exited (4 bytes into it), as the C library's destructor does:
        # herd then stops counting the thread between its /proc reads.
        _local.exit_mark = _ExitMark(state[0], LINE * (1 + slot) + 4)
        # The beats field: 8 bytes into the slot, as a u64 index.
        index = _local.index = (LINE * (1 + slot) + 8) // 8
    if index < 0:
        return False
    beats = _state[1]
    beats[index] += n
    return True


def close():
    """Removes the file now (it is removed at exit anyway)."""
    if _state is not None:
        _remove(_state[2])
