"""Starting the API and answering the light routes imports no ML stack and no provider SDK."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, sys
from fastapi.testclient import TestClient
from trainkit_api.app import create_app
app = create_app()
with TestClient(app, base_url="http://127.0.0.1") as client:
    for path in ("/health", "/v1/info", "/v1/runs", "/v1/models", "/openapi.json"):
        assert client.get(path).status_code == 200, path
heavy = ("torch", "transformers", "peft", "trl", "datasets", "accelerate", "bitsandbytes", "unsloth", "modal")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def test_api_start_imports_nothing_heavy(cli_env) -> None:
    env = {k: v for k, v in cli_env.items() if k != "TRAINKIT_API_TOKEN"}
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
