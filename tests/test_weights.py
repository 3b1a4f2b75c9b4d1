"""Tests for skcce._weights: pretrained weights fail (or load from the cache) at once offline.

Nothing here reaches the internet: the Hub probe is replaced by a stub, or aimed at a local
port; the Hugging Face cache is a temporary folder.
"""

import http.server
import logging
import socket
import threading

import numpy as np
import pytest

pytest.importorskip("timm")
hub_constants = pytest.importorskip("huggingface_hub.constants")

import timm  # noqa: E402

from skcce import FeatureExtractor, _weights  # noqa: E402
from skcce._feature_extraction import WeightsUnavailableError  # noqa: E402
from skcce.cli.cluster import cluster_main  # noqa: E402

MODEL = "test_resnet"  # timm/test_resnet.r160_in1k on the Hub: never fetched here


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    return cache


@pytest.fixture
def unreachable(monkeypatch):
    calls = []

    def probe(endpoint, timeout):
        calls.append(endpoint)
        return "connection refused (test)"

    monkeypatch.setattr(_weights, "_probe", probe)
    return calls


def _images():
    return np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)


def test_unreachable_hub_fails_at_once_with_api_advice(empty_cache, unreachable, caplog):
    extractor = FeatureExtractor(MODEL, image_size=32, device="cpu")
    with caplog.at_level(logging.INFO), pytest.raises(WeightsUnavailableError) as info:
        extractor.fit(_images())
    message = str(info.value)
    assert "could not be reached (connection refused (test); waited at most" in message
    assert "LocalEntryNotFoundError" not in message  # the reason already says: not cached
    assert "weights='path/to/model.safetensors'" in message and "pretrained=False" in message
    assert "HF_HUB_OFFLINE=1" in message and "on first use" in message
    assert "--no-pretrained" not in message and "--weights" not in message  # API wording
    assert info.value.model_name == MODEL and info.value.reason
    assert not any("Retrying" in r.getMessage() for r in caplog.records)  # no back-off loop
    assert unreachable and hub_constants.HF_HUB_OFFLINE is False  # the switch was scoped
    assert not hasattr(extractor, "model_")


def test_hf_hub_offline_is_respected_without_probing(empty_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def must_not_probe(endpoint, timeout):
        raise AssertionError("HF_HUB_OFFLINE is set: the network must not be probed")

    monkeypatch.setattr(_weights, "_probe", must_not_probe)
    with pytest.raises(WeightsUnavailableError, match="HF_HUB_OFFLINE is set"):
        FeatureExtractor(MODEL, image_size=32, device="cpu").fit(_images())
    assert hub_constants.HF_HUB_OFFLINE is False


def test_cached_weights_load_when_the_hub_is_unreachable(empty_cache, unreachable):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    source = timm.create_model(MODEL, pretrained=False, num_classes=0)
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = empty_cache / "models--timm--test_resnet.r160_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    state = {k: v.contiguous() for k, v in source.state_dict().items()}
    safetensors_torch.save_file(state, str(repo / "snapshots" / commit / "model.safetensors"))

    extractor = FeatureExtractor(MODEL, image_size=32, device="cpu").fit(_images())
    for key, value in source.state_dict().items():
        assert np.array_equal(extractor.model_.state_dict()[key].numpy(), value.numpy()), key
    assert unreachable and hub_constants.HF_HUB_OFFLINE is False


def test_cli_gives_command_line_advice(empty_cache, unreachable, tmp_path, capsys):
    from PIL import Image

    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(3):
        Image.new("RGB", (16, 16), (80 * i, 0, 0)).save(folder / f"{i}.png")
    argv = [str(folder), "-k", "2", "--model", MODEL, "--image-size", "32", "--device", "cpu"]
    assert cluster_main([*argv, "--out", str(tmp_path / "labels.csv")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("skcce cluster: error: ")
    assert "--weights FILE" in err and "--no-pretrained" in err and "HF_HUB_OFFLINE=1" in err
    assert "pretrained=False" not in err and "weights=" not in err  # no Python advice
    assert not (tmp_path / "labels.csv").exists()


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_probe_reports_a_closed_port_and_accepts_any_answer():
    assert _weights._probe(f"http://127.0.0.1:{_closed_port()}", timeout=2.0)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # any status counts as reachable
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert _weights._probe(f"http://127.0.0.1:{server.server_port}", timeout=2.0) == ""
    finally:
        server.shutdown()
        server.server_close()


def test_probe_timeout_reads_hf_hub_etag_timeout(monkeypatch):
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    assert _weights._probe_timeout() == 2.0
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "junk")
    assert _weights._probe_timeout() == _weights.PROBE_TIMEOUT
