"""The app lifecycle on Modal, from the SDK (no `modal` CLI needed).

- `deploy()`: build the app from the spec and `app.deploy()` it inside
  `modal.enable_output()` (image builds and progress are shown);
- `status()`: `modal.App.lookup(name)` and `App.info()` (deployed, stopped or not
  deployed, its functions, and the web API's URL). Modal finds a stopped app by its
  id only, not by its name, so `deploy()` keeps the app's id (with its version and
  URLs) in the ``_app`` Dict, where `status()` finds it again and any process that
  starts a job reads which deployment it runs in (`records.deployment_record`);
- `stop()`: `modal.App.lookup(name).stop()`.

`AppInfo.functions` names a class by its service function, `Inference_4b.*`: a
declared class is deployed when that name is there.

**Dev mode.** `serve()` is the `modal serve` equivalent that
`trainkit serve --provider modal` calls (through `provider.deployment().serve()`,
when the provider declares `web_endpoint`): it runs the app ephemerally with
`app.run()`, prints the web API's temporary URL to stdout (and hands it to
`on_url` when given), and blocks until interrupted (Ctrl-C); the app stops when it
returns. It does not reload on file changes; restart it after editing. Its web API
starts jobs in that ephemeral app (`trainkit_modal.own_app`), not in a deployed app of
the same name.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import NotFoundError, UsageError, web_api_missing
from trainkit_core.plugins.hookspecs import DeploymentStatus
from trainkit_core.settings import Settings
from trainkit_modal import errors
from trainkit_modal.records import deployment_record, remember_deployment
from trainkit_modal.spec import WEB_FUNCTION, load_stack, routing_spec

if TYPE_CHECKING:
    from trainkit_modal.app import BuiltApp

#: Modal's app states that mean the app is not serving.
_STOPPED_STATES = ("stopped", "stopping", "disabled")


def is_deployed(name: str, functions: Any) -> bool:
    """Whether `AppInfo.functions` holds function `name`, or class `name` as its service function `name.*`."""
    return name in functions or f"{name}.*" in functions


def block_until_interrupted() -> None:
    """Wait for Ctrl-C (KeyboardInterrupt) while the dev app runs."""
    while True:
        time.sleep(3600)


class ModalDeployment:
    """The `provision` answer of the Modal provider."""

    def __init__(self, sdk_factory: Callable[[], Any], settings: Settings) -> None:
        self._sdk_factory = sdk_factory
        self.settings = settings

    @property
    def app_name(self) -> str:
        return self.settings.provider.app_name

    def check(self, functions: list[str]) -> None:
        """Every job runs in the app's own images: check the settings and that the jobs exist."""
        from trainkit_core.plugins.jobs import JOBS

        routing_spec(self.settings)  # raises UsageError naming a setting Modal would refuse; builds no image
        unknown = [f for f in functions if f not in JOBS]
        if unknown:
            raise NotFoundError(f"unknown job function(s) {', '.join(unknown)}; known: {', '.join(sorted(JOBS))}")

    def build(self) -> BuiltApp:
        from trainkit_modal.app import build_app

        return build_app(self.settings, sdk=self._sdk_factory())

    def deploy(self) -> DeploymentStatus:
        stack = load_stack()
        sdk = self._sdk_factory()
        built = self.build()
        print("trainkit images (trainkit_modal/images.toml):", file=sys.stderr)
        for line in stack.describe():
            print(f"  {line}", file=sys.stderr)
        secret = built.spec.hf_secret
        try:
            with errors.translate(sdk, f"deploy app {self.app_name}"), sdk.enable_output():
                built.app.deploy(name=self.app_name)
        except (NotFoundError, UsageError) as exc:
            if secret and f"'{secret}'" in exc.message and "ecret" in exc.message:
                raise errors.secret_not_found(secret) from exc
            raise
        status = self.status()
        self._remember(sdk, status)
        return status

    def _remember(self, sdk: Any, status: DeploymentStatus) -> None:
        """Keep the deployed app's id, version and URLs, for `status()` once stopped and for runs."""
        app_id = str(status.detail.get("app_id") or "")
        if not app_id:
            return
        record = {
            "app_name": self.app_name,
            "app_id": app_id,
            "version": status.detail.get("version"),
            "deployment_id": f"{app_id}/v{status.detail.get('version')}",
            "app_url": f"https://modal.com/id/{app_id}",
            "web_url": status.url,
            "deployed_at": status.detail.get("deployed_at"),
        }
        remember_deployment(sdk, self.settings, record)

    def _lookup(self, sdk: Any) -> Any | None:
        """The deployed app; else the stopped one whose id `deploy()` kept; None when there is none."""
        try:
            with errors.translate(sdk, f"look up app {self.app_name}"):
                return sdk.App.lookup(self.app_name)
        except NotFoundError:
            pass
        known = deployment_record(sdk, self.settings)
        if not known or not known.get("app_id"):
            return None
        try:
            with errors.translate(sdk, f"look up app {known['app_id']}"):
                return sdk.App.lookup(known["app_id"])
        except NotFoundError:
            return None

    def status(self) -> DeploymentStatus:
        sdk = self._sdk_factory()
        spec = routing_spec(self.settings)
        declared = sorted(spec.functions) + ([spec.web.name] if spec.web else [])
        app = self._lookup(sdk)
        if app is None:
            return DeploymentStatus(
                "not-deployed", {"app_name": self.app_name, "declared": declared, "notes": list(spec.notes)}
            )
        with errors.translate(sdk, f"inspect app {self.app_name}"):
            info = app.info(refresh=True)
        lifecycle = info.lifecycle
        state_value = str(getattr(lifecycle.state, "value", lifecycle.state))
        state = "stopped" if state_value in _STOPPED_STATES else "deployed"
        detail: dict[str, Any] = {
            "app_name": self.app_name,
            "app_id": info.app_id,
            "modal_state": state_value,
            "version": lifecycle.version,
            "deployed_at": lifecycle.deployed_at.isoformat() if lifecycle.deployed_at else None,
            "deployed_by": lifecycle.deployed_by,
            "functions": sorted(info.functions),
            "declared": declared,
            "missing": [name for name in declared if not is_deployed(name, info.functions)],
            "notes": list(spec.notes),
        }
        url = None
        if state == "stopped":
            detail["missing"] = []  # a stopped app serves nothing; `deploy` starts it again
        if state == "deployed" and WEB_FUNCTION in info.functions:
            try:
                with errors.translate(sdk, "web endpoint URL"):
                    url = sdk.Function.from_name(self.app_name, WEB_FUNCTION).get_web_url()
            except NotFoundError:
                url = None
        return DeploymentStatus(state, detail, url)

    def stop(self) -> None:
        sdk = self._sdk_factory()
        try:
            with errors.translate(sdk, f"look up app {self.app_name}"):
                app = sdk.App.lookup(self.app_name)  # by name: a stopped app is not found again
        except NotFoundError:
            raise NotFoundError(f"the Modal app {self.app_name!r} is not deployed; nothing to stop") from None
        with errors.translate(sdk, f"stop app {self.app_name}"):
            app.stop()

    def serve(self, on_url: Callable[[str], None] | None = None, *, block: bool = True) -> str | None:
        """Run the app in dev mode (`modal serve`): print the web API's URL, block until Ctrl-C."""
        import importlib.util

        if importlib.util.find_spec("trainkit_api") is None:
            raise web_api_missing("trainkit_api")
        sdk = self._sdk_factory()
        built = self.build()
        web = built.objects.get(WEB_FUNCTION)
        if web is None:
            raise UsageError("; ".join(built.spec.notes) or "the app declares no web API")
        url = None
        with errors.translate(sdk, f"serve app {self.app_name}"), sdk.enable_output(), built.app.run():
            url = web.get_web_url()
            print(f"trainkit web API (dev mode, app {self.app_name}): {url}", flush=True)
            if on_url is not None and url:
                on_url(url)
            if block:
                try:
                    block_until_interrupted()
                except KeyboardInterrupt:
                    print("stopping the dev app", file=sys.stderr)
        return url
