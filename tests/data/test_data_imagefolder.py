"""imagefolder: class subfolders of PNG/JPEG, sorted classes, common size, stratified split, errors."""

from __future__ import annotations

import pytest
import torch

from vitscale.data import DataConfig, load
from vitscale.errors import UserError


def test_loads_sorted_classes_at_the_source_size(imagefolder):
    config = DataConfig(
        dataset="imagefolder", root=str(imagefolder), resolution=32, source_size=12, val_fraction=0.4
    )
    bundle = load(config, "cpu")
    assert bundle.class_names == ["ant", "bee", "cat"]  # sorted by name, not by creation
    assert bundle.train_images.shape[1:] == (3, 12, 12) and bundle.in_chans == 3
    sizes = [bundle.train_images.shape[0], bundle.val_images.shape[0], bundle.test_images.shape[0]]
    assert sum(sizes) == 15  # notes.txt ignored
    assert torch.bincount(bundle.test_labels).tolist() == [1, 1, 1]  # the fixed stratified fifth
    assert torch.bincount(bundle.val_labels).tolist() == [2, 2, 2]  # 0.4 of the rest, stratified
    # Brightness was written as 80 * (index in "cat", "ant", "bee"): labels follow the folders.
    brightness = bundle.train_images.float().mean((1, 2, 3))
    means = [brightness[bundle.train_labels == c].mean().item() for c in range(3)]
    assert means[2] < means[0] < means[1]  # cat (0) < ant (80) < bee (160)
    assert bundle.hflip is True and bundle.crop_padding == 1
    again = load(config, "cpu")
    assert torch.equal(bundle.val_images, again.val_images)


def test_default_source_size_is_the_resolution(imagefolder):
    bundle = load(DataConfig(dataset="imagefolder", root=str(imagefolder), resolution=16), "cpu")
    assert bundle.source_size == (16, 16)


def test_grey_images_keep_one_channel(tmp_path):
    from PIL import Image

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for i in range(3):
            Image.new("L", (9, 9), color=40 * i).save(tmp_path / name / f"{i}.png")
    bundle = load(DataConfig(dataset="imagefolder", root=str(tmp_path), resolution=8), "cpu")
    assert bundle.in_chans == 1 and bundle.train_images.shape[1:] == (1, 8, 8)


def _message(config: DataConfig) -> str:
    with pytest.raises(UserError) as info:
        load(config, "cpu")
    assert "\n" not in str(info.value)
    return str(info.value)


def test_bad_roots_name_the_path_and_the_layout(tmp_path, imagefolder):
    missing = tmp_path / "missing"
    message = _message(DataConfig(dataset="imagefolder", root=str(missing)))
    assert str(missing) in message and "root/<class>/<image>" in message
    (tmp_path / "empty").mkdir()
    message = _message(DataConfig(dataset="imagefolder", root=str(tmp_path / "empty")))
    assert str(tmp_path / "empty") in message and ".png" in message
    assert "data.root" in _message(DataConfig(dataset="imagefolder"))
    broken = imagefolder / "bee" / "broken.png"
    broken.write_bytes(b"not a png")
    assert str(broken) in _message(DataConfig(dataset="imagefolder", root=str(imagefolder)))


def _save(folder, name: str, img) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    img.save(folder / name)


def test_an_empty_class_folder_is_an_error_naming_it(imagefolder):
    """A class that vanished silently would shift every later label and num_classes."""
    (imagefolder / "aardvark").mkdir()  # sorts first: dropping it would relabel every class
    (imagefolder / "zebra").mkdir()
    (imagefolder / "zebra" / "readme.txt").write_text("no images here")
    message = _message(DataConfig(dataset="imagefolder", root=str(imagefolder)))
    assert (
        f"{imagefolder / 'aardvark'}, {imagefolder / 'zebra'}" in message and "remove the folder" in message
    )


def test_hidden_folders_and_loose_files_are_not_classes(imagefolder):
    (imagefolder / ".ipynb_checkpoints").mkdir()
    (imagefolder / "labels.csv").write_text("a,b")
    (imagefolder / "loop").symlink_to(imagefolder / "loop")  # a symlink loop: not a folder
    assert load(DataConfig(dataset="imagefolder", root=str(imagefolder)), "cpu").num_classes == 3


@pytest.mark.parametrize(("per_class", "empty"), [(1, "val and test splits"), (2, "val split")])
def test_too_few_images_for_the_splits_is_an_error_not_a_zero_score(tmp_path, per_class, empty):
    """One image per class left val and test empty: training 'scored' 0 % on nothing."""
    from PIL import Image

    for name in ("a", "b", "c"):
        for i in range(per_class):
            _save(tmp_path / name, f"{i}.png", Image.new("RGB", (4, 4), color=(40 * i, 0, 0)))
    message = _message(DataConfig(dataset="imagefolder", root=str(tmp_path)))
    assert f"imagefolder at {tmp_path} leaves the {empty} empty" in message and "at least 3" in message
    for i in range(per_class, 3):
        for name in ("a", "b", "c"):
            _save(tmp_path / name, f"{i}.png", Image.new("RGB", (4, 4)))
    bundle = load(DataConfig(dataset="imagefolder", root=str(tmp_path)), "cpu")
    assert (len(bundle.train_labels), len(bundle.val_labels), len(bundle.test_labels)) == (3, 3, 3)


def test_an_empty_class_in_test_is_an_error_too(tmp_path):
    from PIL import Image

    for split in ("train", "test"):
        for name in ("a", "b"):
            _save(tmp_path / split / name, "0.png", Image.new("RGB", (4, 4)))
    (tmp_path / "test" / "c").mkdir()
    assert str(tmp_path / "test" / "c") in _message(DataConfig(dataset="imagefolder", root=str(tmp_path)))


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"\xff\xd8\xff\xe0truncated jpeg"])
def test_a_corrupt_or_empty_file_names_it(imagefolder, content):
    broken = imagefolder / "cat" / "broken.jpg"
    broken.write_bytes(content)
    message = _message(DataConfig(dataset="imagefolder", root=str(imagefolder)))
    assert f"cannot read image {broken}" in message


def test_a_truncated_png_names_it(imagefolder):
    png = imagefolder / "bee" / "3.png"
    png.write_bytes(png.read_bytes()[:60])  # inside the image data
    assert f"cannot read image {png}" in _message(DataConfig(dataset="imagefolder", root=str(imagefolder)))


def test_mixed_modes_make_an_rgb_set_and_grey_images_repeat_over_channels(tmp_path):
    """Grey (L, LA, 1-bit) and colour (RGBA, palette) in one set: RGB, alpha dropped."""
    from PIL import Image

    _save(tmp_path / "a", "grey.png", Image.new("L", (6, 6), 77))
    _save(tmp_path / "a", "grey_alpha.png", Image.new("LA", (6, 6), (99, 0)))
    _save(tmp_path / "a", "one_bit.png", Image.new("1", (6, 6), 1))
    _save(tmp_path / "b", "rgba.png", Image.new("RGBA", (6, 6), (10, 20, 30, 0)))
    _save(tmp_path / "b", "palette.png", Image.new("RGB", (6, 6), (200, 100, 50)).convert("P"))
    _save(tmp_path / "b", "tiny.png", Image.new("RGB", (1, 1), (1, 2, 3)))  # 1x1: upsampled
    src = load(DataConfig(dataset="imagefolder", root=str(tmp_path), resolution=4, val_fraction=0.3), "cpu")
    assert src.in_chans == 3 and src.source_size == (4, 4)
    pixels = {
        tuple(x[:, 0, 0].tolist())
        for x in torch.cat([src.train_images, src.val_images, src.test_images])
    }  # fmt: skip
    web_safe = (204, 102, 51)  # the palette image's colour, quantised by PIL's default palette
    assert pixels == {(77, 77, 77), (99, 99, 99), (255, 255, 255), (10, 20, 30), web_safe, (1, 2, 3)}


def test_grey_sets_with_alpha_or_16_bits_stay_one_channel_and_16_bits_scale(tmp_path):
    """A 16-bit PNG is scaled to 8 bits (value / 257), not clipped at 255."""
    import numpy as np
    from PIL import Image

    for i, level in enumerate((0, 257 * 40, 32768, 65535)):
        _save(tmp_path / "a", f"{i}.png", Image.fromarray(np.full((5, 5), level, np.uint16)))
    _save(tmp_path / "b", "grey_alpha.png", Image.new("LA", (5, 5), (7, 255)))
    _save(tmp_path / "b", "one_by_one.png", Image.new("L", (1, 1), 9))
    src = load(DataConfig(dataset="imagefolder", root=str(tmp_path), resolution=4, val_fraction=0.3), "cpu")
    assert src.in_chans == 1
    images = torch.cat([src.train_images, src.val_images, src.test_images])
    assert sorted(images[:, 0, 0, 0].tolist()) == [0, 7, 9, 40, 128, 255]
