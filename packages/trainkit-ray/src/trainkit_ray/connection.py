"""One connection to the Ray cluster per process, made only by what needs the cluster.

Listing runs or volumes on mounted storage never gets here, so it does not pay
`ray.init` (seconds); spawning, cancelling and checking calls, warm inference and the
`cluster` storage access do, once per process.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import UsageError

if TYPE_CHECKING:
    from trainkit_ray.settings import RaySettings

_lock = threading.Lock()
_connected: tuple[str, str] | None = None


def connect(own: RaySettings) -> Any:
    """The `ray` module, connected to the cluster of `own` (never starting a cluster)."""
    global _connected
    import ray

    address = own.address or "auto"
    with _lock:
        if _connected is not None:
            if _connected != (address, own.namespace):
                raise UsageError(
                    f"this process is connected to the Ray cluster {_connected[0]!r} (namespace {_connected[1]!r}); "
                    f"it cannot also use {address!r} (namespace {own.namespace!r})"
                )
            return ray
        if ray.is_initialized():  # inside a Ray worker: the job's own cluster
            _connected = (address, own.namespace)
            return ray
        # On a loopback address, say which IP is ours: else Ray looks for it by connecting out.
        loopback: dict[str, Any] = (
            {"_node_ip_address": "127.0.0.1"} if address.startswith(("127.0.0.1:", "localhost:")) else {}
        )
        _cluster_errors_to_stderr()
        try:
            ray.init(
                address=address,
                **loopback,
                namespace=own.namespace,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(
                f"cannot connect to the Ray cluster at {address!r} (TRAINKIT_RAY_ADDRESS): {exc}",
                hint="start one (`ray start --head`) or set TRAINKIT_RAY_ADDRESS to its address",
            ) from None
        _connected = (address, own.namespace)
        return ray


def find_actor(own: RaySettings, name: str) -> Any | None:
    """The live named actor `name` of trainkit's namespace, or None when there is none."""
    ray = connect(own)
    try:
        return ray.get_actor(name, namespace=own.namespace)
    except ValueError:
        return None


def _cluster_errors_to_stderr() -> None:
    """Send the cluster's error messages that Ray prints on a driver to stderr, not stdout.

    Ray's driver prints every error the cluster publishes to it (a worker that died anywhere,
    say) on stdout, whatever `log_to_driver` says. trainkit's stdout is the command's answer
    (`serve`'s URL line, `--json`), which such a line broke. Ray 2.60 prints them through
    `ray._private.worker.print_to_stdstream` with pid "raylet"; a Ray without it is left alone
    (`tests/ray/test_driver_output.py` fails if the messages reach stdout again).
    """
    import ray._private.worker as driver

    prints = getattr(driver, "print_to_stdstream", None)
    if prints is None or getattr(prints, "trainkit_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            data = {**data, "is_err": True}
        prints(data, ignore_prefix)

    to_stderr.trainkit_to_stderr = True  # type: ignore[attr-defined]
    driver.print_to_stdstream = to_stderr
