"""The Tiny-ImageNet reader on fixture folders in the official layout, and center_crop."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from collapselab.data import (
    DatasetFileError,
    center_crop,
    load_dataset,
    read_tiny_imagenet,
)
from collapselab.data.registry import data_origin
from tests._tiny_imagenet_files import write_tiny_imagenet

WORDS = {
    "n001": "goldfish, Carassius auratus",
    "n002": "cardigan",
    "n003": "Cardigan, Cardigan Welsh corgi",
    "n004": "giant panda, panda, panda bear",
    "n005": "lesser panda, red panda, panda",
}


@pytest.fixture
def folder(tmp_path):
    pixels = write_tiny_imagenet(tmp_path, WORDS, n_train=3, n_val=2, extra_words=["n999\tsnorkel"])
    return tmp_path, pixels


def _expected(pixels: dict, split: str, wnids: list[str]) -> torch.Tensor:
    stacked = np.concatenate([pixels[split][w] for w in wnids])
    return torch.from_numpy(stacked.astype(np.float32) / 255.0)


def test_reads_every_class_in_wnids_order_with_exact_png_pixels(folder):
    root, pixels = folder
    data = read_tiny_imagenet(root)  # the folder holding tiny-imagenet-200
    wnids = list(WORDS)
    assert data.train.x.shape == (15, 3, 8, 8) and data.train.x.dtype == torch.float32
    assert data.train.y.tolist() == [c for c in range(5) for _ in range(3)]
    assert torch.equal(data.train.x, _expected(pixels, "train", wnids))
    assert data.test.y.tolist() == [c for c in range(5) for _ in range(2)]
    assert torch.equal(data.test.x, _expected(pixels, "val", wnids))
    assert data.train.n_classes == 5
    assert data.train.meta["class_names"] == [
        "goldfish",
        "cardigan",
        "Cardigan",
        "giant panda",
        "lesser panda",
    ]
    assert data.train.meta["wnids"] == wnids
    # the folder itself works too
    again = read_tiny_imagenet(root / "tiny-imagenet-200")
    assert torch.equal(again.train.x, data.train.x)


def test_class_names_resolve_exactly_then_ignoring_case_then_by_first_name(folder):
    root, pixels = folder
    data = read_tiny_imagenet(root, class_names=["Cardigan", "goldfish", "cardigan"])
    assert data.train.meta["wnids"] == ["n003", "n001", "n002"]  # case decides the two
    assert data.train.y.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # relabelled in that order
    assert torch.equal(data.train.x, _expected(pixels, "train", ["n003", "n001", "n002"]))
    assert read_tiny_imagenet(root, class_names=["GOLDFISH"]).train.meta["wnids"] == ["n001"]
    assert read_tiny_imagenet(root, class_names=["Carassius auratus"]).train.meta["wnids"] == [
        "n001"
    ]
    with pytest.raises(ValueError, match=r"'panda' matches several: \['n004', 'n005'\]"):
        read_tiny_imagenet(root, class_names=["panda"])
    with pytest.raises(ValueError, match="'snorkel' matches no class among the 5 WordNet ids"):
        read_tiny_imagenet(root, class_names=["snorkel"])  # in words.txt, not in the dataset
    with pytest.raises(ValueError, match="same WordNet ids twice"):
        read_tiny_imagenet(root, class_names=["goldfish", "Carassius auratus"])
    with pytest.raises(ValueError, match="wnids or class_names, not both"):
        read_tiny_imagenet(root, wnids=["n001"], class_names=["goldfish"])


def test_wnids_subset_and_balanced_subsample_decode_only_the_chosen_files(folder):
    root, pixels = folder
    data = read_tiny_imagenet(root, wnids=["n005", "n002"])
    assert data.train.y.tolist() == [0, 0, 0, 1, 1, 1]
    # validation images come in the order of val_annotations.txt (here: n002's first)
    assert data.test.y.tolist() == [1, 1, 0, 0]
    assert torch.equal(data.test.x, _expected(pixels, "val", ["n002", "n005"]))
    with pytest.raises(ValueError, match=r"unknown: \['n777'\]"):
        read_tiny_imagenet(root, wnids=["n001", "n777"])
    # a subsample draws the same files as the other readers' (seeded) and decodes only them
    for path in (root / "tiny-imagenet-200" / "train" / "n004" / "images").iterdir():
        path.write_bytes(b"not an image")  # never read: the class is not selected
    one = read_tiny_imagenet(root, wnids=["n001", "n002"], n_train_per_class=2, seed=3)
    two = read_tiny_imagenet(root, wnids=["n001", "n002"], n_train_per_class=2, seed=3)
    assert one.train.y.tolist() == [0, 0, 1, 1] and torch.equal(one.train.x, two.train.x)
    full = _expected(pixels, "train", ["n001", "n002"])
    rows = [int(torch.nonzero((full == x).all(dim=(1, 2, 3)))[0]) for x in one.train.x]
    assert len(set(rows)) == 4 and [r // 3 for r in rows] == [0, 0, 1, 1]
    with pytest.raises(DatasetFileError, match="not a readable image"):
        read_tiny_imagenet(root, wnids=["n004"])


def test_jpeg_and_grayscale_images_decode_to_rgb(tmp_path):
    write_tiny_imagenet(tmp_path, {"n1": "a", "n2": "b"}, size=16, suffix=".JPEG")
    gray = tmp_path / "tiny-imagenet-200" / "train" / "n1" / "images" / "n1_0.JPEG"
    Image.fromarray(np.full((16, 16), 200, dtype=np.uint8), mode="L").save(gray, format="JPEG")
    data = load_dataset("tiny-imagenet", data_dir=tmp_path)
    assert data.train.x.shape == (6, 3, 16, 16) and data.test.x.shape == (4, 3, 16, 16)
    first = data.train.x[0]  # the grayscale file: three equal channels near 200/255
    assert torch.equal(first[0], first[1]) and torch.equal(first[1], first[2])
    assert float((first - 200 / 255).abs().max()) < 3 / 255
    origin = data_origin("tiny_imagenet", tmp_path)
    assert origin.kind == "files" and origin.folder == str(tmp_path)


def test_missing_and_malformed_files_name_the_path_and_the_layout(folder):
    root, _ = folder
    with pytest.raises(DatasetFileError) as err:
        read_tiny_imagenet(root / "elsewhere")
    assert "data_dir is not a folder" in str(err.value) and "tiny-imagenet-200" in str(err.value)
    empty = root / "empty"
    empty.mkdir()
    with pytest.raises(DatasetFileError, match="dataset not found") as err:
        read_tiny_imagenet(empty)
    assert "wnids.txt" in str(err.value) and "train/<wnid>/images/*.JPEG" in str(err.value)
    base = root / "tiny-imagenet-200"
    shutil.rmtree(base / "train" / "n003")
    with pytest.raises(DatasetFileError, match="file not found") as err:
        read_tiny_imagenet(root)
    assert err.value.path == base / "train" / "n003" / "images"
    assert read_tiny_imagenet(root, wnids=["n001"]).train.y.numel() == 3  # others still read
    (base / "val" / "val_annotations.txt").write_text("val_0.png\tn001\n")
    with pytest.raises(DatasetFileError, match=r"no validation image of the classes \['n002'\]"):
        read_tiny_imagenet(root, wnids=["n001", "n002"])
    (base / "val" / "val_annotations.txt").unlink()
    with pytest.raises(DatasetFileError, match="file not found") as err:
        read_tiny_imagenet(root, wnids=["n001"])
    assert err.value.path == base / "val" / "val_annotations.txt"
    (base / "words.txt").unlink()
    with pytest.raises(DatasetFileError, match=r"words\.txt"):
        read_tiny_imagenet(root, class_names=["goldfish"])
    (base / "wnids.txt").write_text("n001\nn001\n")
    with pytest.raises(DatasetFileError, match=r"repeated WordNet ids \['n001'\]"):
        read_tiny_imagenet(root)


def test_images_of_different_sizes_are_a_clear_error(folder):
    root, _ = folder
    odd = root / "tiny-imagenet-200" / "train" / "n002" / "images" / "n002_1.png"
    Image.fromarray(np.zeros((9, 8, 3), dtype=np.uint8)).save(odd)
    with pytest.raises(DatasetFileError, match="image of 9 x 8, the others are 8 x 8") as err:
        read_tiny_imagenet(root)
    assert err.value.path == odd


def test_center_crop_keeps_the_central_pixels():
    x = torch.arange(2 * 3 * 6 * 5, dtype=torch.float32).reshape(2, 3, 6, 5)
    out = center_crop(x, 3)
    assert torch.equal(out, x[:, :, 1:4, 1:4])  # (6 - 3) // 2 = 1 row, (5 - 3) // 2 = 1 column
    assert torch.equal(center_crop(x, (6, 5)), x)
    assert torch.equal(center_crop(x, (2, 4)), x[:, :, 2:4, 0:4])
    with pytest.raises(ValueError, match="cannot crop images of 6 x 5 to a larger 6 x 6"):
        center_crop(x, 6)
    with pytest.raises(ValueError, match=r"expects images \(N, C, H, W\)"):
        center_crop(x[0], 2)
