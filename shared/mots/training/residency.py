"""What an idle edge process keeps resident: its memory read from ``/proc/self/smaps``, and the
release of file-backed code pages that importing touched once and that the node does not use again.

Why (issue 27, idle edge RSS ≤ 300 MiB): ``import torch`` runs the static initialisers of every
translation unit of ``libtorch_cpu.so`` (each operator's registration lives in its own), so the
import leaves about 90 MiB of that library's machine code mapped and counted in the process's RSS,
plus the code of every other extension module it touched (about 155 MiB of file-backed pages on
an idle warm node, of its 376 MiB). Those pages are clean copies of the files on disk: nothing in
them is the process's own state. :func:`release_file_pages` unmaps them (``madvise``
``MADV_DONTNEED``) once the imports are done; they stay in the kernel's page cache, where the
kernel can drop them first when memory is short (unmapped clean cache is the cheapest memory to
reclaim), and a page that runs again is mapped back from the cache on its first use (a minor
fault, no read from disk while the cache holds it). What the node then uses (its SuperNode loop,
the training step) comes back into its RSS; what only the imports used does not.

Only mappings that the process cannot have written are released: file-backed, not writable, and
with no anonymous (copy-on-write) page in them, because ``MADV_DONTNEED`` on a private file mapping
would replace a written page by the file's contents (relocations applied to ``.data.rel.ro`` live
in such pages; those mappings are skipped). Anonymous memory (the Python heap, torch's operator
tables, the allocator's arenas) is untouched: it is the process's state.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MADV_DONTNEED = 4
"""``madvise`` advice (Linux ``<asm-generic/mman-common.h>``)."""
RELEASE_ENV = "MOTS_EDGE_RELEASE_FILE_PAGES"
"""Set to ``0`` to keep the imports' file-backed pages mapped (the default releases them)."""
_PSEUDO = ("[", "anon_inode:", "/dev/", "/memfd:", "/SYSV")


@dataclass(frozen=True)
class Mapping:
    """One line of ``/proc/PID/smaps`` with the counters used here (bytes)."""

    start: int
    end: int
    perms: str
    path: str
    rss: int
    anonymous: int

    @property
    def releasable(self) -> bool:
        """File-backed, never writable, no copy-on-write page: its resident pages are the file's."""
        return (
            self.path.startswith("/")
            and not self.path.startswith(_PSEUDO)
            and not self.path.endswith(" (deleted)")
            and "w" not in self.perms
            and self.perms[3] == "p"
            and self.anonymous == 0
            and self.rss > 0
        )


def mappings(pid: int | str = "self") -> list[Mapping]:
    """Every mapping of process ``pid`` with its resident and anonymous bytes."""
    out: list[Mapping] = []
    head: list[str] | None = None
    rss = anon = 0

    def flush() -> None:
        if head is not None:
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            path = " ".join(head[5:]) if len(head) > 5 else ""
            out.append(Mapping(lo, hi, head[1], path, rss, anon))

    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if not parts:
            continue
        if not parts[0].endswith(":"):  # a mapping's header: range perms offset dev inode [path]
            flush()
            head, rss, anon = parts, 0, 0
        elif parts[0] == "Rss:":
            rss = int(parts[1]) * 1024
        elif parts[0] == "Anonymous:":
            anon = int(parts[1]) * 1024
    flush()
    return out


def memory_mib(pid: int | str = "self") -> dict[str, float]:
    """RSS, its anonymous and file-backed parts, and PSS of ``pid`` (``/proc/PID/smaps_rollup``
    and ``status``), in MiB: what the idle-memory figures report beside the bench's RSS."""
    want = {"VmRSS": "rss", "RssAnon": "rss_anon", "RssFile": "rss_file", "RssShmem": "rss_shmem"}
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in want:
            out[want[key]] = int(line.split()[1]) / 1024.0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            out["pss"] = int(line.split()[1]) / 1024.0
    return out


def release_file_pages(env: dict[str, str] | None = None) -> int:
    """Unmap this process's resident pages of file-backed code and read-only data (see the module
    docstring); returns the bytes released from its RSS (0 when disabled or not on Linux)."""
    if (os.environ if env is None else env).get(RELEASE_ENV, "1") == "0":
        return 0
    try:
        maps = mappings()
    except OSError:  # no /proc (not Linux): nothing to do
        return 0
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.madvise.restype = ctypes.c_int
    released = 0
    for m in maps:
        if not m.releasable or m.start % mmap.PAGESIZE:
            continue
        if libc.madvise(m.start, m.end - m.start, MADV_DONTNEED) == 0:
            released += m.rss
        else:
            log.debug("madvise %s: errno %d", m.path, ctypes.get_errno())
    return released
