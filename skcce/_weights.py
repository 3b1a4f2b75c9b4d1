"""Pretrained weights without a minute of retries when the Hugging Face Hub cannot be reached.

timm fetches pretrained weights with ``huggingface_hub.hf_hub_download``. When the Hub cannot be
reached and the file is not cached, that call retries with a 60 s timeout and exponential
back-off, once for ``model.safetensors`` and again for ``pytorch_model.bin``: 57-72 s on an
offline machine before the error. :func:`hub_access` avoids this without changing the user's
process settings for good:

1. ``HF_HUB_OFFLINE`` set (in the environment or in ``huggingface_hub.constants``): nothing is
   probed, the Hub library answers from its cache.
2. Otherwise one ``HEAD`` request to the Hub endpoint (``HF_ENDPOINT``) probes the network,
   through the Hub library's own HTTP client (so proxies and a custom client factory apply),
   bounded by ``HF_HUB_ETAG_TIMEOUT`` seconds when that variable is set and
   :data:`PROBE_TIMEOUT` seconds otherwise.
3. If the probe fails, ``huggingface_hub.constants.HF_HUB_OFFLINE`` is set to ``True`` for the
   duration of the ``with`` block only (and restored after it), so that cached weights load at
   once and missing ones fail at once. Other threads using the Hub library during those
   seconds see the same offline switch.

The error messages are phrased for their audience: :func:`unavailable_message` gives the Python
API's advice (``weights=``, ``pretrained=False``) or the command line's (``--weights FILE``,
``--no-pretrained``).
"""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["PROBE_TIMEOUT", "HubAccess", "hub_access", "unavailable_message"]

#: Seconds the network probe waits for the Hugging Face Hub (``HF_HUB_ETAG_TIMEOUT`` overrides).
PROBE_TIMEOUT = 5.0

_TRUE = {"1", "on", "yes", "true"}


class HubAccess:
    """How the Hub was found by :func:`hub_access`.

    Attributes
    ----------
    state : {"online", "offline", "unreachable", "no-hub"}
        ``"offline"``: ``HF_HUB_OFFLINE`` is set; ``"unreachable"``: the probe failed within
        ``timeout`` seconds; ``"no-hub"``: ``huggingface_hub`` is not installed (timm then uses
        its own URLs).
    endpoint : str or None
        The Hub endpoint probed (``HF_ENDPOINT``).
    timeout : float
        The probe's time limit in seconds.
    detail : str
        Why the probe failed (empty otherwise).

    Examples
    --------
    >>> from skcce._weights import HubAccess
    >>> HubAccess("offline", "https://hub.example", 5.0).reason()
    'HF_HUB_OFFLINE is set and they are not in the Hugging Face cache'
    """

    def __init__(self, state, endpoint=None, timeout=PROBE_TIMEOUT, detail=""):
        self.state = state
        self.endpoint = endpoint
        self.timeout = timeout
        self.detail = detail

    def reason(self):
        """One clause saying why weights could not be fetched in this state ("" when online).

        Returns
        -------
        reason : str

        Examples
        --------
        >>> from skcce._weights import HubAccess
        >>> HubAccess("online").reason()
        ''
        """
        if self.state == "offline":
            return "HF_HUB_OFFLINE is set and they are not in the Hugging Face cache"
        if self.state == "unreachable":
            detail = f"{self.detail}; " if self.detail else ""
            return (
                f"the Hugging Face Hub ({self.endpoint}) could not be reached ({detail}waited "
                f"at most {self.timeout:g} s) and they are not in the Hugging Face cache"
            )
        return ""


def _env_offline():
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def _probe_timeout():
    try:
        value = float(os.environ.get("HF_HUB_ETAG_TIMEOUT", ""))
    except ValueError:
        return PROBE_TIMEOUT
    return value if value > 0 else PROBE_TIMEOUT


def _probe(endpoint, timeout):
    """``""`` when ``endpoint`` answers (any HTTP status) within ``timeout`` s, else why not.

    The request runs in a daemon thread so that a name lookup that hangs (not covered by the
    HTTP client's timeouts) cannot hold the caller longer than ``timeout``.
    """
    outcome = []

    def request():
        try:
            try:
                from huggingface_hub import get_session
            except ImportError:  # an old huggingface_hub: the standard library's client
                import urllib.error
                import urllib.request

                try:
                    urllib.request.urlopen(
                        urllib.request.Request(endpoint, method="HEAD"), timeout=timeout
                    ).close()
                except urllib.error.HTTPError:
                    pass  # an HTTP status is an answer
            else:
                get_session().head(endpoint, timeout=timeout)
            outcome.append("")
        except Exception as exc:  # any failure means: not reachable now
            text = " ".join(str(exc).split()) or type(exc).__name__
            outcome.append(text[:120])

    thread = threading.Thread(target=request, name="skcce-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return outcome[0] if outcome else "no answer"


@contextlib.contextmanager
def hub_access(timeout=None):
    """Within this block, Hugging Face Hub downloads fail (or load from cache) at once offline.

    Parameters
    ----------
    timeout : float, default=None
        Seconds to wait for the Hub; ``None`` uses ``HF_HUB_ETAG_TIMEOUT`` when set, else
        :data:`PROBE_TIMEOUT`.

    Yields
    ------
    access : HubAccess
        What was found; its :meth:`HubAccess.reason` explains a later download failure.

    Examples
    --------
    >>> import os
    >>> from skcce._weights import hub_access
    >>> os.environ["HF_HUB_OFFLINE"] = "1"
    >>> with hub_access() as access:
    ...     access.state
    'offline'
    >>> del os.environ["HF_HUB_OFFLINE"]
    """
    timeout = _probe_timeout() if timeout is None else float(timeout)
    try:
        import huggingface_hub.constants as constants
    except ImportError:
        yield HubAccess("no-hub", timeout=timeout)
        return
    endpoint = constants.ENDPOINT
    if constants.HF_HUB_OFFLINE or _env_offline():
        access = HubAccess("offline", endpoint, timeout)
    else:
        detail = _probe(endpoint, timeout)
        if not detail:
            yield HubAccess("online", endpoint, timeout)
            return
        access = HubAccess("unreachable", endpoint, timeout, detail)
    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield access
    finally:
        constants.HF_HUB_OFFLINE = saved


def unavailable_message(model_name, reason, *, cli=False):
    """The error text when pretrained weights cannot be had, for the API or the command line.

    Parameters
    ----------
    model_name : str
        The timm model name.
    reason : str
        Why (one clause, e.g. :meth:`HubAccess.reason` or the download error).
    cli : bool, default=False
        Give command-line flags (``--weights FILE``, ``--no-pretrained``) instead of the
        Python API's parameters (``weights=``, ``pretrained=False``).

    Returns
    -------
    message : str

    Examples
    --------
    >>> from skcce._weights import unavailable_message
    >>> "--no-pretrained" in unavailable_message("resnet50", "offline", cli=True)
    True
    >>> "pretrained=False" in unavailable_message("resnet50", "offline")
    True
    """
    if cli:
        local = "pass --weights FILE (a local .safetensors/.pth/.bin file)"
        random = "--no-pretrained uses random weights"
    else:
        local = (
            "pass weights='path/to/model.safetensors' (or a .pth/.bin state dict) to "
            "FeatureExtractor"
        )
        random = "pretrained=False uses random weights"
    return (
        f"could not get pretrained weights for timm model {model_name!r}: {reason}. "
        "timm downloads them from the Hugging Face Hub on first use and caches them. "
        f"Offline, {local}, or copy a populated Hugging Face cache to this machine and set "
        f"HF_HOME=<cache dir> and HF_HUB_OFFLINE=1; {random}."
    )
