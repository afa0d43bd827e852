"""trainkit's Modal app at module scope, for Modal's own CLI (seed 000's ``modal run app.py``).

::

    modal run -m trainkit_modal.entrypoint                      # ping
    modal run -m trainkit_modal.entrypoint --action train --dataset demo --train-steps 100 --model-size 4b
    modal serve -m trainkit_modal.entrypoint                    # the web API in dev mode
    modal deploy -m trainkit_modal.entrypoint                   # what `trainkit app deploy` deploys

The app is `trainkit_modal.app.build_app` of the settings in the environment
(``TRAINKIT_*``): the same app, functions and images as ``trainkit app deploy``. Its
functions are shipped by reference (``serialized=True``), so Modal adds no source of
this module to them. Importing this module builds the app and imports modal: only
Modal's CLI imports it. The actions are `trainkit_modal.actions`.
"""

from __future__ import annotations

from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings
from trainkit_modal.actions import Action, run_entrypoint
from trainkit_modal.app import build_app
from trainkit_modal.plugin import NAME

settings = Settings.from_env()
built = build_app(settings)
app = built.app


def provider() -> Provider:
    """The Modal provider of these settings, as the `trainkit` command gets it."""
    return get_provider(NAME, settings)


@app.local_entrypoint()
def main(
    action: Action = "ping",
    dataset: str = "",
    train_steps: int = 0,
    model_size: str = "",
    model_path: str = "",
    prompt: str = "",
) -> None:
    """Seed 000's ``--action`` and flags (`trainkit_modal.actions.run_action`)."""
    run_entrypoint(
        built,
        provider(),
        action,
        dataset=dataset,
        train_steps=train_steps,
        model_size=model_size,
        model_path=model_path,
        prompt=prompt,
    )
