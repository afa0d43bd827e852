"""trainkit-modal uses only modal 1.6 names: a scan of its source (AST) for removed or renamed ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "packages" / "trainkit-modal" / "src" / "trainkit_modal"

#: Keyword arguments modal 1.x removed (they raise DeprecationError) -> their replacement.
REMOVED_KEYWORDS = {
    "container_idle_timeout": "scaledown_window",
    "keep_warm": "min_containers",
    "concurrency_limit": "max_containers",
    "allow_concurrent_inputs": "@modal.concurrent",
    "mounts": "Image.add_local_python_source",
}
#: Attributes that are gone from the SDK (or go in 1.7).
REMOVED_ATTRIBUTES = {
    "Stub": "App",
    "Mount": "Image.add_local_*",
    "web_endpoint": "fastapi_endpoint",
    "registered_functions": "(removed in 1.7)",
    "lookup_function": "Function.from_name",
}
#: `X.lookup` is gone for these (App.lookup is current in 1.6).
NO_LOOKUP_ON = {"Function", "Cls", "Dict", "Volume", "Secret", "Queue"}


def _problems(tree: ast.AST, filename: str) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in REMOVED_KEYWORDS:
            found.append(f"{filename}:{node.value.lineno}: {node.arg}= (use {REMOVED_KEYWORDS[node.arg]})")
        if isinstance(node, ast.Attribute):
            if node.attr in REMOVED_ATTRIBUTES:
                found.append(f"{filename}:{node.lineno}: .{node.attr} (use {REMOVED_ATTRIBUTES[node.attr]})")
            if node.attr == "lookup" and isinstance(node.value, ast.Attribute) and node.value.attr in NO_LOOKUP_ON:
                found.append(f"{filename}:{node.lineno}: {node.value.attr}.lookup (use from_name)")
            if node.attr == "lookup" and isinstance(node.value, ast.Name) and node.value.id in NO_LOOKUP_ON:
                found.append(f"{filename}:{node.lineno}: {node.value.id}.lookup (use from_name)")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("modal"):
            for alias in node.names:
                if alias.name in REMOVED_ATTRIBUTES:
                    found.append(f"{filename}:{node.lineno}: import {alias.name}")
    return found


def scan(directory: Path) -> list[str]:
    problems = []
    for path in sorted(directory.rglob("*.py")):
        problems += _problems(ast.parse(path.read_text(), str(path)), path.name)
    return problems


def test_package_uses_no_removed_modal_names() -> None:
    assert SOURCE.is_dir()
    assert scan(SOURCE) == []


@pytest.mark.parametrize(
    "code",
    [
        "app.cls(container_idle_timeout=60)",
        "app.function(keep_warm=1)",
        "app.function(concurrency_limit=2)",
        "app.function(allow_concurrent_inputs=4)",
        "app.function(mounts=[m])",
        "modal.Stub('x')",
        "modal.Mount.from_local_dir('.')",
        "modal.Function.lookup('app', 'f')",
        "modal.Cls.lookup('app', 'C')",
        "from modal import Stub",
        "modal.web_endpoint()",
        "app.registered_functions",
    ],
)
def test_the_scan_catches_each_removed_name(code: str) -> None:
    assert _problems(ast.parse(code), "example.py"), code


def test_the_scan_allows_current_names() -> None:
    code = "modal.App.lookup('x').stop(); modal.Function.from_name('a', 'f'); app.cls(scaledown_window=60)"
    assert _problems(ast.parse(code), "example.py") == []
