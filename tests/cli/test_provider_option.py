"""`--provider` works where users type it: before the subcommand and after it."""

from __future__ import annotations

import json

from cli_helpers import run_main


def test_provider_after_the_subcommand_reaches_the_provider() -> None:
    code, out = run_main("ping", "--provider", "nosuch")
    assert code == 3, out
    assert "No such option" not in out
    assert "unknown provider 'nosuch'" in out


def test_provider_after_a_nested_subcommand_runs_it() -> None:
    code, out = run_main("runs", "list", "--json", "--provider", "local")
    assert code == 0, out
    assert json.loads(out) == []


def test_both_places_agree_or_the_command_is_refused() -> None:
    code, out = run_main("--provider", "local", "runs", "list", "--json", "--provider", "local")
    assert code == 0, out
    code, out = run_main("--provider", "local", "ping", "--provider", "modal")
    assert code == 2, out
    assert "--provider given twice" in out and "'local'" in out and "'modal'" in out


def test_every_command_lists_it_in_its_help() -> None:
    for args in (("ping",), ("train",), ("runs", "list"), ("serve",)):
        code, out = run_main(*args, "--help")
        assert code == 0, out
        assert "--provider NAME" in out, args
