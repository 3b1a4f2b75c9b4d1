"""Tests for skcce.datasets on small files written in the exact on-disk formats (no download)."""

import gzip
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skcce import datasets as ds
from skcce.datasets import CIFAR100_COARSE_OF_FINE, get_data_home, load_dataset, read_idx

RNG = np.random.default_rng(0)


# ---------------------------------------------------------------- writers of the real formats


def write_idx(path, arr, *, gz=False, code=0x08):
    arr = np.asarray(arr)
    header = bytes([0, 0, code, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    payload = header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(str(path) + ".gz", "wb") as f:
            f.write(payload)
    else:
        path.write_bytes(payload)


def make_mnist(folder, n_train=6, n_test=4, *, gz=False):
    out = {}
    for split, n, prefix in [("train", n_train, "train"), ("test", n_test, "t10k")]:
        X = RNG.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        y = RNG.integers(0, 10, size=n).astype(np.uint8)
        write_idx(folder / f"{prefix}-images-idx3-ubyte", X, gz=gz)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", y, gz=gz)
        out[split] = (X, y)
    return out


def dump(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)  # the original files are Python-2 pickles


def make_cifar10(root, per_batch=3, n_test=4):
    folder = root / "cifar-10-batches-py"
    imgs, labs = [], []
    for i in range(1, 6):
        data = RNG.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = RNG.integers(0, 10, size=per_batch).tolist()
        dump(folder / f"data_batch_{i}", {"data": data, "labels": labels, "batch_label": "x"})
        imgs.append(data)
        labs += labels
    test = RNG.integers(0, 256, size=(n_test, 3072), dtype=np.uint8)
    test_labels = RNG.integers(0, 10, size=n_test).tolist()
    dump(folder / "test_batch", {"data": test, "labels": test_labels})
    dump(folder / "batches.meta", {"label_names": [f"c{i}" for i in range(10)]})
    return np.concatenate(imgs), np.array(labs), test, np.array(test_labels)


def make_cifar100(root, n_train=8, n_test=5, *, coarse=True):
    folder = root / "cifar-100-python"
    out = {}
    for split, n in [("train", n_train), ("test", n_test)]:
        data = RNG.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        fine = RNG.integers(0, 100, size=n)
        entry = {"data": data, "fine_labels": fine.tolist(), "filenames": ["f"] * n}
        if coarse:
            entry["coarse_labels"] = CIFAR100_COARSE_OF_FINE[fine].tolist()
        dump(folder / split, entry)
        out[split] = (data, fine)
    dump(folder / "meta", {"fine_label_names": [f"f{i}" for i in range(100)]})
    return out


def make_stl10(root, n_train=2, n_test=3):
    folder = root / "stl10_binary"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n in [("train", n_train), ("test", n_test)]:
        raw = RNG.integers(0, 256, size=(n, 3, 96, 96), dtype=np.uint8)
        y = RNG.integers(1, 11, size=n).astype(np.uint8)
        raw.tofile(folder / f"{split}_X.bin")
        y.tofile(folder / f"{split}_y.bin")
        out[split] = (raw, y)
    return out


# ---------------------------------------------------------------- IDX reader


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_roundtrip(tmp_path, gz):
    arr = RNG.integers(0, 256, size=(3, 4, 5), dtype=np.uint8)
    write_idx(tmp_path / "a-idx3-ubyte", arr, gz=gz)
    got = read_idx(tmp_path / ("a-idx3-ubyte" + (".gz" if gz else "")))
    assert got.dtype == np.uint8 and np.array_equal(got, arr)


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    code_dtype=st.sampled_from([(0x08, np.uint8), (0x0B, np.int16), (0x0D, np.float32)]),
    seed=st.integers(0, 2**16),
)
def test_read_idx_roundtrip_property(tmp_path_factory, shape, code_dtype, seed):
    code, dtype = code_dtype
    arr = (np.random.default_rng(seed).normal(size=shape) * 100).astype(dtype)
    path = tmp_path_factory.mktemp("idx") / "x-ubyte"
    write_idx(path, arr, code=code)
    got = read_idx(path, expected_dtype=dtype)
    assert got.shape == tuple(shape) and got.dtype == np.dtype(dtype)
    assert np.array_equal(got, arr)


def test_read_idx_other_dtype_big_endian(tmp_path):
    arr = np.array([[1, -2], [300, 70000]], dtype=np.int32)
    write_idx(tmp_path / "i", arr, code=0x0C)
    assert np.array_equal(read_idx(tmp_path / "i", expected_dtype=np.int32), arr)
    with pytest.raises(ValueError, match="expected uint8"):
        read_idx(tmp_path / "i")


def test_read_idx_corrupt_and_truncated(tmp_path):
    arr = RNG.integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
    write_idx(tmp_path / "ok", arr)
    raw = (tmp_path / "ok").read_bytes()
    (tmp_path / "short").write_bytes(raw[:-10])
    with pytest.raises(ValueError, match="Truncated IDX"):
        read_idx(tmp_path / "short")
    (tmp_path / "header").write_bytes(raw[:9])
    with pytest.raises(ValueError, match="header cut short"):
        read_idx(tmp_path / "header")
    (tmp_path / "long").write_bytes(raw + b"xx")
    with pytest.raises(ValueError, match="unexpected bytes"):
        read_idx(tmp_path / "long")
    (tmp_path / "magic").write_bytes(b"\x1f\x8b" + raw[2:])
    with pytest.raises(ValueError, match="bad magic number"):
        read_idx(tmp_path / "magic")
    with gzip.open(tmp_path / "cut.gz", "wb") as f:
        f.write(raw)
    gz = (tmp_path / "cut.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(gz[: len(gz) // 2])
    with pytest.raises(ValueError, match="Corrupt IDX"):
        read_idx(tmp_path / "cut.gz")


# ---------------------------------------------------------------- MNIST family


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_splits(tmp_path, gz):
    ref = make_mnist(tmp_path / "MNIST" / "raw", gz=gz)
    X, y = load_dataset("mnist", root=tmp_path, split="train")
    assert X.shape == (6, 28, 28) and X.dtype == np.uint8 and y.dtype == np.int64
    assert np.array_equal(X, ref["train"][0]) and np.array_equal(y, ref["train"][1])
    Xt, yt = load_dataset("mnist", root=tmp_path, split="test")
    assert np.array_equal(Xt, ref["test"][0]) and np.array_equal(yt, ref["test"][1])
    Xa, ya = load_dataset("mnist", root=tmp_path)
    assert np.array_equal(Xa, np.concatenate([X, Xt])) and np.array_equal(ya, np.r_[y, yt])


def test_mnist_agrees_with_torchvision_reader(tmp_path):
    tv = pytest.importorskip("torchvision.datasets")
    make_mnist(tmp_path / "MNIST" / "raw")
    X, y = load_dataset("mnist", root=tmp_path, split="test")
    ref = tv.MNIST(root=str(tmp_path), train=False, download=False)
    assert np.array_equal(X, ref.data.numpy()) and np.array_equal(y, ref.targets.numpy())


def test_fashion_mnist_from_root_and_env(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "no-debian")
    ref = make_mnist(tmp_path / "FashionMNIST" / "raw")
    monkeypatch.setenv("SKCCE_DATA", str(tmp_path))
    assert get_data_home() == tmp_path
    X, y = load_dataset("fashion-mnist", split="train")
    assert np.array_equal(X, ref["train"][0])


def test_inconsistent_idx_counts(tmp_path):
    folder = tmp_path / "MNIST" / "raw"
    make_mnist(folder)
    write_idx(folder / "t10k-labels-idx1-ubyte", np.zeros(3, dtype=np.uint8))
    with pytest.raises(ValueError, match="Inconsistent IDX"):
        load_dataset("mnist", root=tmp_path, split="test")


def test_missing_dataset_messages(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "no-debian")
    with pytest.raises(FileNotFoundError, match="download=True") as err:
        load_dataset("mnist", root=tmp_path)
    assert "train-images-idx3-ubyte" in str(err.value) and str(tmp_path) in str(err.value)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        load_dataset("fashion-mnist", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="data_batch_1"):
        load_dataset("cifar10", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="cifar-100-python"):
        load_dataset("cifar100-20", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="train_X.bin"):
        load_dataset("stl10", root=tmp_path)
    # one split present, the other missing
    make_stl10(tmp_path)
    (tmp_path / "stl10_binary" / "test_y.bin").unlink()
    load_dataset("stl10", root=tmp_path, split="train")
    with pytest.raises(FileNotFoundError, match="test_y.bin"):
        load_dataset("stl10", root=tmp_path, split="all")


def test_unknown_name_and_split(tmp_path):
    with pytest.raises(ValueError, match=r"known names are \['mnist', 'fashion-mnist'"):
        load_dataset("imagenet", root=tmp_path)
    with pytest.raises(ValueError, match="split must be one of"):
        load_dataset("mnist", root=tmp_path, split="val")


def test_default_root(monkeypatch):
    monkeypatch.delenv("SKCCE_DATA", raising=False)
    assert get_data_home().parts[-3:] == (".cache", "skcce", "datasets")
    assert not str(get_data_home()).startswith("~")


def test_download_is_delegated_to_torchvision(tmp_path, monkeypatch):
    tv = pytest.importorskip("torchvision.datasets")
    calls = []

    class FakeCIFAR10:
        def __init__(self, root, train, download):
            calls.append((root, train, download))
            make_cifar10(tmp_path)

    monkeypatch.setattr(tv, "CIFAR10", FakeCIFAR10)
    X, y = load_dataset("cifar10", root=tmp_path, download=True)
    assert calls == [(str(tmp_path), True, True)] and X.shape == (19, 32, 32, 3)
    load_dataset("cifar10", root=tmp_path, download=True)  # files present: no second call
    assert len(calls) == 1


@pytest.mark.skipif(
    not all(
        (ds.DEBIAN_FASHION_MNIST_DIR / f).is_file()
        for f in ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    ),
    reason="Debian package dataset-fashion-mnist not installed",
)
def test_debian_fashion_mnist(tmp_path):
    X, y = load_dataset("fashion-mnist", root=tmp_path / "empty", split="test")
    assert X.shape == (10000, 28, 28) and X.dtype == np.uint8
    assert y.dtype == np.int64 and np.array_equal(np.bincount(y), np.full(10, 1000))
    assert X.max() == 255 and X.min() == 0


# ---------------------------------------------------------------- CIFAR


def test_cifar10_layout_and_orientation(tmp_path):
    train, ytr, test, yte = make_cifar10(tmp_path)
    X, y = load_dataset("cifar10", root=tmp_path)
    assert X.shape == (19, 32, 32, 3) and X.dtype == np.uint8 and y.dtype == np.int64
    assert X.flags.c_contiguous
    assert np.array_equal(y, np.r_[ytr, yte])
    # rows of 3072 = 1024 red, 1024 green, 1024 blue, each row-major 32x32
    assert X[0, 0, 1, 0] == train[0, 1] and X[0, 1, 0, 0] == train[0, 32]
    assert X[0, 0, 0, 2] == train[0, 2048]
    Xt, _ = load_dataset("cifar10", root=tmp_path, split="test")
    assert np.array_equal(Xt.reshape(4, -1, 3).transpose(0, 2, 1).reshape(4, -1), test)


def test_cifar10_agrees_with_torchvision_reader(tmp_path, monkeypatch):
    tv = pytest.importorskip("torchvision.datasets")
    import torchvision.datasets.cifar as tvc

    make_cifar10(tmp_path)
    monkeypatch.setattr(tvc.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvc, "check_integrity", lambda *a, **k: True)
    for train in (True, False):
        ref = tv.CIFAR10(root=str(tmp_path), train=train, download=False)
        X, y = load_dataset("cifar10", root=tmp_path, split="train" if train else "test")
        assert np.array_equal(X, ref.data) and np.array_equal(y, ref.targets)


@pytest.mark.parametrize("coarse", [True, False])
def test_cifar100_20_coarse_labels(tmp_path, coarse):
    ref = make_cifar100(tmp_path, coarse=coarse)
    X, y = load_dataset("cifar100-20", root=tmp_path)
    fine = np.r_[ref["train"][1], ref["test"][1]]
    assert X.shape == (13, 32, 32, 3)
    assert np.array_equal(y, CIFAR100_COARSE_OF_FINE[fine])
    assert y.max() < 20


def test_cifar100_coarse_mapping_is_standard():
    m = CIFAR100_COARSE_OF_FINE
    assert m.shape == (100,) and np.array_equal(np.bincount(m), np.full(20, 5))
    # spot checks against the CIFAR-100 class list (fine names are alphabetical)
    assert m[0] == 4  # apple -> fruit_and_vegetables
    assert m[1] == 1  # aquarium_fish -> fish
    assert m[2] == 14  # baby -> people
    assert m[30] == 0  # dolphin -> aquatic_mammals
    assert m[41] == 19  # lawn_mower -> vehicles_2
    assert m[58] == 18  # pickup_truck -> vehicles_1
    assert m[99] == 13  # worm -> non-insect_invertebrates
    assert [m[i] for i in (47, 52, 56, 59, 96)] == [17] * 5  # the five trees
    with pytest.raises(ValueError):
        m[0] = 3  # read-only


def test_cifar_corrupt_files(tmp_path):
    make_cifar10(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    raw = (folder / "test_batch").read_bytes()
    (folder / "test_batch").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="Corrupt or truncated"):
        load_dataset("cifar10", root=tmp_path, split="test")
    dump(folder / "test_batch", {"data": np.zeros((2, 3072), np.uint8), "labels": [1]})
    with pytest.raises(ValueError, match="2 images but 1 labels"):
        load_dataset("cifar10", root=tmp_path, split="test")
    dump(folder / "test_batch", {"data": np.zeros((2, 100), np.uint8), "labels": [1, 2]})
    with pytest.raises(ValueError, match=r"expected uint8 \(N, 3072\)"):
        load_dataset("cifar10", root=tmp_path, split="test")
    dump(folder / "test_batch", {"data": np.zeros((1, 3072), np.uint8), "labels": [10]})
    with pytest.raises(ValueError, match="out of 0..9"):
        load_dataset("cifar10", root=tmp_path, split="test")


def test_cifar_pickle_with_code_is_refused(tmp_path):
    make_cifar10(tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("should not run",))

    dump(tmp_path / "cifar-10-batches-py" / "test_batch", {"data": Evil(), "labels": []})
    with pytest.raises(ValueError, match=r"refusing to load \w+\.print"):
        load_dataset("cifar10", root=tmp_path, split="test")


# ---------------------------------------------------------------- STL-10


def test_stl10_layout(tmp_path):
    ref = make_stl10(tmp_path)
    X, y = load_dataset("stl10", root=tmp_path)
    assert X.shape == (5, 96, 96, 3) and X.dtype == np.uint8 and y.dtype == np.int64
    raw_tr, y_tr = ref["train"]
    assert np.array_equal(y, np.r_[y_tr, ref["test"][1]].astype(np.int64) - 1)
    # the binary is column-major per channel: raw[n, c, col, row] is pixel (row, col)
    assert X[0, 5, 7, 2] == raw_tr[0, 2, 7, 5]


def test_stl10_agrees_with_torchvision_reader(tmp_path, monkeypatch):
    tv = pytest.importorskip("torchvision.datasets")
    make_stl10(tmp_path)
    monkeypatch.setattr(tv.STL10, "_check_integrity", lambda self: True)
    ref = tv.STL10(root=str(tmp_path), split="test", download=False)
    X, y = load_dataset("stl10", root=tmp_path, split="test")
    assert np.array_equal(X.transpose(0, 3, 1, 2), ref.data)
    assert np.array_equal(y, ref.labels)


def test_stl10_corrupt(tmp_path):
    make_stl10(tmp_path)
    folder = tmp_path / "stl10_binary"
    raw = (folder / "test_X.bin").read_bytes()
    (folder / "test_X.bin").write_bytes(raw[:-1])
    with pytest.raises(ValueError, match="Truncated STL-10"):
        load_dataset("stl10", root=tmp_path, split="test")
    (folder / "test_X.bin").write_bytes(raw)
    np.array([1, 2], dtype=np.uint8).tofile(folder / "test_y.bin")
    with pytest.raises(ValueError, match="3 images in test_X.bin but 2 labels"):
        load_dataset("stl10", root=tmp_path, split="test")
    np.array([1, 2, 11], dtype=np.uint8).tofile(folder / "test_y.bin")
    with pytest.raises(ValueError, match="expected values 1..10"):
        load_dataset("stl10", root=tmp_path, split="test")
