"""Run `trainkit` in-process through its console entry point (`trainkit_cli.main.main`).

`main` is what the installed `trainkit` command runs: it turns trainkit's errors into
a message and an exit status. Anything else escaping it is what a user would see as
a traceback; `run_main` prints it into the output (so a test asserting "no Traceback"
fails with the traceback shown) and reports exit status -1.
"""

from __future__ import annotations

import sys
import traceback

from click.testing import CliRunner

from trainkit_cli.main import main


def run_main(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
    """(exit status, stdout and stderr together) of ``trainkit ARGS``, with `env` added to the environment."""
    code: int = 0
    with CliRunner().isolation(input=input, env=env) as (_, _, output):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # exactly what must not happen: shown as the user would see it
            sys.stderr.write(traceback.format_exc())
            code = -1
        sys.stdout.flush()
        sys.stderr.flush()
        text = output.getvalue().decode("utf-8", "replace")
    return code, text
