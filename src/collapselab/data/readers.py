"""Readers for image datasets stored locally in their official distribution formats.

Nothing is ever downloaded: each reader looks for the files under ``data_dir`` and raises
:class:`~collapselab.data.errors.DatasetFileError` (naming the file, the expected layout
and the official source) when one is missing or malformed. Every reader returns a
:class:`DataSplits` with ``x`` as float32 ``(N, C, H, W)`` in ``[0, 1]`` (the uint8 pixel
divided by 255) and int64 labels, and accepts

* ``classes``: keep only these class ids, relabelled ``0..len(classes)-1`` in the given order;
* ``n_train_per_class`` / ``n_test_per_class``: balanced random subsets (drawn with ``seed``
  before the conversion to float, so large datasets are subsampled cheaply).

Formats: IDX (MNIST, Fashion-MNIST; gzipped or raw), Python pickles (CIFAR-10/100; loaded
with an unpickler that only admits numpy arrays) or CIFAR's binary records (the
``-binary.tar.gz`` distributions; the pickles are read where both are present), MATLAB v5
``.mat`` (SVHN), raw column-major binaries (STL-10) and folders of JPEG images
(Tiny-ImageNet; decoded with Pillow, a dependency of matplotlib).
"""

from __future__ import annotations

import gzip
import importlib
import pickle
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from collapselab.checks import check_choice, check_int, check_seed
from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.data.errors import DatasetFileError
from collapselab.data.locations import Place, install_hint, search_places
from collapselab.data.transforms import _balanced_index


@dataclass(frozen=True)
class _Source:
    """A file-based dataset: its name, expected layout, official source, and ``markers``,
    paths relative to a folder whose presence shows that the folder holds the dataset."""

    name: str
    layout: str
    url: str
    markers: tuple[str, ...]

    @property
    def install(self) -> str:
        return install_hint(self.name, self.url)


def _idx_markers(folders: Sequence[str]) -> tuple[str, ...]:
    names = ("train-images-idx3-ubyte", "train-images.idx3-ubyte")
    return tuple(
        f"{folder}/{name}{gz}" if folder else f"{name}{gz}"
        for folder in ("", *folders)
        for name in names
        for gz in ("", ".gz")
    )


_MNIST_FOLDERS = ("MNIST/raw", "mnist")
_FASHION_FOLDERS = ("FashionMNIST/raw", "fashion_mnist", "fashion-mnist")


_MNIST = _Source(
    "mnist",
    "IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
    "t10k-labels-idx1-ubyte (each optionally .gz) directly in data_dir or in data_dir/MNIST/raw",
    "https://yann.lecun.com/exdb/mnist/ (mirror: https://ossci-datasets.s3.amazonaws.com/mnist/)",
    _idx_markers(_MNIST_FOLDERS),
)
_FASHION = _Source(
    "fashion_mnist",
    "IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
    "t10k-labels-idx1-ubyte (each optionally .gz) directly in data_dir or in "
    "data_dir/FashionMNIST/raw",
    "https://github.com/zalandoresearch/fashion-mnist "
    "(files: http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/)",
    _idx_markers(_FASHION_FOLDERS),
)
_CIFAR10 = _Source(
    "cifar10",
    "the folder cifar-10-batches-py (from cifar-10-python.tar.gz) in data_dir, holding the "
    "pickles data_batch_1 ... data_batch_5 and test_batch with keys b'data' (10000 x 3072 "
    "uint8) and b'labels'; or the folder cifar-10-batches-bin (from cifar-10-binary.tar.gz) "
    "holding data_batch_1.bin ... data_batch_5.bin and test_batch.bin, records of 1 label "
    "byte and 3072 pixel bytes",
    "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz (or cifar-10-binary.tar.gz)",
    (
        "cifar-10-batches-py/test_batch",
        "test_batch",
        "cifar-10-batches-bin/test_batch.bin",
        "test_batch.bin",
    ),
)
_CIFAR100 = _Source(
    "cifar100",
    "the folder cifar-100-python (from cifar-100-python.tar.gz) in data_dir, holding the "
    "pickles train and test with keys b'data' (N x 3072 uint8), b'fine_labels' and "
    "b'coarse_labels' (and optionally meta); or the folder cifar-100-binary (from "
    "cifar-100-binary.tar.gz) holding train.bin and test.bin, records of 1 coarse-label "
    "byte, 1 fine-label byte and 3072 pixel bytes",
    "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz (or cifar-100-binary.tar.gz)",
    ("cifar-100-python/test", "test", "cifar-100-binary/test.bin", "test.bin"),
)
_SVHN = _Source(
    "svhn",
    "MATLAB files train_32x32.mat and test_32x32.mat (optionally extra_32x32.mat) in data_dir "
    "or data_dir/svhn, each with X of shape (32, 32, 3, N) uint8 and y of shape (N, 1) in 1..10",
    "http://ufldl.stanford.edu/housenumbers/ (the 'Format 2' cropped digits)",
    ("train_32x32.mat", "svhn/train_32x32.mat", "SVHN/train_32x32.mat"),
)
_STL10 = _Source(
    "stl10",
    "the folder stl10_binary (from stl10_binary.tar.gz) in data_dir, holding train_X.bin, "
    "train_y.bin, test_X.bin, test_y.bin (uint8; images 3 x 96 x 96 column-major, labels 1..10)",
    "https://ai.stanford.edu/~acoates/stl10/ (stl10_binary.tar.gz)",
    ("stl10_binary/test_X.bin", "test_X.bin"),
)

_TINY_IMAGENET = _Source(
    "tiny_imagenet",
    "the folder tiny-imagenet-200 (from tiny-imagenet-200.zip) in data_dir, holding "
    "wnids.txt (one WordNet id per line), words.txt (optional: '<wnid><TAB><names>'), "
    "train/<wnid>/images/*.JPEG for every wnid, and val/images/*.JPEG with "
    "val/val_annotations.txt ('<file><TAB><wnid><TAB>...' per line)",
    "http://cs231n.stanford.edu/tiny-imagenet-200.zip",
    ("tiny-imagenet-200/wnids.txt", "wnids.txt"),
)

_CIFAR10_NAMES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
_CIFAR100_COARSE_NAMES = (
    "aquatic_mammals",
    "fish",
    "flowers",
    "food_containers",
    "fruit_and_vegetables",
    "household_electrical_devices",
    "household_furniture",
    "insects",
    "large_carnivores",
    "large_man-made_outdoor_things",
    "large_natural_outdoor_scenes",
    "large_omnivores_and_herbivores",
    "medium_mammals",
    "non-insect_invertebrates",
    "people",
    "reptiles",
    "small_mammals",
    "trees",
    "vehicles_1",
    "vehicles_2",
)
_FASHION_NAMES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
_STL10_NAMES = (
    "airplane",
    "bird",
    "car",
    "cat",
    "deer",
    "dog",
    "horse",
    "monkey",
    "ship",
    "truck",
)


def _missing(path: Path, source: _Source, tried: Sequence[Path] = ()) -> DatasetFileError:
    others = tuple(str(p) for p in tried if p != path)
    return DatasetFileError(
        path, f"{source.name}: file not found", source.layout, source.install, others
    )


def _corrupt(path: Path, source: _Source, detail: str) -> DatasetFileError:
    return DatasetFileError(
        path, f"{source.name}: malformed file ({detail})", source.layout, source.install
    )


def _holds(folder: Path, source: _Source) -> bool:
    return any((folder / marker).is_file() for marker in source.markers)


def _describe_place(place: Place) -> str:
    text = place.describe()
    if place.path is not None and not place.path.is_dir():
        text += ": does not exist" if not place.path.exists() else ": not a folder"
    return text


def _data_dir(data_dir: str | Path | None, source: _Source) -> Path:
    """The first place that holds ``source``: ``data_dir``, ``$COLLAPSELAB_DATA_DIR``, then
    the system package's folder (:mod:`collapselab.data.locations`).

    A ``data_dir`` that is given must be a folder (a typo is an error, not a reason to read
    other files). When no place holds the dataset, the error names every place looked and
    how to install the dataset.
    """
    if data_dir is not None:
        if not isinstance(data_dir, (str, Path)):
            raise TypeError(f"data_dir must be a str or Path, got {type(data_dir).__name__}")
        given = Path(data_dir).expanduser()
        if not given.is_dir():
            raise DatasetFileError(
                given, f"{source.name}: data_dir is not a folder", source.layout, source.install
            )
    places = search_places(source.name, data_dir)
    for place in places:
        if place.path is not None and place.path.is_dir() and _holds(place.path, source):
            return place.path
    first = next((p.path for p in places if p.path is not None), Path("."))
    given = () if data_dir is not None else ("--data-dir (not given)",)
    raise DatasetFileError(
        first / source.markers[0],
        f"{source.name}: dataset not found",
        source.layout,
        source.install,
        looked_in=(*given, *(_describe_place(p) for p in places)),
    )


def _locate(candidates: Sequence[Path], source: _Source) -> Path:
    for path in candidates:
        if path.is_file():
            return path
    raise _missing(candidates[0], source, candidates)


# ----------------------------------------------------------------------------- IDX (MNIST)

_IDX_UBYTE = 0x08


def _read_bytes(path: Path, source: _Source) -> bytes:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":  # gzip magic, whatever the file is called
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise _corrupt(path, source, f"invalid gzip stream: {err}") from err
    return raw


def _read_idx(path: Path, ndim: int, source: _Source) -> np.ndarray:
    """An IDX array of unsigned bytes: magic ``00 00 08 ndim``, big-endian int32 sizes, data."""
    raw = _read_bytes(path, source)
    expected_magic = 0x0800 | ndim
    if len(raw) < 4 + 4 * ndim:
        raise _corrupt(path, source, f"{len(raw)} bytes is too short for an IDX header")
    (magic,) = struct.unpack(">I", raw[:4])
    if magic != expected_magic:
        raise _corrupt(
            path,
            source,
            f"IDX magic number 0x{magic:08x}, expected 0x{expected_magic:08x} "
            f"(unsigned bytes, {ndim} dimension{'s' if ndim > 1 else ''})",
        )
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    payload = raw[4 + 4 * ndim :]
    if len(payload) != int(np.prod(dims)):
        raise _corrupt(
            path,
            source,
            f"header sizes {dims} need {int(np.prod(dims))} data bytes, found {len(payload)}",
        )
    return np.frombuffer(payload, dtype=np.uint8).reshape(dims)


def _idx_candidates(root: Path, stem: str, folders: Sequence[str]) -> list[Path]:
    names = [stem, stem.replace("-idx", ".idx")]
    dirs = [root, *(root / f for f in folders)]
    return [d / (n + gz) for d in dirs for n in names for gz in ("", ".gz")]


def _idx_split(
    root: Path, prefix: str, folders: Sequence[str], source: _Source
) -> tuple[np.ndarray, np.ndarray, list[Path]]:
    image_path = _locate(_idx_candidates(root, f"{prefix}-images-idx3-ubyte", folders), source)
    label_path = _locate(_idx_candidates(root, f"{prefix}-labels-idx1-ubyte", folders), source)
    images = _read_idx(image_path, 3, source)
    labels = _read_idx(label_path, 1, source)
    if images.shape[1:] != (28, 28):
        raise _corrupt(image_path, source, f"images are {images.shape[1:]}, expected 28 x 28")
    if labels.shape[0] != images.shape[0]:
        raise _corrupt(label_path, source, f"{labels.shape[0]} labels for {images.shape[0]} images")
    if labels.size and labels.max() > 9:
        raise _corrupt(label_path, source, f"label {int(labels.max())} outside 0..9")
    return images[:, None], labels.astype(np.int64), [image_path, label_path]


def _read_idx_dataset(
    data_dir: str | Path | None,
    source: _Source,
    folders: Sequence[str],
    names: Sequence[str],
    options: dict,
) -> DataSplits:
    root = _data_dir(data_dir, source)
    x_tr, y_tr, f_tr = _idx_split(root, "train", folders, source)
    x_te, y_te, f_te = _idx_split(root, "t10k", folders, source)
    return _finish(source, (x_tr, y_tr), (x_te, y_te), 10, names, [*f_tr, *f_te], **options)


# ------------------------------------------------------------------- pickles (CIFAR-10/100)

_PICKLE_GLOBALS = {
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Admits only what pickled numpy arrays need, so a tampered file cannot run code."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load the global {module}.{name}")
        # numpy 2 renamed numpy.core to numpy._core; the CIFAR pickles predate that.
        for candidate in (module.replace("numpy.core", "numpy._core"), module):
            try:
                return getattr(importlib.import_module(candidate), name)
            except (ImportError, AttributeError):
                continue
        raise pickle.UnpicklingError(f"cannot resolve {module}.{name}")


def _load_pickle(path: Path, source: _Source) -> dict:
    try:
        with path.open("rb") as handle:
            obj = _ArrayUnpickler(handle, encoding="bytes").load()
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        ImportError,
        struct.error,
    ) as err:
        raise _corrupt(path, source, f"not a readable pickle: {err}") from err
    if not isinstance(obj, dict):
        raise _corrupt(path, source, f"expected a dict, found {type(obj).__name__}")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _cifar_batch(path: Path, label_keys: Sequence[str], n_labels: Sequence[int], source: _Source):
    batch = _load_pickle(path, source)
    missing = [k for k in ("data", *label_keys) if k not in batch]
    if missing:
        raise _corrupt(path, source, f"missing keys {missing}; found {sorted(batch)}")
    data = batch["data"]
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2):
        raise _corrupt(path, source, "b'data' must be a 2-D uint8 array")
    if data.shape[1] != 3 * 32 * 32:
        raise _corrupt(path, source, f"b'data' rows have {data.shape[1]} bytes, expected 3072")
    labels = []
    for key, k in zip(label_keys, n_labels, strict=True):
        y = np.asarray(batch[key], dtype=np.int64)
        if y.shape != (data.shape[0],):
            raise _corrupt(path, source, f"{key}: {y.shape[0]} labels for {data.shape[0]} images")
        if y.size and (y.min() < 0 or y.max() >= k):
            raise _corrupt(path, source, f"{key} outside 0..{k - 1}")
        labels.append(y)
    # Rows are 1024 red, 1024 green, 1024 blue values, each a row-major 32 x 32 plane.
    return data.reshape(-1, 3, 32, 32), labels


def _dataset_folder(root: Path, folder: str, marker: str) -> Path:
    return root / folder if (root / folder).is_dir() or not (root / marker).is_file() else root


def _cifar_records(path: Path, n_labels: Sequence[int], source: _Source):
    """A file of CIFAR's binary distribution: fixed-size records of ``len(n_labels)`` label
    bytes (CIFAR-100: coarse, then fine) and 3072 pixel bytes in the pickles' order (1024 red,
    1024 green, 1024 blue, each plane row-major). Returns what :func:`_cifar_batch` does."""
    raw = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    width = len(n_labels) + 3 * 32 * 32
    if raw.size == 0 or raw.size % width:
        raise _corrupt(
            path, source, f"{raw.size} bytes, not a whole number of {width}-byte records"
        )
    rows = raw.reshape(-1, width)
    labels = []
    for j, k in enumerate(n_labels):
        y = rows[:, j].astype(np.int64)
        if y.max() >= k:
            raise _corrupt(path, source, f"label byte {j} outside 0..{k - 1}")
        labels.append(y)
    return rows[:, len(n_labels) :].reshape(-1, 3, 32, 32), labels


def _cifar_layout(
    root: Path, python: tuple[str, str], binary: tuple[str, str]
) -> tuple[Path, bool]:
    """The folder to read and whether it holds the binary layout: ``python`` and ``binary``
    are each a (folder, marker file) pair; the pickles win where both are present, and a
    folder that holds neither is read as the pickles' (the error then names their files)."""
    pickles = _dataset_folder(root, *python)
    if (pickles / python[1]).is_file():
        return pickles, False
    records = _dataset_folder(root, *binary)
    if (records / binary[1]).is_file():
        return records, True
    return pickles, False


def _text_names(path: Path, n: int) -> list[str] | None:
    """The class names of a binary distribution's text file (one per non-empty line), or
    ``None`` when it is missing or does not hold ``n`` names."""
    if not path.is_file():
        return None
    names = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return names if len(names) == n else None


def _names(meta: dict, key: str, default: Sequence[str] | None, n: int) -> list[str]:
    values = meta.get(key)
    if isinstance(values, list) and len(values) == n:
        return [v.decode() if isinstance(v, bytes) else str(v) for v in values]
    return list(default) if default is not None else [f"class_{i}" for i in range(n)]


def read_cifar10(
    data_dir: str | Path,
    classes: Sequence[int] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
) -> DataSplits:
    """CIFAR-10 from ``data_dir/cifar-10-batches-py`` (the pickles) or
    ``data_dir/cifar-10-batches-bin`` (the binary records): 3 x 32 x 32, 50000/10000 images.

    ``classes=(3, 5)`` gives the "cats and dogs" task of paper 002. See the module docstring
    for the other options.
    """
    root, binary = _cifar_layout(
        _data_dir(data_dir, _CIFAR10),
        ("cifar-10-batches-py", "test_batch"),
        ("cifar-10-batches-bin", "test_batch.bin"),
    )
    suffix = ".bin" if binary else ""
    files = [root / f"data_batch_{i}{suffix}" for i in range(1, 6)] + [root / f"test_batch{suffix}"]
    parts = []
    for path in files:
        if not path.is_file():
            raise _missing(path, _CIFAR10)
        if binary:
            parts.append(_cifar_records(path, [10], _CIFAR10))
        else:
            parts.append(_cifar_batch(path, ["labels"], [10], _CIFAR10))
    x_tr = np.concatenate([p[0] for p in parts[:5]])
    y_tr = np.concatenate([p[1][0] for p in parts[:5]])
    if binary:
        names = _text_names(root / "batches.meta.txt", 10) or list(_CIFAR10_NAMES)
    else:
        meta_path = root / "batches.meta"
        meta = _load_pickle(meta_path, _CIFAR10) if meta_path.is_file() else {}
        names = _names(meta, "label_names", _CIFAR10_NAMES, 10)
    return _finish(
        _CIFAR10,
        (x_tr, y_tr),
        (parts[5][0], parts[5][1][0]),
        10,
        names,
        files,
        classes=classes,
        n_train_per_class=n_train_per_class,
        n_test_per_class=n_test_per_class,
        seed=seed,
    )


def _superclass_index(superclass: str | int, coarse_names: Sequence[str]) -> int:
    if isinstance(superclass, str):
        key = superclass.strip().lower().replace(" ", "_")
        if key not in coarse_names:
            raise ValueError(f"superclass must be one of {list(coarse_names)}, got {superclass!r}")
        return list(coarse_names).index(key)
    return check_int("superclass", superclass, minimum=0, maximum=len(coarse_names) - 1)


def read_cifar100(
    data_dir: str | Path,
    label_type: str = "fine",
    superclass: str | int | None = None,
    classes: Sequence[int] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
) -> DataSplits:
    """CIFAR-100 from ``data_dir/cifar-100-python`` (the pickles) or
    ``data_dir/cifar-100-binary`` (the binary records): 3 x 32 x 32, 50000/10000 images.

    Args:
        label_type: ``"fine"`` (100 classes) or ``"coarse"`` (20 superclasses).
        superclass: keep only one superclass, by name (``"small mammals"`` or
            ``"small_mammals"``) or index in 0..19; its 5 fine classes are relabelled 0..4 in
            increasing fine-label order (paper 002's "small mammals": hamster, mouse, rabbit,
            shrew, squirrel). Requires ``label_type="fine"``.
        classes: then keep these ids of the resulting label space (see module docstring).
    """
    check_choice("label_type", label_type, ("fine", "coarse"))
    if superclass is not None and label_type != "fine":
        raise ValueError("superclass selects fine classes; use it with label_type='fine'")
    root, binary = _cifar_layout(
        _data_dir(data_dir, _CIFAR100),
        ("cifar-100-python", "test"),
        ("cifar-100-binary", "test.bin"),
    )
    files = [root / "train.bin", root / "test.bin"] if binary else [root / "train", root / "test"]
    parts = []
    for path in files:
        if not path.is_file():
            raise _missing(path, _CIFAR100)
        if binary:  # records: coarse byte first, then fine; returned in the pickles' order
            x, (coarse, fine) = _cifar_records(path, [20, 100], _CIFAR100)
            parts.append((x, [fine, coarse]))
        else:
            keys = ["fine_labels", "coarse_labels"]
            parts.append(_cifar_batch(path, keys, [100, 20], _CIFAR100))
    if binary:
        fine_names = _text_names(root / "fine_label_names.txt", 100) or _names({}, "", None, 100)
        coarse_names = _text_names(root / "coarse_label_names.txt", 20) or list(
            _CIFAR100_COARSE_NAMES
        )
    else:
        meta_path = root / "meta"
        meta = _load_pickle(meta_path, _CIFAR100) if meta_path.is_file() else {}
        fine_names = _names(meta, "fine_label_names", None, 100)
        coarse_names = _names(meta, "coarse_label_names", _CIFAR100_COARSE_NAMES, 20)
    (x_tr, (fine_tr, coarse_tr)), (x_te, (fine_te, coarse_te)) = parts
    extra_meta: dict = {"label_type": label_type, "superclass": superclass}
    if label_type == "coarse":
        train, test, n_classes, names = (x_tr, coarse_tr), (x_te, coarse_te), 20, coarse_names
    elif superclass is None:
        train, test, n_classes, names = (x_tr, fine_tr), (x_te, fine_te), 100, fine_names
    else:
        s = _superclass_index(superclass, coarse_names)
        fine_ids = np.unique(fine_tr[coarse_tr == s])
        if fine_ids.size == 0:
            raise _corrupt(files[0], _CIFAR100, f"no training image of superclass {s}")
        lookup = np.full(100, -1, dtype=np.int64)
        lookup[fine_ids] = np.arange(fine_ids.size)
        keep_tr, keep_te = coarse_tr == s, coarse_te == s
        train = (x_tr[keep_tr], lookup[fine_tr[keep_tr]])
        test = (x_te[keep_te], lookup[fine_te[keep_te]])
        if (test[1] < 0).any():
            raise _corrupt(files[1], _CIFAR100, "test fine labels disagree with the superclass")
        n_classes, names = int(fine_ids.size), [fine_names[i] for i in fine_ids]
        extra_meta["superclass_fine_ids"] = fine_ids.tolist()
    return _finish(
        _CIFAR100,
        train,
        test,
        n_classes,
        names,
        files,
        classes=classes,
        n_train_per_class=n_train_per_class,
        n_test_per_class=n_test_per_class,
        seed=seed,
        extra_meta=extra_meta,
    )


# ------------------------------------------------------------------------- SVHN (.mat v5)


def _read_svhn_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from scipy.io import loadmat

    try:
        mat = loadmat(str(path))
    except NotImplementedError as err:  # MATLAB v7.3 (HDF5) files
        raise _corrupt(path, _SVHN, f"unsupported MATLAB version: {err}") from err
    except Exception as err:  # scipy raises many types for garbage input
        raise _corrupt(path, _SVHN, f"not a readable MATLAB file: {err}") from err
    if "X" not in mat or "y" not in mat:
        keys = sorted(k for k in mat if not k.startswith("__"))
        raise _corrupt(path, _SVHN, f"variables X and y required, found {keys}")
    x, y = mat["X"], np.asarray(mat["y"])
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.dtype != np.uint8:
        raise _corrupt(path, _SVHN, f"X is {x.dtype} {x.shape}, expected uint8 (32, 32, 3, N)")
    if y.size != x.shape[3]:
        raise _corrupt(path, _SVHN, f"{y.size} labels for {x.shape[3]} images")
    y = y.reshape(-1)
    if y.size and (np.any(y != np.round(y)) or y.min() < 1 or y.max() > 10):
        raise _corrupt(path, _SVHN, "labels must be integers in 1..10 (10 is digit 0)")
    y = y.astype(np.int64) % 10  # the distribution stores digit 0 as label 10
    return np.ascontiguousarray(x.transpose(3, 2, 0, 1)), y  # (H, W, C, N) -> (N, C, H, W)


def read_svhn(
    data_dir: str | Path,
    include_extra: bool = False,
    classes: Sequence[int] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
) -> DataSplits:
    """SVHN cropped digits (3 x 32 x 32) from ``train_32x32.mat`` / ``test_32x32.mat``.

    Label 10 in the files is digit 0, so labels are the digits 0..9. With ``include_extra``
    the 531131 images of ``extra_32x32.mat`` are appended to the training split.
    """
    root = _data_dir(data_dir, _SVHN)

    def find(name: str) -> Path:
        return _locate([root / name, root / "svhn" / name, root / "SVHN" / name], _SVHN)

    files = [find("train_32x32.mat"), find("test_32x32.mat")]
    x_tr, y_tr = _read_svhn_mat(files[0])
    if include_extra:
        files.append(find("extra_32x32.mat"))
        x_ex, y_ex = _read_svhn_mat(files[2])
        x_tr, y_tr = np.concatenate([x_tr, x_ex]), np.concatenate([y_tr, y_ex])
    names = [str(d) for d in range(10)]
    return _finish(
        _SVHN,
        (x_tr, y_tr),
        _read_svhn_mat(files[1]),
        10,
        names,
        files,
        classes=classes,
        n_train_per_class=n_train_per_class,
        n_test_per_class=n_test_per_class,
        seed=seed,
        extra_meta={"include_extra": bool(include_extra)},
    )


# ------------------------------------------------------------------------ STL-10 (binary)

_STL_IMAGE_BYTES = 3 * 96 * 96


def _read_stl_split(root: Path, prefix: str) -> tuple[np.ndarray, np.ndarray, list[Path]]:
    x_path, y_path = root / f"{prefix}_X.bin", root / f"{prefix}_y.bin"
    for path in (x_path, y_path):
        if not path.is_file():
            raise _missing(path, _STL10)
    x = np.fromfile(x_path, dtype=np.uint8)
    y = np.fromfile(y_path, dtype=np.uint8)
    if x.size % _STL_IMAGE_BYTES:
        raise _corrupt(
            x_path, _STL10, f"{x.size} bytes is not a multiple of 3 x 96 x 96 = {_STL_IMAGE_BYTES}"
        )
    n = x.size // _STL_IMAGE_BYTES
    if y.size != n:
        raise _corrupt(y_path, _STL10, f"{y.size} labels for {n} images")
    if y.size and (y.min() < 1 or y.max() > 10):
        raise _corrupt(y_path, _STL10, "labels must lie in 1..10")
    # Each channel is stored column-major (Fortran order): swap to (N, C, H, W) row-major.
    images = np.ascontiguousarray(x.reshape(n, 3, 96, 96).transpose(0, 1, 3, 2))
    return images, y.astype(np.int64) - 1, [x_path, y_path]


def read_stl10(
    data_dir: str | Path,
    classes: Sequence[int] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
) -> DataSplits:
    """STL-10 labelled images (3 x 96 x 96; 5000 train, 8000 test) from ``stl10_binary``.

    Labels 1..10 in the files become 0..9. The unlabelled images are not read.
    """
    root = _dataset_folder(_data_dir(data_dir, _STL10), "stl10_binary", "test_X.bin")
    x_tr, y_tr, f_tr = _read_stl_split(root, "train")
    x_te, y_te, f_te = _read_stl_split(root, "test")
    names_path = root / "class_names.txt"
    names = list(_STL10_NAMES)
    if names_path.is_file():
        lines = [s.strip() for s in names_path.read_text().splitlines() if s.strip()]
        names = lines if len(lines) == 10 else names
    return _finish(
        _STL10,
        (x_tr, y_tr),
        (x_te, y_te),
        10,
        names,
        [*f_tr, *f_te],
        classes=classes,
        n_train_per_class=n_train_per_class,
        n_test_per_class=n_test_per_class,
        seed=seed,
    )


def read_mnist(
    data_dir: str | Path,
    classes: Sequence[int] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
) -> DataSplits:
    """MNIST (1 x 28 x 28; 60000/10000 images) from its IDX files, gzipped or not."""
    options = {
        "classes": classes,
        "n_train_per_class": n_train_per_class,
        "n_test_per_class": n_test_per_class,
        "seed": seed,
    }
    names = [str(d) for d in range(10)]
    return _read_idx_dataset(data_dir, _MNIST, _MNIST_FOLDERS, names, options)


def read_fashion_mnist(
    data_dir: str | Path,
    classes: Sequence[int] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
) -> DataSplits:
    """Fashion-MNIST (1 x 28 x 28; 60000/10000 images) from its IDX files, gzipped or not."""
    options = {
        "classes": classes,
        "n_train_per_class": n_train_per_class,
        "n_test_per_class": n_test_per_class,
        "seed": seed,
    }
    return _read_idx_dataset(data_dir, _FASHION, _FASHION_FOLDERS, list(_FASHION_NAMES), options)


# ------------------------------------------------------------ Tiny-ImageNet (JPEG folders)

_IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise _missing(path, _TINY_IMAGENET)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise _corrupt(path, _TINY_IMAGENET, f"not UTF-8 text: {err}") from err
    return [line.strip() for line in text.splitlines() if line.strip()]


def _tiny_wnids(root: Path) -> list[str]:
    path = root / "wnids.txt"
    wnids = _read_lines(path)
    if not wnids:
        raise _corrupt(path, _TINY_IMAGENET, "no WordNet id in it")
    repeated = sorted({w for w in wnids if wnids.count(w) > 1})
    if repeated:
        raise _corrupt(path, _TINY_IMAGENET, f"repeated WordNet ids {repeated}")
    return wnids


def _tiny_words(root: Path, wnids: Sequence[str]) -> dict[str, list[str]]:
    """The names of each of ``wnids`` from ``words.txt`` (``wnid<TAB>name, name, ...``),
    ``{}`` when the file is absent."""
    path = root / "words.txt"
    if not path.is_file():
        return {}
    wanted, words = set(wnids), {}
    for line in _read_lines(path):
        wnid, _, names = line.partition("\t")
        if wnid in wanted:
            words[wnid] = [n.strip() for n in names.split(",") if n.strip()]
    return words


def _resolve_class_names(
    names: Sequence[str], wnids: Sequence[str], words: dict[str, list[str]], root: Path
) -> list[str]:
    """The wnid of each class name: the one wnid (among the dataset's) whose names in
    ``words.txt`` include it exactly, else ignoring case; where several do, the one whose
    first name it is; no match or several is an error naming the candidates."""
    if not words:
        raise _missing(root / "words.txt", _TINY_IMAGENET)
    chosen = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"class_names must be non-empty strings, got {name!r}")
        matches: list[str] = []
        for same in (lambda a, b: a == b, lambda a, b: a.lower() == b.lower()):
            matches = [w for w in wnids if any(same(n, name) for n in words.get(w, []))]
            if matches:
                break
        if len(matches) > 1:
            first = [w for w in matches if words[w][0].lower() == name.lower()]
            matches = first if len(first) == 1 else matches
        if len(matches) != 1:
            found = "no class" if not matches else f"several: {matches}"
            raise ValueError(
                f"Tiny-ImageNet class name {name!r} matches {found} among the "
                f"{len(wnids)} WordNet ids of {root / 'wnids.txt'} (names from "
                f"{root / 'words.txt'}); pass wnids=[...] instead"
            )
        chosen.append(matches[0])
    repeated = sorted({w for w in chosen if chosen.count(w) > 1})
    if repeated:
        raise ValueError(f"class_names select the same WordNet ids twice: {repeated}")
    return chosen


def _image_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise _missing(folder, _TINY_IMAGENET)
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
    if not files:
        raise _corrupt(folder, _TINY_IMAGENET, f"no image file ({', '.join(_IMAGE_SUFFIXES)})")
    return files


def _tiny_val(root: Path, index: dict[str, int]) -> tuple[list[Path], np.ndarray]:
    """The validation images of the selected classes (``index``: wnid -> label)."""
    path = root / "val" / "val_annotations.txt"
    files, labels = [], []
    for number, line in enumerate(_read_lines(path), start=1):
        parts = line.split("\t")
        if len(parts) < 2:
            raise _corrupt(path, _TINY_IMAGENET, f"line {number} is not '<file><TAB><wnid>...'")
        if parts[1] in index:
            files.append(root / "val" / "images" / parts[0])
            labels.append(index[parts[1]])
    absent = sorted(set(index) - {w for w, i in index.items() if i in set(labels)})
    if absent:
        raise _corrupt(path, _TINY_IMAGENET, f"no validation image of the classes {absent}")
    return files, np.asarray(labels, dtype=np.int64)


def _decode_images(files: Sequence[Path]) -> np.ndarray:
    """``(N, 3, H, W)`` uint8 RGB pixels of ``files`` (grayscale images become RGB); every
    image must have the size of the first."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as err:  # Pillow comes with matplotlib; say so if it is missing
        raise ImportError(
            "reading Tiny-ImageNet's JPEG files needs Pillow: pip install pillow"
        ) from err
    images = []
    for path in files:
        if not path.is_file():
            raise _missing(path, _TINY_IMAGENET)
        try:
            with Image.open(path) as image:
                pixels = np.asarray(image.convert("RGB"), dtype=np.uint8)
        except (UnidentifiedImageError, OSError, SyntaxError) as err:
            raise _corrupt(path, _TINY_IMAGENET, f"not a readable image: {err}") from err
        if images and pixels.shape != images[0].shape:
            raise _corrupt(
                path,
                _TINY_IMAGENET,
                f"image of {pixels.shape[0]} x {pixels.shape[1]}, the others are "
                f"{images[0].shape[0]} x {images[0].shape[1]}",
            )
        images.append(pixels)
    if not images:
        return np.zeros((0, 3, 64, 64), dtype=np.uint8)
    return np.ascontiguousarray(np.stack(images).transpose(0, 3, 1, 2))


def _pick(
    files: list[Path], y: np.ndarray, n_classes: int, n: int | None, seed: int, stream: int
) -> tuple[list[Path], np.ndarray]:
    """A balanced random subset of ``n`` files per class (all when ``n`` is None), drawn
    as :func:`_finish` draws it, so that only the chosen files are decoded."""
    if n is None:
        return files, y
    n = check_int("n_per_class", n, minimum=1)
    index = _balanced_index(torch.from_numpy(y), n_classes, n, seed, stream).numpy()
    return [files[i] for i in index], y[index]


def read_tiny_imagenet(
    data_dir: str | Path,
    wnids: Sequence[str] | None = None,
    class_names: Sequence[str] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
) -> DataSplits:
    """Tiny-ImageNet (3 x 64 x 64; 200 classes of 500 training and 50 validation images)
    from the folder ``tiny-imagenet-200`` (the official zip, unpacked).

    The labelled ``val`` split is the test split (the ``test`` folder has no labels and is
    not read). Classes are those of ``wnids.txt`` in its order, or a subset, relabelled
    ``0..k-1`` in the given order: ``wnids`` (WordNet ids) or ``class_names`` (names from
    ``words.txt``, matched exactly, else ignoring case, among the dataset's ids; paper 000
    names its 50 classes this way, A.3). ``n_train_per_class`` / ``n_test_per_class``
    subsample before decoding, so only the chosen JPEGs are read.
    """
    if wnids is not None and class_names is not None:
        raise ValueError("give wnids or class_names, not both")
    seed = check_seed("seed", seed)
    root = _dataset_folder(_data_dir(data_dir, _TINY_IMAGENET), "tiny-imagenet-200", "wnids.txt")
    every = _tiny_wnids(root)
    words = _tiny_words(root, every)
    if class_names is not None:
        if isinstance(class_names, str):
            raise TypeError("class_names must be a sequence of names, not one string")
        selected = _resolve_class_names(list(class_names), every, words, root)
    elif wnids is not None:
        if isinstance(wnids, str):
            raise TypeError("wnids must be a sequence of WordNet ids, not one string")
        selected = list(wnids)
        unknown = [w for w in selected if w not in every]
        if unknown or not selected or len(set(selected)) != len(selected):
            raise ValueError(
                f"wnids must be distinct ids of {root / 'wnids.txt'}, at least one; "
                f"unknown: {unknown}, given: {selected}"
            )
    else:
        selected = every
    index = {w: i for i, w in enumerate(selected)}
    train_files, train_y = [], []
    for wnid in selected:
        found = _image_files(root / "train" / wnid / "images")
        train_files += found
        train_y += [index[wnid]] * len(found)
    k = len(selected)
    train = _pick(train_files, np.asarray(train_y, dtype=np.int64), k, n_train_per_class, seed, 0)
    test = _pick(*_tiny_val(root, index), k, n_test_per_class, seed, 1)
    names = [(words.get(w) or [w])[0] for w in selected]
    return _finish(
        _TINY_IMAGENET,
        (_decode_images(train[0]), train[1]),
        (_decode_images(test[0]), test[1]),
        k,
        names,
        [root / "wnids.txt", root / "train", root / "val" / "val_annotations.txt"],
        seed=seed,
        extra_meta={"wnids": selected},
    )


_SOURCES = {
    source.name: source
    for source in (_MNIST, _FASHION, _CIFAR10, _CIFAR100, _SVHN, _STL10, _TINY_IMAGENET)
}


def dataset_folder(name: str, data_dir: str | Path | None = None) -> Path:
    """The folder file-based dataset ``name`` would be read from (nothing is read).

    Searched as every reader searches: ``data_dir``, ``$COLLAPSELAB_DATA_DIR``, then the
    system package's folder. Raises :class:`DatasetFileError` naming every place looked and
    how to install the dataset when none holds it.
    """
    if name not in _SOURCES:
        raise ValueError(f"{name!r} is not a file-based dataset; those are {list(_SOURCES)}")
    return _data_dir(data_dir, _SOURCES[name])


# ------------------------------------------------------------------------------ assembly


def _class_map(classes: Sequence[int] | None, n_classes: int) -> np.ndarray | None:
    if classes is None:
        return None
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
        raise TypeError(f"classes must be a sequence of class ids, got {type(classes).__name__}")
    ids = [check_int("classes entry", c, minimum=0) for c in classes]
    if not ids or len(set(ids)) != len(ids) or max(ids) >= n_classes:
        raise ValueError(
            f"classes must be distinct ids in [0, {n_classes}), at least one, got {list(classes)}"
        )
    lookup = np.full(n_classes, -1, dtype=np.int64)
    lookup[ids] = np.arange(len(ids))
    return lookup


def _to_split(
    x: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    n_per_class: int | None,
    seed: int,
    stream: int,
    name: str,
    meta: dict,
) -> LabeledData:
    y_t = torch.from_numpy(np.ascontiguousarray(y, dtype=np.int64))
    if n_per_class is not None:
        index = _balanced_index(y_t, n_classes, n_per_class, seed, stream).numpy()
        x, y_t = x[index], y_t[index]
    images = np.asarray(x, dtype=np.float32)  # a fresh, writable copy of the uint8 data
    images /= 255.0
    images = torch.from_numpy(np.ascontiguousarray(images))
    return LabeledData(images, y_t, n_classes, name, meta)


def _finish(
    source: _Source,
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    n_classes: int,
    names: Sequence[str],
    files: Sequence[Path],
    classes: Sequence[int] | None = None,
    n_train_per_class: int | None = None,
    n_test_per_class: int | None = None,
    seed: int = 0,
    extra_meta: dict | None = None,
) -> DataSplits:
    seed = check_seed("seed", seed)
    counts = {}
    for key, value in (
        ("n_train_per_class", n_train_per_class),
        ("n_test_per_class", n_test_per_class),
    ):
        counts[key] = None if value is None else check_int(key, value, minimum=1)
    lookup = _class_map(classes, n_classes)
    class_ids = list(range(n_classes))
    if lookup is not None:
        kept = []
        for x, y in (train, test):
            mask = lookup[y] >= 0
            kept.append((x[mask], lookup[y[mask]]))
        train, test = kept
        class_ids = [int(c) for c in classes]
        n_classes = len(class_ids)
    meta = {
        "source": source.name,
        "files": [str(f) for f in files],
        "class_ids": class_ids,
        "class_names": [names[c] for c in class_ids],
        "seed": seed,
        **(extra_meta or {}),
    }
    n_train, n_test = counts["n_train_per_class"], counts["n_test_per_class"]
    return DataSplits(
        _to_split(*train, n_classes, n_train, seed, 0, source.name, {**meta, "split": "train"}),
        _to_split(*test, n_classes, n_test, seed, 1, source.name, {**meta, "split": "test"}),
    )
