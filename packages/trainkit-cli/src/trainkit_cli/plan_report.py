"""The plan of a run, printed by `trainkit train --plan` and before every run starts.

`print_plan` is what `train` calls, with the request `check_request` checked: with
``--plan`` it prints the plan (JSON with ``--json``) and stops; before a real start it
prints the same plan to stderr. Both count tokens the same way (exactly where the
model's tokenizer is on this machine), so ``--plan`` and the start never disagree on
the tokens, the duration or the cost; a plan that cannot be made never blocks the start.
"""

from __future__ import annotations

import logging
from typing import Any

from trainkit_cli.state import CliState, console, print_json
from trainkit_core.errors import TrainkitError

log = logging.getLogger(__name__)


def print_plan(state: CliState, config: Any, *, plan_only: bool, as_json: bool) -> bool:
    """Print the plan; True when the command should stop there (``--plan``)."""
    from trainkit_core.training.plan import make_plan

    if plan_only:
        plan = make_plan(state.provider, config, exact=True)
        if as_json:
            print_json(plan.model_dump(mode="json"))
        else:
            for line in plan.lines():
                console().print(line, highlight=False, markup=False, soft_wrap=True)
        return True
    if as_json:
        return False
    try:
        plan = make_plan(state.provider, config, exact=True)
    except TrainkitError as exc:  # the start reports what is wrong with the dataset itself
        log.debug("no plan: %s", exc)
        return False
    err = console(stderr=True)
    for line in plan.lines():
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    return False
