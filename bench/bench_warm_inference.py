"""Cold vs warm inference on the local provider, printed as a ratio measured in one run.

    .venv/bin/python bench/bench_warm_inference.py [--repeats 3]

Builds a tiny-base adapter (random LoRA weights, nothing trained) in a temporary
TRAINKIT_HOME, then times, through `trainkit_core.inference.client.generate`:

- cold: the first request, which starts the warm worker process and loads the model;
- warm: the next requests to the same worker, which skip the load;
- job: a request through the ``infer`` job (a fresh process per request, no warm worker).

Timings vary with the machine's load; the ratios compare runs measured side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "core"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="trainkit-bench-warm-"))
    os.environ["TRAINKIT_HOME"] = str(home)
    os.environ["TRAINKIT_INFER_IDLE_TIMEOUT_S"] = "30"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from trainkit_fake_models import make_fake_model

    from trainkit_core import get_provider
    from trainkit_core.inference import client

    model_path = make_fake_model(home / "volumes" / "trainkit-models", home / "volumes" / "trainkit-hf-cache")
    provider = get_provider("local")
    request = {"model_path": model_path, "prompt": "Uppercase: snow blue", "max_new_tokens": args.max_new_tokens}

    def timed(**kw: object) -> float:
        started = time.perf_counter()
        client.generate(provider, request, **kw)  # type: ignore[arg-type]
        return time.perf_counter() - started

    cold = timed()
    warm = [timed() for _ in range(args.repeats)]
    job = [timed(use_server=False) for _ in range(max(1, args.repeats // 2))]
    warm_s, job_s = statistics.median(warm), statistics.median(job)
    print(f"cold (start worker + load + generate): {cold:8.3f} s")
    print(f"warm (same worker, model loaded):      {warm_s:8.3f} s  (median of {len(warm)})")
    print(f"infer job (fresh process each time):   {job_s:8.3f} s  (median of {len(job)})")
    print(f"ratio cold/warm: {cold / warm_s:.1f}x   ratio job/warm: {job_s / warm_s:.1f}x")
    server = provider.inference_server()
    health = server.status() if server is not None else None
    if health:
        print(
            f"worker: {health['requests']} requests, {health['loads']} base load(s), {health['adapter_loads']} adapter load(s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
