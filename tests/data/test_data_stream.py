"""data.loader stream: generated JPEG folders and tar shards read from disk batch by batch give the
batches the in-memory loader gives for a seed; data-parallel workers read disjoint rows; bad paths
and damaged files are one line naming them; config and CLI refuse what cannot be streamed."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import torch

from vitscale.cli import main
from vitscale.data import DataConfig, eval_batches, load, make_generator, train_batches
from vitscale.data.fake_images import generate
from vitscale.errors import DataError, UserError
from vitscale.train.distributed import Distributed

LAYOUTS = {"folder": "imagefolder", "shards": "shards"}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """layout -> root of a tiny generated set: 3 classes, 80 train + 24 test JPEGs of 16 px."""
    base = tmp_path_factory.mktemp("generated")
    return {
        layout: generate(base / layout, layout, train=80, test=24, classes=3, size=16) for layout in LAYOUTS
    }


def _config(generated, layout: str, loader: str, workers: int = 0, **extra) -> DataConfig:
    return DataConfig(
        dataset=LAYOUTS[layout],
        root=str(generated[layout]),
        loader=loader,
        num_workers=workers,
        resolution=16,
        **extra,
    )


def _epochs(config: DataConfig, bundle, keep=slice(None), epochs: int = 2) -> list:
    gen = make_generator(bundle, 7)
    return [batch for _ in range(epochs) for batch in train_batches(bundle, config, 32, gen, keep)]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_streamed_batches_are_the_in_memory_batches(generated, layout, workers):
    """Same index, split, statistics, shuffle and augmentation draws: bit-identical batches."""
    memory_config = _config(generated, layout, "memory", val_fraction=0.25)
    stream_config = _config(generated, layout, "stream", workers, val_fraction=0.25)
    memory, stream = load(memory_config, "cpu"), load(stream_config, "cpu")
    assert type(stream).__name__ == "StreamBundle" and type(memory).__name__ == "DataBundle"
    assert (stream.mean, stream.std, stream.in_chans) == (memory.mean, memory.std, 3)  # grey JPEGs among them
    assert stream.class_names == memory.class_names and stream.num_classes == 3
    for split in ("train", "val", "test"):
        assert torch.equal(getattr(stream, f"{split}_labels"), getattr(memory, f"{split}_labels"))
    assert len(stream.test_labels) == 24 and len(stream.train_labels) + len(stream.val_labels) == 80
    pairs = list(zip(_epochs(memory_config, memory), _epochs(stream_config, stream), strict=True))
    for split in ("val", "test"):
        pairs += zip(
            eval_batches(memory, memory_config, 10, split),
            eval_batches(stream, stream_config, 10, split),
            strict=True,
        )
    assert len(pairs) == 2 + 2 + 3  # 60 train images / 32 (drop_last), twice; 20 val and 24 test / 10
    for (memory_x, memory_y), (stream_x, stream_y) in pairs:
        assert torch.equal(memory_x, stream_x) and torch.equal(memory_y, stream_y)


def test_the_epoch_shuffle_follows_the_seed(generated):
    config = _config(generated, "shards", "stream")
    bundle = load(config, "cpu")
    first, second = _epochs(config, bundle, epochs=2)[:2], _epochs(config, bundle, epochs=2)[2:]
    again = _epochs(config, bundle, epochs=1)
    assert all(torch.equal(a[1], b[1]) for a, b in zip(first, again, strict=True))  # same seed, same epoch
    assert not torch.equal(first[0][1], second[0][1])  # the next epoch is shuffled anew


def test_data_parallel_workers_read_disjoint_rows_of_each_global_batch(generated):
    """Rank r reads rows r::2 of each global batch: together the one-process batch, nothing twice."""
    config = _config(generated, "folder", "stream", 1)
    bundle = load(config, "cpu")
    whole = _epochs(config, bundle)
    shards = [_epochs(config, bundle, Distributed(rank, 2).batch_rows) for rank in (0, 1)]
    for (x, y), (x0, y0), (x1, y1) in zip(whole, *shards, strict=True):
        assert torch.equal(y0, y[0::2]) and torch.equal(y1, y[1::2])
        assert torch.equal(x0, x[0::2]) and torch.equal(x1, x[1::2])


def test_caps_hold_out_the_rows_the_memory_loader_holds_out(generated):
    extra = {"num_train": 30, "num_val": 6, "num_test": 9}
    memory = load(_config(generated, "shards", "memory", **extra), "cpu")
    stream = load(_config(generated, "shards", "stream", **extra), "cpu")
    for split in ("train", "val", "test"):
        assert torch.equal(getattr(stream, f"{split}_labels"), getattr(memory, f"{split}_labels"))
    assert (len(stream.train_labels), len(stream.val_labels), len(stream.test_labels)) == (30, 6, 9)


def _one_line(config: DataConfig) -> str:
    with pytest.raises(UserError) as info:
        bundle = load(config, "cpu")
        list(eval_batches(bundle, config, 8, "test"))
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_missing_root_is_one_line_naming_it(tmp_path, layout):
    missing = tmp_path / "nowhere"
    for loader in ("memory", "stream"):
        config = DataConfig(dataset=LAYOUTS[layout], root=str(missing), loader=loader)
        assert str(missing) in _one_line(config)
    assert "data.root" in _one_line(DataConfig(dataset=LAYOUTS[layout], loader="stream"))


def test_a_damaged_jpeg_read_by_a_worker_is_one_line_naming_the_file(tmp_path):
    root = generate(tmp_path / "set", "folder", train=30, test=9, classes=3, size=16)
    broken = sorted((root / "val" / "c001").iterdir())[0]
    broken.write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    message = _one_line(DataConfig(dataset="imagefolder", root=str(root), loader="stream", num_workers=1))
    assert f"imagefolder: cannot read image {broken}" in message
    broken.unlink()
    config = DataConfig(dataset="imagefolder", root=str(root), loader="stream", num_workers=0, resolution=16)
    bundle = load(config, "cpu")
    sorted((root / "val" / "c002").iterdir())[0].unlink()  # indexed, then gone: the read names it
    with pytest.raises(DataError, match="cannot read image .*c002.*No such file"):
        list(eval_batches(bundle, config, 8, "test"))


def _shard(path, members: dict[str, bytes], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode=mode) as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def _jpeg() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buffer, format="JPEG")
    return buffer.getvalue()


def test_shards_read_classes_txt_and_name_what_is_wrong(tmp_path):
    samples = {f"s{i}.jpg": _jpeg() for i in range(12)} | {
        f"s{i}.cls": str(i % 2).encode() for i in range(12)
    }
    _shard(tmp_path / "ok" / "shard-000000.tar", samples)
    (tmp_path / "ok" / "classes.txt").write_text("red\nblue\n")
    bundle = load(
        DataConfig(dataset="shards", root=str(tmp_path / "ok"), loader="stream", resolution=8), "cpu"
    )
    assert bundle.class_names == ["red", "blue"]
    assert (
        len(bundle.train_labels) + len(bundle.val_labels) + len(bundle.test_labels) == 12
    )  # fixed fifth held out
    unlabelled = tmp_path / "unlabelled" / "shard-000000.tar"
    _shard(unlabelled, {"a.jpg": _jpeg(), "a.cls": b"0", "b.jpg": _jpeg()})
    message = _one_line(DataConfig(dataset="shards", root=str(unlabelled.parent), loader="stream"))
    assert str(unlabelled) in message and "'b'" in message
    compressed = tmp_path / "gz" / "shard-000000.tar"
    _shard(compressed, samples, mode="w:gz")
    message = _one_line(DataConfig(dataset="shards", root=str(compressed.parent), loader="stream"))
    assert str(compressed) in message and "uncompressed tar" in message
    (tmp_path / "none").mkdir()
    assert "holds no .tar" in _one_line(
        DataConfig(dataset="shards", root=str(tmp_path / "none"), loader="stream")
    )


def test_the_loader_is_a_registered_name_and_streaming_needs_a_reader():
    with pytest.raises(
        ValueError, match=r"loader: unknown loader 'disk'; choose one of \['memory', 'stream'\]"
    ):
        DataConfig(loader="disk")
    with pytest.raises(ValueError, match="loader: data set 'digits' cannot be read with loader 'stream'"):
        DataConfig(dataset="digits", loader="stream")
    with pytest.raises(ValueError, match="num_workers"):
        DataConfig(dataset="shards", loader="stream", num_workers=-1)
    assert DataConfig().loader == "memory"  # small sets stay on the device unless told


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["--dataset", "digits", "--loader", "stream"],
            "loader: data set 'digits' cannot be read with loader 'stream'",
        ),
        (["--dataset", "shards", "--loader", "tape"], "loader: unknown loader 'tape'"),
        (["--dataset", "shards", "--root", "/no/such/shards", "--loader", "stream"], "/no/such/shards"),
    ],
)
def test_cli_errors_are_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as info:
        main(["data", "info", *argv])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and needle in err and len(err.splitlines()) == 1


def test_cli_measures_a_streamed_epoch_and_its_host_memory(generated, capsys):
    main(["data", "info", "--dataset", "shards", "--root", str(generated["shards"]), "--loader", "stream",
          "--num-workers", "1", "--throughput", "--epochs", "1", "-r", "16", "--batch-size", "16", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["loader"] == "stream" and out["num_workers"] == 1
    assert out["throughput"]["images"] == 64 and out["throughput"]["peak_host_pss_mb"] > 0


def test_a_study_names_data_loader_and_its_schema_documents_it(tmp_path, capsys):
    from vitscale.study import study_schema

    study = tmp_path / "streamed.yaml"
    study.write_text(
        "name: streamed\ntrial:\n  data: {dataset: digits, loader: stream, num_workers: 2}\n"
        "search: {algorithm: grid, seeds: [0]}\nobjectives: [{metric: val_top1, mode: max}]\n"
    )
    with pytest.raises(SystemExit) as info:
        main(["study", "validate", str(study)])
    err = capsys.readouterr().err
    assert (
        info.value.code == 2 and "data.loader: data set 'digits' cannot be read with loader 'stream'" in err
    )
    data = study_schema()["$defs"]["DataConfig"]["properties"]
    assert "stream" in data["loader"]["description"] and data["num_workers"]["minimum"] == 0
