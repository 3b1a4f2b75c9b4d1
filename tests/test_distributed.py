"""Data-parallel fit (torch.distributed, gloo, 2 CPU processes) equals the one-process fit.

The pytest process starts two workers (this file run as a script, with a free TCP port);
each initialises a gloo process group, solves the pseudo-labels of one global batch through
the training engine's code path and fits CCEClustering; the test compares their outputs with
the same computations in one process. Also: GridSearchCV with joblib's loky workers.
"""

import gc
import os
import socket
import subprocess
import sys

import joblib
import numpy as np
import pytest
import torch
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV

from skcce import CCEClustering, _checkpoint
from skcce._engine._callbacks import Callback
from skcce._engine._distributed import Context, resolve

WORLD = 2
# 301 rows, global batches of 75: shards of 38 / 37 rows, and a last batch of 1 row that
# leaves rank 1 an empty shard
PARAMS = dict(
    n_clusters=3, max_epochs=3, n_init=2, batch_size=75, optimizer="adam", learning_rate=0.05,
    random_state=0, device="cpu",
)  # fmt: skip
BATCH_ROWS, K = 13, 4  # the pseudo-label check: an odd global batch (7 / 6 rows)


def _data():
    X, _ = make_blobs(n_samples=301, centers=3, n_features=5, cluster_std=0.8, random_state=1)
    return X.astype(np.float32)


def _global_probs():
    rng = np.random.default_rng(3)
    logits = rng.normal(scale=2.0, size=(BATCH_ROWS, K))
    return torch.softmax(torch.as_tensor(logits), dim=1)


def _pseudo_label_config():
    from skcce._engine._train import TrainConfig

    return TrainConfig(
        n_clusters=K, lam=30.0, fairness="reverse", loss="collision", prior=None,
        fairness_weight=1.3, optimizer="sgd", learning_rate=0.1,
        backbone_learning_rate=None, weight_decay=0.0, batch_size=BATCH_ROWS, max_epochs=1,
        solver_tol=1e-9, solver_max_iter=100, solver="newton", augment=None, augment_weight=0.0,
        device=torch.device("cpu"), amp=False, verbose=0,
    )  # fmt: skip


def _worker(rank, port, out):
    """One rank: the pseudo-labels of one global batch, then a fit (results saved to out)."""
    import torch.distributed as dist

    from skcce._engine._step import pseudo_labels

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    try:
        ctx = resolve("auto")
        assert ctx.world_size == WORLD and ctx.rank == rank
        rows = ctx.shard(np.arange(BATCH_ROWS))
        local = _global_probs()[rows]
        labels, res = pseudo_labels(local, BATCH_ROWS, _pseudo_label_config(), None, ctx)
        ckpt = os.path.join(out, "ddp.ckpt")
        est = CCEClustering(**PARAMS, checkpoint=ckpt).fit(_data())
        # a run that dies at the start of its 2nd epoch on every rank, then resumes
        crash_ckpt = os.path.join(out, "crash.ckpt")
        hooks = CCEClustering._callbacks

        class Crash(Callback):
            def on_epoch_begin(self, run, epoch):
                if epoch == 1:
                    raise RuntimeError("simulated crash")

        def crashing_hooks(self, X, plan, checkpoint):
            callbacks, resume = hooks(self, X, plan, checkpoint)
            return [*callbacks, Crash()], resume

        CCEClustering._callbacks = crashing_hooks
        crashed = False
        try:
            CCEClustering(**PARAMS, checkpoint=crash_ckpt).fit(_data())
        except RuntimeError as exc:
            crashed = "simulated crash" in str(exc)
        finally:
            CCEClustering._callbacks = hooks
        resumed = CCEClustering(**PARAMS, checkpoint=crash_ckpt).fit(_data())
        white = CCEClustering(**PARAMS, whiten=True).fit(_data())
        torch.save(
            {
                "rows": rows,
                "labels": labels,
                "n_iter": res.n_iter,
                "fit_labels": est.labels_,
                "weights": est.module_.state_dict(),
                "history": est.history_,
                "predict": est.predict(_data()),
                "crashed": crashed,
                "resumed_labels": resumed.labels_,
                "resumed_weights": resumed.module_.state_dict(),
                "white_labels": white.labels_,
                "whitening": white.whitening_,
            },
            os.path.join(out, f"rank{rank}.pt"),
        )
    finally:
        gc.collect()  # no DDP wrapper may outlive the process group
        dist.barrier()  # tear down together: a rank that leaves early takes the store along
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, str(rank), str(port), str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank in range(WORLD)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=150)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    return out, [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def test_shards_partition_every_global_batch():
    for n in (1, 2, 45, 64, 301):
        parts = [Context(world_size=3, rank=r).shard(np.arange(n)) for r in range(3)]
        np.testing.assert_array_equal(np.concatenate(parts), np.arange(n))
        sizes = [len(p) for p in parts]
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.slow
def test_global_batch_pseudo_labels_equal_one_process(ddp_run):
    from skcce._engine._step import pseudo_labels

    _, ranks = ddp_run
    cfg = _pseudo_label_config()
    single, res = pseudo_labels(_global_probs(), BATCH_ROWS, cfg, None, Context())
    assert [len(r["rows"]) for r in ranks] == [7, 6]
    gathered = torch.cat([r["labels"] for r in ranks])
    assert torch.equal(gathered, single)  # bitwise: the same global problem, solved the same
    assert all(r["n_iter"] == res.n_iter for r in ranks)
    # and the global solve is not the per-shard one (the rows are really coupled)
    shard_only, _ = pseudo_labels(_global_probs()[:7], 7, cfg, None, Context())
    assert not torch.allclose(shard_only, single[:7])


@pytest.mark.slow
def test_ddp_fit_equals_one_process_fit(ddp_run):
    out, ranks = ddp_run
    single = CCEClustering(**PARAMS).fit(_data())
    assert sorted(np.bincount(single.labels_).tolist()) == [100, 100, 101]  # the three blobs
    for r in ranks:
        np.testing.assert_array_equal(r["fit_labels"], single.labels_)
        np.testing.assert_array_equal(r["predict"], single.labels_)
        for key, value in single.module_.state_dict().items():
            torch.testing.assert_close(r["weights"][key], value, rtol=1e-4, atol=1e-5)
        assert len(r["history"]) == len(single.history_)  # the same epoch stop
        for h_ddp, h_one in zip(r["history"], single.history_, strict=True):
            assert h_ddp["cluster_sizes"] == h_one["cluster_sizes"]
            assert h_ddp["changed"] == h_one["changed"]  # every rank counts every row
            assert h_ddp["loss"] == pytest.approx(h_one["loss"], rel=1e-4, abs=1e-6)
            assert h_ddp["fairness"] == pytest.approx(h_one["fairness"], rel=1e-3, abs=1e-6)
    # every rank holds the same fitted state; rank 0 wrote the checkpoint
    for key, value in ranks[0]["weights"].items():
        assert torch.equal(ranks[1]["weights"][key], value)
    state = _checkpoint.load(out / "ddp.ckpt")
    assert state["complete"] and state["fingerprint"]["world_size"] == WORLD


@pytest.mark.slow
def test_ddp_whitening_is_rank_zeros_and_fits_as_one_process(ddp_run):
    _, ranks = ddp_run
    single = CCEClustering(**PARAMS, whiten=True).fit(_data())
    for r in ranks:
        np.testing.assert_array_equal(r["whitening"], ranks[0]["whitening"])
        np.testing.assert_allclose(r["whitening"], single.whitening_, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(r["white_labels"], single.labels_)


@pytest.mark.slow
def test_ddp_resume_reaches_the_uninterrupted_ddp_model(ddp_run):
    _, ranks = ddp_run
    for r in ranks:
        assert r["crashed"]  # the first run did stop after one epoch
        np.testing.assert_array_equal(r["resumed_labels"], r["fit_labels"])
        for key, value in r["weights"].items():
            torch.testing.assert_close(r["resumed_weights"][key], value, rtol=0, atol=0)


def test_sync_batchnorm_swap_shares_state_and_restores():
    from skcce._engine._distributed import swap_sync_batchnorm

    bn2, bn1 = torch.nn.BatchNorm2d(4), torch.nn.BatchNorm1d(3)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), bn2, torch.nn.Sequential(torch.nn.Flatten(), bn1)
    )
    restore = swap_sync_batchnorm(net)
    assert isinstance(net[1], torch.nn.SyncBatchNorm) and isinstance(
        net[2][1], torch.nn.SyncBatchNorm
    )
    assert net[1].weight is bn2.weight and net[1].running_mean is bn2.running_mean
    with torch.no_grad():  # training updates land in the original layers' tensors
        net[1].weight.add_(1.0)
        net[2][1].running_var.mul_(2.0)
    restore()
    assert net[1] is bn2 and net[2][1] is bn1
    torch.testing.assert_close(bn2.weight, torch.full((4,), 2.0))
    torch.testing.assert_close(bn1.running_var, torch.full((3,), 2.0))


def test_distributed_true_needs_a_process_group():
    est = CCEClustering(n_clusters=2, distributed=True, n_init=1, max_epochs=1)
    with pytest.raises(ValueError, match="needs an initialised torch.distributed process group"):
        est.fit(_data()[:20])


# ----- GridSearchCV with joblib's loky workers ---------------------------------------------
GRID = dict(
    n_clusters=3, max_epochs=2, n_init=1, batch_size=64, optimizer="adam", learning_rate=0.05,
    random_state=0, device="cpu",
)  # fmt: skip


def _fit_in_worker(X, lam):
    est = CCEClustering(**GRID, lam=lam).fit(X)
    return torch.get_num_threads(), est.score(X)


# lam=1 is a poor setting (a cluster may empty, with a ConvergenceWarning) that the search rejects
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_gridsearch_n_jobs_matches_serial_and_limits_threads():
    X = _data()[:200]
    grid = {"lam": [1.0, 30.0, 300.0]}
    serial = GridSearchCV(CCEClustering(**GRID), grid, cv=2, n_jobs=1).fit(X)
    parallel = GridSearchCV(CCEClustering(**GRID), grid, cv=2, n_jobs=2).fit(X)
    assert parallel.best_params_ == serial.best_params_
    np.testing.assert_allclose(
        parallel.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"], rtol=1e-6
    )
    # inside a loky worker (the same pool), torch uses at most its share of the cores
    seen = joblib.Parallel(n_jobs=2)(joblib.delayed(_fit_in_worker)(X, lam) for lam in (1.0, 30.0))
    limit = max(1, joblib.cpu_count() // 2)
    assert all(threads <= limit for threads, _ in seen), (seen, limit)
    assert all(np.isfinite(score) for _, score in seen)


if __name__ == "__main__":  # a worker of ddp_run: rank, port, output folder
    _worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
