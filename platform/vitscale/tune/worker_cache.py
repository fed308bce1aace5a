"""What a reused trial worker keeps between trials, and what it must not.

With `reuse_actors` (see `tune.tuner`) one Ray actor runs trial after trial, so imports, the
trial function and the data stay loaded. This module holds the one thing kept on purpose — the
data — and resets everything else a trial could leave behind:

- `BundleCache`: `vitscale.data.load` results, keyed on every `DataConfig` field plus the device
  (a new resolution, cap, split seed or data set is a new entry), least recently used first out,
  bounded by bytes (`VITSCALE_DATA_CACHE_MB`, default 1024 per worker; 0 turns it off). A cached
  bundle whose tensors were modified in place (their version counter moved) is read again, and
  each trial gets its own `DataBundle` object, so a trial can neither see nor leave changes.
- `begin_trial`: before each trial, forget compiled graphs (`torch.compile` would otherwise hit
  its recompile limit after a few trials and quietly fall back to eager), turn autograd back on,
  restore the worker's default thread count and dtype, and start the process's peak RSS (CPU
  `peak_memory_mb`) again. Seeds, model, optimiser and data generator are made fresh by
  `train.fit` from the trial's own seed.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections import OrderedDict
from collections.abc import Callable

import torch

from vitscale.data import bundle

ENV_CACHE_MB = "VITSCALE_DATA_CACHE_MB"
DEFAULT_CACHE_MB = 1024
_TENSORS = ("train_images", "train_labels", "val_images", "val_labels", "test_images", "test_labels")


def bundle_key(config, device) -> tuple[str, str]:
    """Everything that changes a bundle: every DataConfig field (as JSON) and the device."""
    return config.model_dump_json(), str(torch.device(device))


def bundle_bytes(bundle) -> int:
    return sum(t.numel() * t.element_size() for t in (getattr(bundle, n) for n in _TENSORS))


def _versions(bundle) -> tuple[int, ...]:
    return tuple(getattr(bundle, n)._version for n in _TENSORS)


@dataclasses.dataclass
class _Entry:
    bundle: object
    nbytes: int
    versions: tuple[int, ...]


class BundleCache:
    """A byte-bounded LRU cache of data bundles for one worker process."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self.hits = self.misses = 0

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, config, device, read: Callable):
        """The bundle for (config, device): from the cache, else `read(config, device)` (kept if it fits)."""
        key = bundle_key(config, device)
        entry = self._entries.get(key)
        if entry is not None and _versions(entry.bundle) != entry.versions:
            del self._entries[key]  # someone wrote into the cached tensors: never hand that out
            entry = None
        if entry is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return _copy(entry.bundle)
        self.misses += 1
        bundle = read(config, device)
        nbytes = bundle_bytes(bundle)
        if nbytes <= self.max_bytes:
            while self._entries and self.nbytes + nbytes > self.max_bytes:
                self._entries.popitem(last=False)
            self._entries[key] = _Entry(bundle, nbytes, _versions(bundle))
            return _copy(bundle)
        return bundle

    def clear(self) -> None:
        self._entries.clear()


def _copy(bundle):
    """A new DataBundle sharing the (read-only by convention) tensors: field changes stay in one trial."""
    return dataclasses.replace(bundle, class_names=list(bundle.class_names))


_CACHE: BundleCache | None = None
_DEFAULTS: tuple[int, torch.dtype] | None = None


def worker_cache() -> BundleCache | None:
    """This process's cache (made on first use), or None when `VITSCALE_DATA_CACHE_MB=0`."""
    global _CACHE
    if _CACHE is None:
        mb = float(os.environ.get(ENV_CACHE_MB, DEFAULT_CACHE_MB))
        if mb <= 0:
            return None
        _CACHE = BundleCache(int(mb * 2**20))
    return _CACHE


def install() -> BundleCache | None:
    """Route `vitscale.data.load` in this process through the worker cache."""
    cache = worker_cache()
    bundle.set_cache(cache)
    return cache


def begin_trial() -> None:
    """Reset what one trial may leave in a reused worker (see the module docstring)."""
    global _DEFAULTS
    if _DEFAULTS is None:  # the worker's own settings, taken before its first trial
        _DEFAULTS = (torch.get_num_threads(), torch.get_default_dtype())
    threads, dtype = _DEFAULTS
    torch.set_num_threads(threads)
    torch.set_default_dtype(dtype)
    torch.set_grad_enabled(True)
    _reset_peak_rss()
    if "torch._dynamo" in sys.modules:  # something compiled here: drop its graphs (importing costs seconds)
        torch.compiler.reset()
    install()


def _reset_peak_rss() -> None:
    """CPU `peak_memory_mb` is the process's peak RSS: in a reused worker, start it again at this
    trial (Linux: writing 5 to /proc/self/clear_refs resets the high-water mark; elsewhere a no-op)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass
