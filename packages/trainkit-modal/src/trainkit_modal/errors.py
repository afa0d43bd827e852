"""Modal's exceptions turned into trainkit's, with the next step the user should take.

Every call into the Modal SDK from the hook objects runs inside `translate(sdk, where)`.
Only the CLI and the API print errors; this module only chooses the class, the
message and the hint. Messages never include a token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trainkit_core.errors import NotFoundError, ProviderError, TrainkitError, UsageError, hint_word

TOKEN_HINT = "run `modal token new`, or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"
DEPLOY_HINT = "deploy the app first: `trainkit app deploy` (with TRAINKIT_PROVIDER=modal or --provider modal)"


#: Failures of Modal's service itself (modal 1.6.4 `modal.exception`): they say nothing about the
#: call or the run, and a later request may well succeed. modal's client retries none of
#: `ServiceError` and `ResourceExhaustedError` (a rate limit) on its own.
TRANSIENT = ("ServiceError", "ResourceExhaustedError", "InternalError", "InternalFailure", "ConnectionError")
#: Modal's answers about the request rather than about the call's outcome.
SERVICE = (*TRANSIENT, "AuthError", "PermissionDeniedError", "NotFoundError", "VersionError")


class ModalUnavailable(ProviderError):
    """Modal's service failed a request for now (`TRANSIENT`); not a verdict on any job or run.

    Callers that wait (`ModalRunHandle.wait`, the reconciler, `modal run --action train`)
    ask again later instead of giving up.
    """


def no_token(where: str) -> ProviderError:
    return ProviderError(f"Modal did not accept the request ({where}): no valid Modal token", hint=TOKEN_HINT)


def app_not_deployed(app_name: str, function: str) -> NotFoundError:
    return NotFoundError(
        f"the Modal app {app_name!r} is not deployed, or has no function {function!r}",
        hint=DEPLOY_HINT,
    )


def hf_secret_missing(model: str) -> UsageError:
    return UsageError(
        f"the base model {model!r} is gated on Hugging Face, and no Modal secret with HF_TOKEN is attached",
        hint="create one (`modal secret create huggingface HF_TOKEN=hf_...`), set TRAINKIT_HF_SECRET=huggingface, "
        "then `trainkit app deploy`",
    )


def secret_not_found(name: str) -> NotFoundError:
    return NotFoundError(
        f"the Modal secret {name!r} (TRAINKIT_HF_SECRET) does not exist, or has no HF_TOKEN key",
        hint=f"create it: `modal secret create {hint_word(name, 'NAME')} HF_TOKEN=hf_...`, or leave TRAINKIT_HF_SECRET empty",
    )


def _is(exc: BaseException, sdk: Any, name: str) -> bool:
    cls = getattr(getattr(sdk, "exception", None), name, None)
    return isinstance(cls, type) and isinstance(exc, cls)


def convert(exc: BaseException, sdk: Any, where: str) -> BaseException:
    """The trainkit error for a Modal exception raised while doing `where`; other exceptions unchanged."""
    if isinstance(exc, TrainkitError):
        return exc
    text = str(exc).strip() or type(exc).__name__
    if _is(exc, sdk, "AuthError") or "Token missing" in text:
        return no_token(where)
    if _is(exc, sdk, "NotFoundError"):
        return NotFoundError(f"not found on Modal ({where}): {text}")
    if _is(exc, sdk, "ConnectionError"):
        return ModalUnavailable(f"cannot reach Modal ({where}): {text}", hint="check your network connection")
    if any(_is(exc, sdk, name) for name in TRANSIENT):
        return ModalUnavailable(
            f"Modal's service failed the request ({where}): {type(exc).__name__}: {text}",
            hint="a passing failure or a rate limit of Modal's: try again in a minute",
        )
    if _is(exc, sdk, "InvalidError"):
        return UsageError(f"Modal refused the request ({where}): {text}")
    if _is(exc, sdk, "Error"):
        return ProviderError(f"Modal failed ({where}): {text}")
    return exc


@contextmanager
def translate(sdk: Any, where: str) -> Iterator[None]:
    """Re-raise Modal's exceptions inside the block as trainkit errors naming `where`."""
    try:
        yield
    except TrainkitError:
        raise
    except Exception as exc:
        converted = convert(exc, sdk, where)
        if converted is exc:
            raise
        raise converted from exc
