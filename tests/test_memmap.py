"""fit and partial_fit on memory-mapped arrays (``np.load(..., mmap_mode="r")``) read them in
batches and blocks and never copy them whole (issue 45).

The bound is checked in a fresh process (:data:`PROBE`), on a 300 MB float32 array written in
chunks (so that the test itself never holds it), with two measures: the peak of Python's
allocations (``tracemalloc``: NumPy's arrays) and the peak growth of the process's anonymous
resident memory (``RssAnon`` in ``/proc/self/status``, sampled every millisecond on a thread:
torch's tensors too, which ``tracemalloc`` does not see). The pages of the file that fit reads
count as file-backed memory, not anonymous: a copy of the array would show, reading it not.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from skcce import CCEClustering
from skcce._engine._preprocess import is_memory_mapped

ROWS, FEATURES, CENTRES = 300_000, 256, 5
#: the largest peak allowed, as a fraction of the array's size
BOUND = 0.25

PROBE = textwrap.dedent(
    """
    import json, sys, threading, time, tracemalloc, warnings
    import numpy as np
    import torch
    from skcce import CCEClustering

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")

    def anon():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        return 0

    X = np.load(sys.argv[1], mmap_mode="r")
    mode = sys.argv[2]
    # warm up on a small copy: every module imported, every kernel compiled
    small = np.array(X[:3000])
    CCEClustering(5, n_init=1, max_epochs=1, random_state=0).fit(small).predict(small)
    CCEClustering(5, random_state=0).partial_fit(small).partial_fit(small)

    peak, stop = [anon()], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], anon())
            time.sleep(0.001)

    base = anon()
    tracemalloc.start()
    traced = tracemalloc.get_traced_memory()[0]
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    if mode == "fit":
        est = CCEClustering(5, n_init=1, max_epochs=1, random_state=0).fit(X)
        rows = len(est.labels_)
    else:
        est = CCEClustering(5, random_state=0)
        for start in range(0, len(X), 100_000):
            est.partial_fit(X[start : start + 100_000])
        rows = est.n_steps_ * est.batch_size_
    seconds = time.perf_counter() - t0
    stop.set()
    thread.join()
    peak[0] = max(peak[0], anon())
    print(json.dumps({
        "traced": tracemalloc.get_traced_memory()[1] - traced,
        "anon": peak[0] - base,
        "nbytes": X.nbytes,
        "rows": rows,
        "seconds": seconds,
        "sizes": np.bincount(est.predict(X[:20_000]), minlength=5).tolist(),
    }))
    """
)


@pytest.fixture(scope="module")
def big_npy(tmp_path_factory):
    """A 300 MB float32 .npy of a Gaussian mixture, written 10 000 rows at a time."""
    path = tmp_path_factory.mktemp("memmap") / "big.npy"
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=0.6, size=(CENTRES, FEATURES)).astype(np.float32)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(ROWS, FEATURES))
    for start in range(0, ROWS, 10_000):
        block = rng.standard_normal((10_000, FEATURES), dtype=np.float32)
        block += centres[rng.integers(CENTRES, size=10_000)]
        out[start : start + 10_000] = block
    out.flush()
    del out
    yield path
    os.remove(path)


def run_probe(path, mode):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), mode],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


needs_proc = pytest.mark.skipif(
    not os.path.exists("/proc/self/status"), reason="reads RssAnon from /proc (Linux)"
)


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("mode", ["fit", "partial_fit"])
def test_memmap_is_never_copied_whole(big_npy, mode):
    result = run_probe(big_npy, mode)
    print(mode, result)
    assert result["rows"] >= ROWS
    assert min(result["sizes"]) > 0  # the fit found the mixture's clusters
    assert result["traced"] < BOUND * result["nbytes"], result
    assert result["anon"] < BOUND * result["nbytes"], result


@pytest.fixture
def small_npy(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1500, 8)).astype(np.float32)
    X += rng.normal(scale=3, size=(3, 8)).astype(np.float32)[rng.integers(3, size=1500)]
    path = tmp_path / "small.npy"
    np.save(path, X)
    return path, X


@pytest.mark.parametrize("n_init", [1, 3])
def test_fit_on_memmap_equals_fit_in_memory(small_npy, n_init):
    # in memory, a small X is normalised once into a table; memory-mapped, batch by batch:
    # the same numbers
    path, X = small_npy
    mapped = np.load(path, mmap_mode="r")
    assert is_memory_mapped(mapped) and not is_memory_mapped(X)
    params = dict(n_clusters=3, n_init=n_init, max_epochs=2, random_state=0)
    a = CCEClustering(**params).fit(mapped)
    b = CCEClustering(**params).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    for p, q in zip(a.module_.parameters(), b.module_.parameters(), strict=True):
        assert torch.equal(p, q)
    np.testing.assert_array_equal(a.predict_proba(mapped), b.predict_proba(X))


def test_partial_fit_on_memmap_chunks_equals_in_memory(small_npy):
    path, X = small_npy
    mapped = np.load(path, mmap_mode="r")
    a, b = CCEClustering(3, random_state=0), CCEClustering(3, random_state=0)
    for start in range(0, len(X), 500):
        a.partial_fit(mapped[start : start + 500])
        b.partial_fit(X[start : start + 500])
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.predict_proba(mapped), b.predict_proba(X))
    assert a.n_steps_ == b.n_steps_ == 3 * 2


def test_labels_and_score_without_an_n_by_k_array():
    # partial_fit's labels_ and train_score_ come from spans of the rows: with many clusters
    # no (n_samples, n_clusters) array is made
    import tracemalloc

    from skcce._engine._inference import infer_labels, infer_proba
    from skcce._engine._preprocess import fit_inputs
    from skcce.metrics import mutual_information

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60_000, 4)).astype(np.float32)
    inputs = fit_inputs(X, "flat")
    head = torch.nn.Linear(4, 300)
    cpu = torch.device("cpu")
    proba = infer_proba(head, X, inputs, cpu)
    tracemalloc.start()
    labels, score = infer_labels(head, X, inputs, cpu)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_array_equal(labels, proba.argmax(axis=1))
    np.testing.assert_allclose(score, mutual_information(proba), rtol=1e-12)
    assert peak < proba.nbytes / 2  # 144 MB of probabilities; spans of at most 64 MB
