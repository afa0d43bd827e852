"""OpenAI's graders run by trainkit (`trainkit_core.rewards.openai_graders`): the scores they give and what they refuse."""

from __future__ import annotations

import math
from typing import Any

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.rewards.openai_graders import GraderError, check, grader_names, render, scores, similarity
from trainkit_core.training.config import TrainConfig


def string_check(operation: str, reference: str = "{{item.answer}}") -> dict[str, Any]:
    return {
        "type": "string_check",
        "name": "s",
        "input": "{{sample.output_text}}",
        "reference": reference,
        "operation": operation,
    }


@pytest.mark.parametrize(
    ("operation", "sample", "expected"),
    [
        ("eq", "Paris", 1.0),
        ("eq", "paris", 0.0),
        ("eq", "Paris ", 0.0),
        ("ne", "Lyon", 1.0),
        ("ne", "Paris", 0.0),
        ("like", "It is Paris.", 1.0),
        ("like", "it is paris.", 0.0),
        ("ilike", "it is PARIS.", 1.0),
        ("ilike", "Lyon", 0.0),
    ],
)
def test_string_check_operations(operation: str, sample: str, expected: float) -> None:
    assert scores(check(string_check(operation)), sample, {"answer": "Paris"}) == (expected, {})


def test_templates_read_nested_item_fields_json_samples_and_sit_inside_text() -> None:
    item = {"meta": {"city": "Oslo", "codes": ["N", "O"]}, "n": 3}
    assert render("Capital: {{ item.meta.city }}!", "x", item) == "Capital: Oslo!"
    assert render("{{item.meta.codes.1}}{{item.n}}", "x", item) == "O3"
    assert render("{{sample.output_json.city}}", '{"city": "Oslo"}', item) == "Oslo"
    assert render("{{sample.output_json.city}}", "not json", item) == ""
    with pytest.raises(KeyError, match=r"meta\.town"):
        render("{{item.meta.town}}", "x", item)


def test_similarity_metrics_follow_their_formulas() -> None:
    assert similarity("bleu", "the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    assert similarity("bleu", "dogs bark", "the cat sat on the mat") == 0.0
    # rouge_1: 2 of 3 words match each way -> F1 2/3.
    assert similarity("rouge_1", "cold late night", "cold late day") == pytest.approx(2 / 3)
    # rouge_2: one bigram of two matches each way -> 1/2.
    assert similarity("rouge_2", "cold late night", "cold late day") == pytest.approx(0.5)
    # rouge_l: the longest common subsequence of "a b c d" and "a c d e" is "a c d" (3 of 4).
    assert similarity("rouge_l", "a b c d", "a c d e") == pytest.approx(0.75)
    # gleu: 1- to 4-grams; "a b" vs "a c": 1 match of 3 n-grams each way.
    assert similarity("gleu", "a b", "a c") == pytest.approx(1 / 3)
    assert similarity("fuzzy_match", "colour", "color") == pytest.approx(2 * 5 / 11)
    # Case and punctuation: tokens are lower-cased words and marks.
    assert similarity("rouge_1", "Cold, LATE.", "cold , late .") == pytest.approx(1.0)
    # METEOR (exact matches): recall-weighted F-mean, less half the cube of chunks per match.
    assert similarity("meteor", "late cold", "cold late") == pytest.approx(0.5)
    assert similarity("meteor", "a b c d e f", "a b c d e f") == pytest.approx(1 - 0.5 / 6**3)
    assert similarity("meteor", "a b", "a b c d") == pytest.approx((10 * 1 * 0.5 / (0.5 + 9)) * (1 - 0.5 / 8))
    assert similarity("meteor", "runs", "running") == 0.0  # no stemming: said in the docs
    # BLEU's brevity penalty: a right but short answer scores below 1.
    short = similarity("bleu", "the cat sat on the", "the cat sat on the mat")
    assert 0 < short < math.exp(1 - 6 / 5) + 1e-9


def test_multi_combines_named_graders_with_a_formula() -> None:
    multi = {
        "type": "multi",
        "name": "m",
        "graders": {
            "exact": string_check("eq"),
            "close": {**string_check("eq"), "type": "text_similarity", "evaluation_metric": "rouge_1"},
        },
        "calculate_output": "max(exact, 0.5 * close) ^ 2",
    }
    multi["graders"]["close"].pop("operation")
    total, subs = scores(check(multi), "cold early", {"answer": "cold late"})
    assert subs == {"exact": 0.0, "close": 0.5} and total == pytest.approx(0.0625)
    # OpenAI's single-grader form: the grader's own name.
    single = {"type": "multi", "graders": string_check("eq"), "calculate_output": "1 - s"}
    assert scores(check(single), "Paris", {"answer": "Paris"})[0] == 0.0
    with pytest.raises(ArithmeticError, match="calculate_output"):
        scores(check({**single, "calculate_output": "1 / s"}), "x", {"answer": "Paris"})


@pytest.mark.parametrize(
    ("spec", "param"),
    [
        ({"type": "python"}, "grader.source"),
        ({"type": "score_model", "model": "gpt-4o"}, "grader.type"),
        ({"type": "label_model"}, "grader.type"),
        ({"type": "nope"}, "grader.type"),
        ([], "grader"),
        ({**string_check("eq"), "operation": "contains"}, "grader.operation"),
        ({**string_check("eq"), "input": ""}, "grader.input"),
        ({**string_check("eq"), "input": "{{sample.output}}"}, "grader.input"),
        ({**string_check("eq"), "reference": "{{os.environ}}"}, "grader.reference"),
        ({**string_check("eq"), "type": "text_similarity", "evaluation_metric": "cosine"}, "grader.evaluation_metric"),
        ({**string_check("eq"), "type": "text_similarity", "evaluation_metric": "rouge_9"}, "grader.evaluation_metric"),
        (
            {"type": "multi", "graders": {"a": string_check("eq")}, "calculate_output": "a.__class__"},
            "grader.calculate_output",
        ),
        (
            {"type": "multi", "graders": {"a": string_check("eq")}, "calculate_output": "__import__('os')"},
            "grader.calculate_output",
        ),
        (
            {"type": "multi", "graders": {"a": string_check("eq")}, "calculate_output": "a + b"},
            "grader.calculate_output",
        ),
        ({"type": "multi", "graders": {"a": string_check("eq")}, "calculate_output": "[a]"}, "grader.calculate_output"),
        ({"type": "multi", "graders": {"a": string_check("eq")}, "calculate_output": "a +"}, "grader.calculate_output"),
        ({"type": "multi", "graders": {}, "calculate_output": "1"}, "grader.graders"),
        ({"type": "multi", "graders": {"a b": string_check("eq")}, "calculate_output": "1"}, "grader.graders"),
        ({"type": "multi", "graders": {"a": {"type": "python"}}, "calculate_output": "a"}, "grader.graders.a.type"),
        ({"type": "multi", "graders": {"a": {"type": "multi"}}, "calculate_output": "a"}, "grader.graders.a.type"),
    ],
)
def test_what_trainkit_cannot_run_is_refused_naming_the_field(spec: Any, param: str) -> None:
    with pytest.raises(GraderError) as caught:
        check(spec, "grader")
    assert caught.value.param == param, caught.value.message


def test_a_run_config_takes_graders_and_names_their_rewards() -> None:
    config = TrainConfig.parse(
        dataset="d",
        method="grpo",
        openai_graders=[string_check("eq"), string_check("like"), {**string_check("eq"), "name": None}],
    )
    assert grader_names(list(config.openai_graders or [])) == ["s", "s_2", "grader_3"]
    with pytest.raises(UsageError, match=r"openai_graders\[0\]\.operation"):
        TrainConfig.parse(dataset="d", method="grpo", openai_graders=[string_check("eq") | {"operation": "x"}])


# ----------------------------------------------------------------------------- python graders

PYTHON_SOURCE = """
def grade(sample, item):
    if isinstance(sample["output_json"], dict):
        return 0.5
    return 1.0 if sample["output_text"].strip() == item["answer"] else 0.0
"""


def python_grader(source: str = PYTHON_SOURCE, name: str = "py") -> dict[str, Any]:
    return {"type": "python", "name": name, "source": source}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("", "source must be"),
        ("def grade(sample, item)\n    return 1", "does not compile: line 1"),
        ("def score(sample, item):\n    return 1\n", "no top-level grade"),
        ("x = '" + "a" * (256 * 1024) + "'\ndef grade(s, i):\n    return 1\n", "over 256 KiB"),
    ],
)
def test_a_python_grader_must_compile_and_define_grade_and_nothing_of_it_runs_when_checked(
    source: str, reason: str
) -> None:
    with pytest.raises(GraderError, match=reason) as caught:
        check(python_grader(source), "grader")
    assert caught.value.param == "grader.source"
    # Checking never runs it: a source that would exit the process at import passes the check.
    assert check(python_grader("import os\nos._exit(3)\ndef grade(s, i):\n    return 1\n"))["type"] == "python"


def test_a_python_grader_is_never_run_outside_a_job_nor_inside_a_multi_grader() -> None:
    with pytest.raises(UsageError, match="only inside a training job"):
        scores(check(python_grader()), "x", {"answer": "x"})
    multi = {"type": "multi", "graders": {"p": python_grader()}, "calculate_output": "p"}
    with pytest.raises(GraderError, match="stands alone") as caught:
        check(multi, "grader")
    assert caught.value.param == "grader.graders.p.type"


def test_a_python_grader_runs_in_its_own_process_in_a_grpo_run_bounded_by_the_timeout() -> None:
    from trainkit_core.rewards.scoring import GraderError as ScoringError
    from trainkit_core.training.methods.grpo import RolloutKeeper, reward_functions

    looping = python_grader("def grade(sample, item):\n    while True:\n        pass\n", name="loops")
    config = TrainConfig.parse(
        dataset="d", method="grpo", openai_graders=[python_grader(), looping], reward_timeout_s=2
    )
    example = {"messages": [{"role": "user", "content": "Say 4"}], "answer": "4"}
    (right, loops), weights = reward_functions(config, {"<p>": example}, RolloutKeeper())
    assert weights == [1.0, 1.0]
    assert right(["<p>", "<p>", "<p>"], [" 4 ", "5", '{"a": 1}']) == [1.0, 0.0, 0.5]
    with pytest.raises(ScoringError, match=r"grader 'loops' ran past its timeout of 2 s"):
        loops(["<p>"], ["x"])
    broken = python_grader("def grade(sample, item):\n    return item['missing']\n", name="broken")
    (fails,), _ = reward_functions(
        TrainConfig.parse(dataset="d", method="grpo", openai_graders=[broken]), {"<p>": example}, RolloutKeeper()
    )
    with pytest.raises(ScoringError, match="grader 'broken' raised KeyError"):
        fails(["<p>"], ["x"])


def test_a_run_with_a_python_grader_is_refused_unless_the_server_allows_them(tmp_path: Any) -> None:
    from trainkit_core.plugins.provider import get_provider
    from trainkit_core.settings import ComputeSettings, ProviderSettings, Settings
    from trainkit_core.training.submit import check_request

    config = {"dataset": "nowhere", "method": "grpo", "openai_graders": [python_grader()]}
    closed = Settings(provider=ProviderSettings(home=tmp_path / "a"))
    with pytest.raises(UsageError, match="TRAINKIT_ALLOW_PYTHON_GRADERS") as caught:
        check_request(get_provider("local", closed), config)
    assert "openai_graders[0]" in caught.value.message
    opened = Settings(
        provider=ProviderSettings(home=tmp_path / "b"), compute=ComputeSettings(allow_python_graders=True)
    )
    with pytest.raises(Exception) as past:  # goes on to the next check: the dataset that does not exist
        check_request(get_provider("local", opened), config)
    assert "nowhere" in str(past.value) and "PYTHON_GRADERS" not in str(past.value)
