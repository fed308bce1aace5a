"""Streaming holds host memory flat: once an epoch has warmed the allocator up (glibc's heap settles
within the first epoch, tens of MB), reading on through a generated JPEG folder (the second epoch's
batches 6 to 30, 1,536 images more) does not raise the anonymous and shared memory (PSS) of the
process and its DataLoader worker by more than FLAT_MB, read at the same point of a step each time.
The control, the same epochs keeping every batch they read, must grow by more than HELD_MB: the
measurement sees a loader that holds images. (That the index, the only thing of a streamed set that
grows with it, stays small: docs/performance.md, 10,000 against 100,000 images.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vitscale.data.fake_images import generate

IMAGES = 2200  # 1,980 training images once validation is held out: 30 batches of 64 an epoch
SIZE = 64  # decoded side
RESOLUTION = 96  # an augmented image: 108 KiB of float32, a batch 7 MB
BATCH = 64
FLAT_MB = 25.0  # what the heap moved by between readings in runs here: -26 to +2 MB
HELD_MB = 100.0  # the control keeps 24 batches more at the second reading: 170 MB

# Two epochs in a fresh interpreter; prints the tree's anonymous + shared PSS in MB after the 6th
# and the last training batch of the second. The statistics sample is capped to keep the load short.
MEASURE = """
import json, os, sys
from vitscale.data import DataConfig, load, make_generator, stream_bundle, train_batches
from vitscale.data.host_memory import tree_pss_kb

stream_bundle.STATS_IMAGES = 200
root, size, resolution, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
hold = sys.argv[5] == "hold"
config = DataConfig(dataset="imagefolder", root=root, loader="stream", num_workers=1, source_size=size,
                    resolution=resolution)
bundle = load(config, "cpu")
generator, held, readings = make_generator(bundle, 0), [], []
for epoch in (1, 2):
    step = 0
    for images, _ in train_batches(bundle, config, batch, generator):
        step += 1
        if hold:
            held.append(images)
        if epoch == 2 and step == 6:
            readings.append(tree_pss_kb(os.getpid(), ("Pss_Anon:", "Pss_Shmem:")) / 1024)
    if epoch == 2:
        readings.append(tree_pss_kb(os.getpid(), ("Pss_Anon:", "Pss_Shmem:")) / 1024)
print(json.dumps(readings))
"""


def _growth_mb(root, hold: bool = False) -> float:
    argv = [sys.executable, "-c", MEASURE, str(root), str(SIZE), str(RESOLUTION), str(BATCH)]
    argv.append("hold" if hold else "read")
    run = subprocess.run(argv, capture_output=True, text=True, env=os.environ, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    first, last = json.loads(run.stdout.strip().splitlines()[-1])
    return last - first


@pytest.mark.slow
def test_streaming_memory_stays_flat_as_the_epoch_reads_on(tmp_path):
    root = generate(tmp_path / "set", "folder", IMAGES, IMAGES // 10, classes=10, size=SIZE)
    flat, held = _growth_mb(root), _growth_mb(root, hold=True)
    print(
        f"memory over epoch 2, batches 6 to 30 of {BATCH}: +{flat:.1f} MB; holding the batches +{held:.1f} MB"
    )
    assert held > HELD_MB, f"the control grew by {held:.1f} MB only: the measurement misses held images"
    assert flat < FLAT_MB, f"streaming grew by {flat:.1f} MB while reading 1,536 more images"
