"""A run asking for 2 GPUs on Modal trains on 2 ranks in its container, not on one GPU of two.

Through the fake (`fake_modal.py`): the call asks Modal for ``gpu="T4:2"`` and the train job
in the fake's container starts torchrun, whose ranks build the Modal job context again
(`trainkit_modal.container.rank_job_context`) and reach the same Dicts and volumes. The fake's
containers have no GPU, so the ranks talk over gloo on the CPU: what differs on Modal is
NCCL and real GPUs, never run here. `batch_size` is per GPU, so a 2-GPU run of batch 1 is
compared with a 1-GPU run of batch 2: the same global batch and data order, the same losses
and adapter within the tolerance of `tests/core/test_distributed_ml.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings
from trainkit_modal.plugin import ModalPlugin

pytestmark = [pytest.mark.ml, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-3
RECIPE = {"dataset": "demo", "model_size": "tiny", "gpu": "T4", "steps": 4, "save_every": 1000, "learning_rate": 1e-3}


@pytest.fixture
def deployed(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Provider:
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(REPO / "datasets"))
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: fake_modal), name="modal", module="trainkit_modal.plugin")
    provider = get_provider("modal", Settings.from_env(), pm=pm)
    provider.deployment().deploy()
    return provider


def _adapter(fake_modal: ModuleType, provider: Provider, run_id: str) -> dict[str, Any]:
    from safetensors.torch import load_file

    from trainkit_core.models.trained.paths import trained_dir

    models = fake_modal.Volume.from_name(provider.settings.volumes.name_for("models")).root
    return load_file(str(Path(models) / trained_dir(run_id) / "adapter_model.safetensors"))


def test_two_gpus_train_on_two_ranks_and_match_one_gpu_of_the_same_global_batch(
    deployed: Provider, fake_modal: ModuleType
) -> None:
    import torch

    from trainkit_core.training.submit import start_run

    one = start_run(deployed, {**RECIPE, "batch_size": 2})
    two = start_run(deployed, {**RECIPE, "batch_size": 1, "gpus": 2})
    for handle in (one, two):
        handle.call.wait(timeout=600)
        handle.reload()
    assert one.status == "succeeded", one.error_message
    assert two.status == "succeeded", two.error_message
    # Modal is asked for both GPUs in one container, and the config keeps the count.
    call = json.loads((fake_modal._root() / "calls" / f"{two.call_id}.json").read_text())
    assert call["options"]["gpu"] == "T4:2"
    assert two.config["gpus"] == 2 and two.config["gpu"] == "T4:2" and two.step == one.step == 4
    for key in ("first_loss", "final_loss"):
        assert two.metrics[key] == pytest.approx(one.metrics[key], rel=TOLERANCE), key
    a, b = _adapter(fake_modal, deployed, one.id), _adapter(fake_modal, deployed, two.id)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=TOLERANCE, atol=1e-6), name
    events = list(two.events.read())
    said = [e for e in events if e.get("processes") == 2]
    assert len(said) == 1 and "training on 2 GPUs" in said[0]["message"], said
    assert "global batch 2 (1 per rank x 2)" in said[0]["message"]
    assert sum(1 for e in events if e.get("type") == "status" and e.get("status") == "succeeded") == 1
    log = (fake_modal._root() / "calls" / f"{two.call_id}.log").read_text()
    assert "nproc-per-node=2" in log and "trainkit_core.training.rank trainkit_modal.container:rank_job_context" in log


def test_two_nodes_train_as_one_cluster_and_match_one_node(deployed: Provider, fake_modal: ModuleType) -> None:
    """`--nodes 2`: the app's clustered train function (`modal.clustered(size=2)`), two containers told
    their rank and the cluster's addresses, torchrun meeting at node 0's; one run record, node 0's."""
    import torch

    from trainkit_core.training.submit import start_run

    one = start_run(deployed, {**RECIPE, "batch_size": 2})
    two = start_run(deployed, {**RECIPE, "batch_size": 1, "nodes": 2})
    for handle in (one, two):
        try:
            handle.call.wait(timeout=600)
        except Exception:
            print((fake_modal._root() / "calls" / f"{handle.call_id}.log").read_text()[-8000:])
            raise
        handle.reload()
    log = (fake_modal._root() / "calls" / f"{two.call_id}.log").read_text()
    assert two.status == "succeeded", f"{two.error_message}\n{log[-4000:]}"
    call = json.loads((fake_modal._root() / "calls" / f"{two.call_id}.json").read_text())
    assert call["name"] == "train_nodes2" and call["options"]["gpu"] == "T4" and call["policy"]["cluster_size"] == 2
    assert [a["end"] for a in call["attempts"]] == ["succeeded"]
    assert "--nnodes=2 --node-rank=0" in log and "--nnodes=2 --node-rank=1" in log
    assert two.config["nodes"] == 2 and two.step == one.step == 4
    for key in ("first_loss", "final_loss"):
        assert two.metrics[key] == pytest.approx(one.metrics[key], rel=TOLERANCE), key
    a, b = _adapter(fake_modal, deployed, one.id), _adapter(fake_modal, deployed, two.id)
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=TOLERANCE, atol=1e-6), name
    events = list(two.events.read())
    assert [e["processes"] for e in events if "processes" in e] == [2]
    assert sum(1 for e in events if e.get("type") == "status" and e.get("status") == "succeeded") == 1


def test_a_node_count_the_app_has_no_cluster_for_is_refused(deployed: Provider) -> None:
    from trainkit_core.errors import UsageError
    from trainkit_core.training.submit import start_run

    with pytest.raises(UsageError, match=r"at most 4 node\(s\); this one asks for 8"):
        start_run(deployed, {**RECIPE, "nodes": 8})
