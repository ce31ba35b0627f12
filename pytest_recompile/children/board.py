"""The spool's owner file as a shared board: the parent names the test or wider fixture
running now by writing into a memory map of the file, and a child reads the file when it
compiles.

A test's set-up, call and teardown each hand children's compiles to their owner: writing a
file each time (open, write, rename) costs a few hundred microseconds per test on an
overlay file system, in every gated test, whether or not it ever starts a child. A write into
a shared mapping costs a memory copy. The reader sees the page the writer changed (one page
cache); a sequence number, odd while the writer is mid-way, tells it to read again.

Layout: ``<seq: u64><length: u32><children: u32>`` then ``length`` bytes. A child sets
``children`` before its first record: until then the parent never looks for records (a gated
test that starts no child reads no directory).
"""

from __future__ import annotations

import mmap
import os
import struct

_HEADER = struct.Struct("<QI")
_CHILDREN = struct.Struct("<I")  # after the header
_PAYLOAD = _HEADER.size + _CHILDREN.size
_SIZE = 1 << 16  # grown (and mapped again) for a longer owner
_TRIES = 64


class Board:
    """The parent's side: one writer."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seq = 0
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._map: mmap.mmap | None = None
        self._size = 0
        self._grow(_SIZE)

    def _grow(self, size: int) -> None:
        if self._map is not None:
            self._map.close()
        os.ftruncate(self._fd, size)
        self._map = mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._size = size

    def write(self, data: bytes) -> None:
        need = _PAYLOAD + len(data)
        if need > self._size:
            # A reader mid-read of the old size sees the odd sequence number and retries.
            self._announce_busy()
            self._grow(max(need, 2 * self._size))
        board = self._map
        assert board is not None
        self._seq += 1  # odd: being written
        _HEADER.pack_into(board, 0, self._seq, len(data))
        board[_PAYLOAD:need] = data
        self._seq += 1  # even: whole
        _HEADER.pack_into(board, 0, self._seq, len(data))

    def _announce_busy(self) -> None:
        if self._map is not None:
            self._seq += 1
            _HEADER.pack_into(self._map, 0, self._seq, 0)
            self._seq += 1

    def children(self) -> bool:
        """Whether a child has recorded (or is about to record) anything yet."""
        return self._map is not None and _CHILDREN.unpack_from(self._map, _HEADER.size)[0] != 0

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        os.close(self._fd)


def read(path: str) -> bytes | None:
    """What the board holds now (a child's side), None if it cannot be read whole."""
    try:
        with open(path, "rb", buffering=0) as f:
            for _ in range(_TRIES):
                head = os.pread(f.fileno(), _HEADER.size, 0)
                if len(head) < _HEADER.size:
                    return None
                seq, length = _HEADER.unpack(head)
                if seq % 2:
                    continue
                data = os.pread(f.fileno(), length, _PAYLOAD)
                if os.pread(f.fileno(), _HEADER.size, 0) == head and len(data) == length:
                    return data
    except OSError:
        return None
    return None


def mark_child(path: str) -> None:
    """A child is about to write its first record: tell the parent to look for records."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return
    try:
        os.pwrite(fd, _CHILDREN.pack(1), _HEADER.size)
    finally:
        os.close(fd)
