"""GGUF export of a trained tiny model, run in llama.cpp (the `ml` session; xllamacpp is a prebuilt wheel).

One short real run of the tiny preset on the demo dataset is exported with
`trainkit export --gguf` (f16, then q8_0, q4_0 and the k-quant q4_k_m). The export job
itself checks the file in llama.cpp; here the file is checked again from outside: its metadata (chat template,
end-of-turn id) read back with the `gguf` package's reader, the Modelfile parsed, and
the GGUF served by llama.cpp in this process and asked the demo's eval prompts as chat
messages (rendered by the template in the file, stopped by the file's end-of-generation
tokens), whose answers must equal the `trainkit infer` command's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_env import REPO, Env

from trainkit_core.export.gguf.check import release_server

gguf = pytest.importorskip("gguf")
xllamacpp = pytest.importorskip("xllamacpp")

pytestmark = [pytest.mark.ml, pytest.mark.gguf, pytest.mark.timeout(1200)]

PROMPTS = [json.loads(line)["messages"][0]["content"] for line in (REPO / "datasets/demo/eval.jsonl").open()][:4]
MAX_NEW = 24


@pytest.fixture(scope="module")
def model_path(env: Env) -> str:
    done = env.cli("train", "--dataset", "demo", "--model-size", "tiny", "--steps", "40")
    found = re.search(r"model: (trained/run-\S+)", done.stdout)
    assert found, done.stdout
    return found.group(1)


@pytest.fixture(scope="module")
def infer_answers(env: Env, model_path: str) -> list[str]:
    """`trainkit infer`'s greedy answers to the demo's eval prompts."""
    answers = []
    for prompt in PROMPTS:
        args = ("infer", "--model-path", model_path, "--prompt", prompt, "--max-new-tokens", str(MAX_NEW), "--json")
        answers.append(json.loads(env.cli(*args).stdout)["text"])
    return answers


def _llama_cpp_answers(gguf_file: Path) -> list[tuple[str, bool]]:
    """Greedy (answer, stopped at end of generation) of llama.cpp to the demo's eval prompts as chat messages.

    Nothing of trainkit's is used: llama.cpp renders the messages with the chat template in the file
    and stops at the end-of-generation tokens its metadata names."""
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_file)
    params.n_ctx = 512
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.verbosity = -1
    held = [xllamacpp.Server(params)]
    server = held[0]
    answers = []
    for prompt in PROMPTS:
        result = server.handle_chat_completions(
            {"messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_NEW, "temperature": 0, "top_k": 1}
        )
        assert "error" not in result, result
        choice = result["choices"][0]
        answers.append((choice["message"]["content"] or "", choice["finish_reason"] == "stop"))
    del server
    release_server(held)  # its destructor may hang (see release_server)
    return answers


def _export(env: Env, model_path: str, out: Path, quant: str) -> dict[str, Any]:
    return json.loads(env.cli("export", model_path, "--gguf", "--quant", quant, "--merged", str(out), "--json").stdout)  # type: ignore[no-any-return]


def test_f16_gguf_answers_as_trainkit_infer_and_stops_at_end_of_turn(
    env: Env, model_path: str, infer_answers: list[str], tmp_path: Path
) -> None:
    from trainkit_core.export.gguf.writer import parse_modelfile
    from trainkit_core.models.chat_format import GEMMA3

    info = _export(env, model_path, tmp_path / "out", "f16")
    check = info["gguf"]["check"]
    assert check["passed"] and check["exact_match_rate"] == 1.0 and check["prompt_tokens_equal"]
    assert check["chat_template_equal"] and check["llama_cpp"].startswith("xllamacpp ")
    assert check["tool_template_equal"]  # a request with tools, rendered by the file's tool_use template
    assert check["stopped_at_end_of_turn"] >= 1
    gguf_file = tmp_path / "out" / "model-f16.gguf"

    reader = gguf.GGUFReader(str(gguf_file))
    fields = {name: field.contents() for name, field in reader.fields.items()}
    assert fields["general.architecture"] == "gemma3"
    tokens = fields["tokenizer.ggml.tokens"]
    assert tokens[fields["tokenizer.ggml.eot_token_id"]] == GEMMA3.end_of_turn
    assert (
        "endgeneration" not in fields["tokenizer.chat_template"]
        and GEMMA3.end_of_turn in fields["tokenizer.chat_template"]
    )
    # Plain chats keep the plain template; a request with tools gets the tool-aware one (llama.cpp's
    # `tool_use` slot), without transformers' generation marks either.
    assert "tool" not in fields["tokenizer.chat_template"]
    assert fields["tokenizer.chat_templates"] == ["tool_use"]
    tool_use = fields["tokenizer.chat_template.tool_use"]
    assert "tool_call" in tool_use and "generation %}" not in tool_use
    assert {t.tensor_type.name for t in reader.tensors if len(t.shape) == 2} == {"F16"}

    modelfile = parse_modelfile((tmp_path / "out" / "Modelfile").read_text())
    assert modelfile["from"] == "./model-f16.gguf"
    assert GEMMA3.end_of_turn in modelfile["parameters"]["stop"]
    assert f"{GEMMA3.turn_start}user\n" in modelfile["template"] and "{{ .Prompt }}" in modelfile["template"]
    assert modelfile["template"].rstrip().endswith("{{ .Response }}" + GEMMA3.end_of_turn)

    got = _llama_cpp_answers(gguf_file)
    assert [text for text, _ in got] == infer_answers
    assert any(stopped for _, stopped in got)


def test_without_the_query_scale_folded_in_llama_cpp_answers_differently(
    env: Env, model_path: str, infer_answers: list[str], tmp_path: Path
) -> None:
    """The check can fail: llama.cpp's own converter's rule (no query_pre_attn_scalar) changes the answers."""
    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.models.chat_format import GEMMA3

    merged = tmp_path / "merged"
    env.cli("export", model_path, "--merged", str(merged))
    config = json.loads((merged / "config.json").read_text())
    config["query_pre_attn_scalar"] = config["head_dim"]
    (merged / "config.json").write_text(json.dumps(config))
    write_gguf(merged, tmp_path / "unscaled.gguf", quant="f32", fmt=GEMMA3, name="unscaled")
    assert [text for text, _ in _llama_cpp_answers(tmp_path / "unscaled.gguf")] != infer_answers


@pytest.mark.parametrize("quant", ["q8_0", "q4_0", "q4_k_m"])
def test_a_quantised_gguf_runs_in_llama_cpp_and_reports_its_exact_match_rate(
    env: Env, model_path: str, tmp_path: Path, quant: str
) -> None:
    info = _export(env, model_path, tmp_path / "out", quant)
    check = info["gguf"]["check"]
    assert check["type"] == quant and 0.0 <= check["exact_match_rate"] <= 1.0 and check["prompts"] >= 1
    assert check["prompt_tokens_equal"] and check["chat_template_equal"]  # the quantised weights loaded and ran
    reader = gguf.GGUFReader(str(tmp_path / "out" / f"model-{quant}.gguf"))
    types = [t.tensor_type.name for t in reader.tensors if len(t.shape) == 2]
    if quant == "q4_k_m":  # llama-quantize's mix (tests/gguf/test_gguf_kquants.py), recorded with the export
        mix = info["gguf"]["quantization"]
        assert {"Q4_K", "Q6_K", "Q5_0", "Q8_0"} == set(types) and mix["tensor_types"]["Q5_0"] == types.count("Q5_0")
        assert any("not a multiple of 256" in fallback["reason"] for fallback in mix["fallbacks"])
    else:
        assert set(types) == {quant.upper()}
    exported = json.loads((tmp_path / "out" / "trainkit_export.json").read_text())
    assert exported["gguf"]["check"] == check


def test_i_quants_and_bad_types_are_refused_before_a_job_starts(env: Env, model_path: str, tmp_path: Path) -> None:
    done = env.cli("export", model_path, "--gguf", "--quant", "iq4_xs", "--merged", str(tmp_path / "x"), check=False)
    assert done.returncode == 2 and "iq4_xs" in done.stderr and not (tmp_path / "x").exists()
    from trainkit_core.errors import UsageError
    from trainkit_core.export.gguf.writer import check_gguf_architecture, check_gguf_type

    with pytest.raises(UsageError, match="importance matrix"):
        check_gguf_type("q2_k_s")
    with pytest.raises(UsageError, match="LlamaForCausalLM is not supported"):
        check_gguf_architecture({"architectures": ["LlamaForCausalLM"]})
