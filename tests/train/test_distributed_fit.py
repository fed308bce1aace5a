"""`fit` in a data-parallel trial (train.distributed): disjoint shards that cover each epoch once
and together are the one-process batches, and two real gloo processes that train as one process
does with the same global batch and seed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vitscale import data as vdata
from vitscale.data.bundle import DataBundle
from vitscale.data.config import DataConfig
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT, read_predictions
from vitscale.train import fit
from vitscale.train.distributed import ONE_PROCESS, Distributed


def _numbered_bundle(n: int) -> DataBundle:
    """A training split whose labels are the image numbers, so batches show which images they hold."""
    images = torch.randint(
        0, 256, (n, 1, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    labels = torch.arange(n)
    empty = images[:0]
    return DataBundle(
        images, labels, empty, labels[:0], empty, labels[:0], n, 1, [str(i) for i in range(n)],
        (0.5,), (0.25,), True, 2, "numbered",
    )  # fmt: skip


@pytest.mark.parametrize(("n", "batch", "world"), [(100, 10, 2), (103, 12, 3), (64, 7, 4)])
def test_worker_shards_are_the_one_process_batches(n, batch, world):
    """Each global batch is split into disjoint shards (rows rank::world); together they are the
    one-process batch, image for image and augmentation for augmentation, and an epoch covers
    the set once (drop_last)."""
    bundle, config = _numbered_bundle(n), DataConfig(resolution=8, crop_padding=2, hflip=True)
    one = list(vdata.train_batches(bundle, config, batch, vdata.make_generator(bundle, 5)))
    shards = [
        list(
            vdata.train_batches(
                bundle, config, batch, vdata.make_generator(bundle, 5), Distributed(rank, world).batch_rows
            )
        )
        for rank in range(world)
    ]
    assert all(len(s) == len(one) == n // batch for s in shards)
    seen: list[int] = []
    for step, (images, labels) in enumerate(one):
        parts = [shards[rank][step] for rank in range(world)]
        for rank, (shard_images, shard_labels) in enumerate(parts):
            assert torch.equal(shard_labels, labels[rank::world])
            assert torch.equal(shard_images, images[rank::world])
        seen += torch.cat([p[1] for p in parts]).tolist()
    assert len(seen) == len(set(seen)) == (n // batch) * batch


def test_one_process_is_unchanged_by_the_defaults():
    """ONE_PROCESS changes nothing: no rows kept out, no loss weight, nothing wrapped."""
    model = torch.nn.Linear(2, 2)
    assert ONE_PROCESS.batch_rows == slice(None) and ONE_PROCESS.loss_weight(7, 64) == 1.0
    assert ONE_PROCESS.wrap(model) is model and ONE_PROCESS.span(10) == slice(0, 10)


def test_unequal_shards_weigh_to_the_global_mean():
    """DDP averages the workers' losses: weighted by their share, the average is the global mean."""
    world, total = 3, 10
    sizes = [len(range(rank, total, world)) for rank in range(world)]  # 4, 3, 3
    losses = torch.rand(total)
    weighted = [
        losses[rank::world].mean() * Distributed(rank, world).loss_weight(size, total)
        for rank, size in enumerate(sizes)
    ]
    assert torch.isclose(sum(weighted) / world, losses.mean())


# One worker of a gloo process group running `fit` (argv: rank, world, rendezvous file, trial JSON,
# checkpoint folder, result file): what a Ray Train worker does, without Ray.
WORKER = """
import json, sys
from pathlib import Path
import torch.distributed as dist
from vitscale.train import TrialConfig, fit
from vitscale.train.distributed import Distributed

rank, world, rendezvous, trial, folder, out = sys.argv[1:]
rank, world = int(rank), int(world)
dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
result = fit(TrialConfig.model_validate_json(trial), checkpoint_dir=folder, distributed=Distributed(rank, world))
wrote = Path(folder).exists() and any(Path(folder).iterdir())
Path(out).write_text(json.dumps({"rank": rank, "metrics": result.metrics, "wrote": wrote}))
dist.destroy_process_group()
"""


def _spawn_fit(tmp_path: Path, world: int, trial) -> list[dict]:
    """`fit` in `world` real processes joined by gloo; each one's final metrics, by rank."""
    processes, outs = [], []
    for rank in range(world):
        outs.append(tmp_path / f"result-{rank}.json")
        args = [str(rank), str(world), str(tmp_path / "rendezvous"), trial.model_dump_json()]
        args += [str(tmp_path / f"ckpt-{rank}"), str(outs[-1])]
        processes.append(
            subprocess.Popen([sys.executable, "-c", WORKER, *args], stderr=subprocess.PIPE, text=True)
        )
    for process in processes:
        _, err = process.communicate(timeout=1500)
        assert process.returncode == 0, err[-3000:]
    return [json.loads(out.read_text()) for out in outs]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # three trainings; 8 min on 2 cores at load 140
def test_two_gloo_workers_train_as_one_process(tmp_path, tiny_trial):
    """Two processes sharing the global batch of one: the same final accuracy (within 2 points;
    the batches being identical, in practice equal up to float rounding), world_size 2, every
    worker reporting the same all-reduced numbers, rank 0 alone writing the checkpoint and the
    whole test split's predictions beside it."""
    trial = tiny_trial()
    one = fit(trial, checkpoint_dir=tmp_path / "one").metrics
    workers = _spawn_fit(tmp_path, 2, trial)
    for outcome in workers:
        metrics = outcome["metrics"]
        assert metrics["world_size"] == 2.0 and one["world_size"] == 1.0
        assert abs(metrics["test_top1"] - one["test_top1"]) <= 0.02
        assert abs(metrics["val_top1"] - one["val_top1"]) <= 0.02
        assert metrics["images_seen"] == one["images_seen"]
        assert metrics["train_loss"] == pytest.approx(one["train_loss"], rel=1e-3)
    local = ("peak_memory_mb", "epoch_seconds", "train_images_per_second")  # each process's own
    assert [{k: v for k, v in w["metrics"].items() if k not in local} for w in workers] == [
        {k: v for k, v in workers[0]["metrics"].items() if k not in local}
    ] * 2
    assert workers[0]["wrote"] and not workers[1]["wrote"]
    written = read_predictions(tmp_path / "ckpt-0" / PREDICTIONS_ARTIFACT / "test.parquet").to_pydict()
    expected = read_predictions(tmp_path / "one" / PREDICTIONS_ARTIFACT / "test.parquet").to_pydict()
    assert written["index"] == expected["index"] and written["label"] == expected["label"]
    same = sum(a == b for a, b in zip(written["predicted"], expected["predicted"], strict=True))
    assert same >= 0.98 * len(expected["predicted"])
