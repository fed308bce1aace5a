"""The allocator setting of benchmark workers, read back from worker processes `isolate` starts:
a timing worker's environment carries it and glibc then keeps a freed 64 MiB buffer instead of
faulting it in again; a memory worker runs with glibc's defaults; a GLIBC_TUNABLES the caller set
passes through unchanged."""

from __future__ import annotations

import platform
import sys

import pytest

from vitscale.bench import allocator, isolate
from vitscale.bench.worker import RECORD_PREFIX

# A stand-in worker: reports its GLIBC_TUNABLES and how many of a 64 MiB buffer's pages fault in
# again when it is malloc'ed, written, freed and malloc'ed again (plain malloc: glibc 2.36's
# posix_memalign cannot reuse a hole of exactly its size, see `allocator`).
READ_BACK = f"""
import ctypes, json, os, resource
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 64 << 20
def faults_of_one_buffer():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffer = libc.malloc(size)
    libc.memset(buffer, 1, size)
    libc.free(buffer)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_one_buffer()
reply = dict(tunables=os.environ.get("GLIBC_TUNABLES"), refaults=faults_of_one_buffer(), pages=size // 4096)
print({RECORD_PREFIX!r} + json.dumps(reply))
"""

ON_GLIBC = platform.libc_ver()[0] == "glibc"


@pytest.fixture
def read_back(tiny_config, monkeypatch):
    """What a worker `isolate` starts for a cell (the timing path) reports."""
    monkeypatch.setattr(isolate, "WORKER", [sys.executable, "-c", READ_BACK])
    config = tiny_config()

    def call():
        reply, reason = isolate.run_isolated_cell(config, config.configurations())
        assert reply is not None, reason
        return reply

    return call


def test_a_timing_worker_starts_with_the_allocator_setting(read_back, monkeypatch):
    monkeypatch.delenv(allocator.TUNABLES, raising=False)
    reply = read_back()
    assert reply["tunables"] == allocator.SETTING
    assert "glibc.malloc.mmap_threshold=1073741824" in reply["tunables"]
    if ON_GLIBC:  # the setting takes effect: the freed buffer stayed in the heap
        assert reply["refaults"] < reply["pages"] // 10


def test_a_tunables_variable_the_caller_set_passes_through(read_back, monkeypatch):
    monkeypatch.setenv(allocator.TUNABLES, "")  # glibc's defaults, as for a before/after timing
    reply = read_back()
    assert reply["tunables"] == ""
    if ON_GLIBC:  # above glibc's 32 MB mmap ceiling: munmap on free, every page faulted in again
        assert reply["refaults"] >= reply["pages"]


def test_a_memory_worker_keeps_glibcs_defaults(tiny_config, monkeypatch):
    """Its peak RSS is the configuration's memory: measured with the allocator every process has."""
    monkeypatch.setattr(isolate, "WORKER", [sys.executable, "-c", READ_BACK])
    monkeypatch.delenv(allocator.TUNABLES, raising=False)
    config = tiny_config()
    reply = isolate.run_isolated(config, config.configurations()[0])
    assert reply["tunables"] is None
    if ON_GLIBC:
        assert reply["refaults"] >= reply["pages"]


def test_allocator_env_adds_the_setting_only_where_none_is_set():
    assert allocator.allocator_env({}) == {allocator.TUNABLES: allocator.SETTING}
    assert allocator.allocator_env({allocator.TUNABLES: "glibc.malloc.arena_max=2"}) == {}
