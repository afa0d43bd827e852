"""OpenAI's graders as trainkit graders: `string_check`, `text_similarity` and `multi`.

A team moving from OpenAI's reinforcement fine-tuning brings graders written as JSON:
``{"type": "string_check", "input": "{{sample.output_text}}", "reference": "{{item.answer}}",
"operation": "eq"}``. `check` validates one (with the path of the field at fault), `grade`
scores a completion against a dataset line with it, as OpenAI's grader would. A GRPO run
takes them in `TrainConfig.openai_graders`, each one more reward.

Templates: ``{{sample.output_text}}`` is the completion, ``{{sample.output_json.<path>}}``
a field of it when it is JSON, ``{{item.<path>}}`` a field of the dataset line (dots go
into objects). A template may sit inside a longer text.

The text-similarity metrics are trainkit's own implementations of the published formulas
over lower-cased word and punctuation tokens: `fuzzy_match` (difflib's ratio of the two
texts), `bleu` (sentence BLEU, 1- to 4-grams, brevity penalty, add-one smoothing above
1-grams), `gleu` (Google-BLEU: the smaller of n-gram precision and recall, 1 to 4),
`rouge_1` to `rouge_5` (n-gram F1), `rouge_l` (longest common subsequence F1) and
`meteor` (METEOR's exact-match stage: unigram F-mean weighted to recall, less the
fragmentation penalty; no stemming or WordNet synonyms, which trainkit does not ship, so
"runs" and "running" do not match as they would in full METEOR). Scores can differ from
OpenAI's. `cosine` needs an embedding model and is refused; so are the graders that call
a model (`score_model`, `label_model`).

A `python` grader is code the caller sends (``def grade(sample, item) -> float``). It runs
only inside a training job, in a process of its own with the run's time limit per call
(`rewards.process`), and only where the server allows it (`TRAINKIT_ALLOW_PYTHON_GRADERS`,
checked when the run is submitted); never in the API server, so `graders/run` refuses it.
`sample` is ``{"output_text": ..., "output_json": ... or None}`` as OpenAI passes it.
"""

from __future__ import annotations

import ast
import difflib
import json
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

from trainkit_core.errors import UsageError

STRING_OPERATIONS = ("eq", "ne", "like", "ilike")
SIMILARITY_METRICS = (
    "fuzzy_match",
    "bleu",
    "gleu",
    "meteor",
    "rouge_1",
    "rouge_2",
    "rouge_3",
    "rouge_4",
    "rouge_5",
    "rouge_l",
)
REFUSED_METRICS = {"cosine": "it needs an embedding model, which trainkit does not call"}
#: The largest python grader's source.
MAX_SOURCE = 256 * 1024
REFUSED_TYPES = {
    "score_model": "it asks a grading model, which trainkit does not call",
    "label_model": "it asks a grading model, which trainkit does not call",
}
_TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_TOKEN = re.compile(r"\w+|[^\w\s]")


class GraderError(UsageError):
    """A grader definition trainkit cannot run; `param` is the path of the field at fault."""

    def __init__(self, message: str, param: str, *, hint: str | None = None) -> None:
        super().__init__(f"{param}: {message}", hint=hint)
        self.param = param


# ----------------------------------------------------------------------------- checking


def _text(definition: Mapping[str, Any], key: str, where: str) -> str:
    value = definition.get(key)
    if not isinstance(value, str) or not value:
        raise GraderError(f"{key} must be a non-empty string", f"{where}.{key}")
    for match in _TEMPLATE.finditer(value):
        path = match.group(1).split(".")
        if path[0] == "item" and len(path) > 1 and all(path[1:]):
            continue
        if path[:2] == ["sample", "output_text"] and len(path) == 2:
            continue
        if path[:2] == ["sample", "output_json"] and all(path[2:]):
            continue
        raise GraderError(
            f"template {match.group(0)!r} names neither sample.output_text, sample.output_json.<field> "
            "nor item.<field>",
            f"{where}.{key}",
        )
    return value


def check(definition: Any, where: str = "grader") -> dict[str, Any]:
    """The grader `definition`, checked; `GraderError` naming the field (`where` is its path so far)."""
    if not isinstance(definition, Mapping):
        raise GraderError("a grader is a JSON object", where)
    kind = definition.get("type")
    if kind in REFUSED_TYPES:
        raise GraderError(f"{kind} graders are not supported: {REFUSED_TYPES[kind]}", f"{where}.type")
    if kind == "string_check":
        _text(definition, "input", where)
        _text(definition, "reference", where)
        if definition.get("operation") not in STRING_OPERATIONS:
            raise GraderError(f"operation must be one of {', '.join(STRING_OPERATIONS)}", f"{where}.operation")
    elif kind == "text_similarity":
        _text(definition, "input", where)
        _text(definition, "reference", where)
        metric = definition.get("evaluation_metric")
        if metric in REFUSED_METRICS:
            raise GraderError(
                f"evaluation_metric {metric} is not supported: {REFUSED_METRICS[metric]}",
                f"{where}.evaluation_metric",
            )
        if metric not in SIMILARITY_METRICS:
            raise GraderError(
                f"evaluation_metric must be one of {', '.join(SIMILARITY_METRICS)}", f"{where}.evaluation_metric"
            )
    elif kind == "python":
        _python_source(definition, where)
    elif kind == "multi":
        graders = _sub_graders(definition, where)
        formula = definition.get("calculate_output")
        if not isinstance(formula, str) or not formula.strip():
            raise GraderError("calculate_output must be a formula over the graders' names", f"{where}.calculate_output")
        try:
            _compile_formula(formula, set(graders))
        except ValueError as exc:
            raise GraderError(str(exc), f"{where}.calculate_output") from None
    else:
        raise GraderError(
            f"type {str(kind)[:40]!r} is not a grader trainkit runs; supported: string_check, text_similarity, multi, "
            "python",
            f"{where}.type",
        )
    name = definition.get("name")
    if name is not None and not isinstance(name, str):
        raise GraderError("name must be a string", f"{where}.name")
    return dict(definition)


def _sub_graders(definition: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """A multi grader's graders by name: OpenAI writes them as an object of named graders (or one grader)."""
    graders = definition.get("graders")
    if isinstance(graders, Mapping) and "type" in graders:
        name = graders.get("name")
        if not isinstance(name, str) or not name:
            raise GraderError("a single sub-grader needs a name", f"{where}.graders.name")
        graders = {name: graders}
    if not isinstance(graders, Mapping) or not graders:
        raise GraderError("graders must be an object of named graders", f"{where}.graders")
    found = {}
    for name, sub in graders.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)):
            raise GraderError(f"{name!r} is not a name a formula can use", f"{where}.graders")
        if isinstance(sub, Mapping) and sub.get("type") in ("multi", "python"):
            raise GraderError(
                f"a multi grader holds no {sub.get('type')} grader (a python grader stands alone)",
                f"{where}.graders.{name}.type",
            )
        found[str(name)] = check(sub, f"{where}.graders.{name}")
    return found


def _python_source(definition: Mapping[str, Any], where: str) -> str:
    """The grader's source: it must compile and define ``grade`` at the top (nothing of it runs here)."""
    source = definition.get("source")
    if not isinstance(source, str) or not source.strip():
        raise GraderError("source must be the grader's Python code", f"{where}.source")
    if len(source.encode()) > MAX_SOURCE:
        raise GraderError(f"source is over {MAX_SOURCE // 1024} KiB", f"{where}.source")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise GraderError(f"source does not compile: line {exc.lineno}: {exc.msg}", f"{where}.source") from None
    if not any(isinstance(node, ast.FunctionDef) and node.name == "grade" for node in tree.body):
        raise GraderError("source defines no top-level grade(sample, item) function", f"{where}.source")
    return source


def python_graders(specs: list[dict[str, Any]] | None) -> list[int]:
    """The indexes of the python graders among `specs` (each is code the caller sent)."""
    return [i for i, definition in enumerate(specs or []) if definition.get("type") == "python"]


# ----------------------------------------------------------------------------- formulas

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "floor": math.floor,
    "ceil": math.ceil,
    "exp": math.exp,
    "sqrt": math.sqrt,
    "log": math.log,
}


def _compile_formula(formula: str, names: set[str]) -> Callable[[Mapping[str, float]], float]:
    """A function of the graders' scores; `ValueError` for anything but arithmetic over them.

    Read with `ast` and walked here (never `eval`): numbers, the graders' names, + - * / and
    ^ (a power, as OpenAI writes it), and min, max, abs, floor, ceil, exp, sqrt, log.
    """
    if len(formula) > 1000:
        raise ValueError("the formula is over 1000 characters")
    try:
        tree = ast.parse(formula.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise ValueError(f"{formula[:80]!r} is not a formula") from None

    def build(node: ast.AST) -> Callable[[Mapping[str, float]], float]:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            value = float(node.value)
            return lambda scores: value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"{node.id!r} is no grader of this multi grader; graders: {', '.join(sorted(names))}")
            key = node.id
            return lambda scores: scores[key]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right, apply = build(node.left), build(node.right), _BINARY[type(node.op)]
            return lambda scores: apply(left(scores), right(scores))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner, sign = build(node.operand), -1.0 if isinstance(node.op, ast.USub) else 1.0
            return lambda scores: sign * inner(scores)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            if node.keywords or not node.args:
                raise ValueError(f"{node.func.id}() takes positional arguments")
            args, function = [build(arg) for arg in node.args], _FUNCTIONS[node.func.id]
            return lambda scores: float(function(*(arg(scores) for arg in args)))
        raise ValueError(f"{ast.unparse(node)[:60]!r} is not allowed in a formula")

    return build(tree.body)


# ----------------------------------------------------------------------------- grading


def _lookup(root: Any, path: list[str]) -> Any:
    for key in path:
        if isinstance(root, Mapping) and key in root:
            root = root[key]
        elif isinstance(root, list) and key.isdigit() and int(key) < len(root):
            root = root[int(key)]
        else:
            raise KeyError(".".join(path))
    return root


def render(template: str, sample_text: str, item: Mapping[str, Any]) -> str:
    """`template` with its ``{{...}}`` filled from the completion and the dataset line.

    A field the line lacks raises `KeyError` naming it (the run fails naming the grader and
    the example, never a silent zero).
    """
    sample_json: Any = None

    def value(match: re.Match[str]) -> str:
        nonlocal sample_json
        path = match.group(1).split(".")
        if path == ["sample", "output_text"]:
            return sample_text
        if path[:2] == ["sample", "output_json"]:
            if sample_json is None:
                try:
                    sample_json = json.loads(sample_text)
                except ValueError:
                    return ""  # a completion that is not JSON has no fields: it fails the check
            try:
                found = _lookup(sample_json, path[2:])
            except KeyError:
                return ""
        else:
            try:
                found = _lookup(item, path[1:])
            except KeyError:
                raise KeyError(f"the example has no {'.'.join(path[1:])!r} field") from None
        return found if isinstance(found, str) else json.dumps(found)

    return _TEMPLATE.sub(value, template)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _ngrams(tokens: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _bleu(hypothesis: list[str], reference: list[str]) -> float:
    if not hypothesis or not reference:
        return 0.0
    logs = []
    for n in range(1, 5):
        hyp, ref = _ngrams(hypothesis, n), _ngrams(reference, n)
        matches, total = sum((hyp & ref).values()), max(1, sum(hyp.values()))
        if n > 1:
            matches, total = matches + 1, total + 1
        if matches == 0:
            return 0.0
        logs.append(math.log(matches / total))
    brevity = 1.0 if len(hypothesis) > len(reference) else math.exp(1 - len(reference) / len(hypothesis))
    return brevity * math.exp(sum(logs) / 4)


def _gleu(hypothesis: list[str], reference: list[str]) -> float:
    hyp = sum((_ngrams(hypothesis, n) for n in range(1, 5)), Counter())
    ref = sum((_ngrams(reference, n) for n in range(1, 5)), Counter())
    if not hyp or not ref:
        return 0.0
    matches = sum((hyp & ref).values())
    return min(matches / sum(hyp.values()), matches / sum(ref.values()))


def _f1(matches: int, found: int, wanted: int) -> float:
    if not matches:
        return 0.0
    precision, recall = matches / found, matches / wanted
    return 2 * precision * recall / (precision + recall)


def _rouge_n(hypothesis: list[str], reference: list[str], n: int) -> float:
    hyp, ref = _ngrams(hypothesis, n), _ngrams(reference, n)
    return _f1(sum((hyp & ref).values()), sum(hyp.values()), sum(ref.values()))


def _rouge_l(hypothesis: list[str], reference: list[str]) -> float:
    previous = [0] * (len(reference) + 1)
    for word in hypothesis:
        row = [0]
        for j, other in enumerate(reference):
            row.append(previous[j] + 1 if word == other else max(previous[j + 1], row[j]))
        previous = row
    return _f1(previous[-1], len(hypothesis), len(reference))


def _meteor(hypothesis: list[str], reference: list[str]) -> float:
    """METEOR with exact matches only: each word matched to the first unused equal word of the reference."""
    used: set[int] = set()
    alignment: list[int] = []
    for word in hypothesis:
        found = next((j for j, other in enumerate(reference) if other == word and j not in used), None)
        if found is not None:
            used.add(found)
            alignment.append(found)
    matches = len(alignment)
    if not matches:
        return 0.0
    precision, recall = matches / len(hypothesis), matches / len(reference)
    f_mean = 10 * precision * recall / (recall + 9 * precision)
    chunks = 1 + sum(1 for a, b in pairwise(alignment) if b != a + 1)
    return f_mean * (1 - 0.5 * (chunks / matches) ** 3)


def similarity(metric: str, text: str, reference: str) -> float:
    """`metric` of `text` against `reference`, between 0 and 1."""
    if metric == "fuzzy_match":
        return difflib.SequenceMatcher(None, text, reference, autojunk=False).ratio()
    hypothesis, wanted = _tokens(text), _tokens(reference)
    if metric == "bleu":
        return _bleu(hypothesis, wanted)
    if metric == "gleu":
        return _gleu(hypothesis, wanted)
    if metric == "rouge_l":
        return _rouge_l(hypothesis, wanted)
    if metric == "meteor":
        return _meteor(hypothesis, wanted)
    return _rouge_n(hypothesis, wanted, int(metric.removeprefix("rouge_")))


def scores(definition: Mapping[str, Any], sample_text: str, item: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
    """(the grader's score, each sub-grader's score by name) of `sample_text` for dataset line `item`."""
    kind = definition["type"]
    if kind == "string_check":
        given, reference = (
            render(definition["input"], sample_text, item),
            render(definition["reference"], sample_text, item),
        )
        operation = definition["operation"]
        if operation == "eq":
            return float(given == reference), {}
        if operation == "ne":
            return float(given != reference), {}
        if operation == "like":
            return float(reference in given), {}
        return float(reference.lower() in given.lower()), {}
    if kind == "text_similarity":
        given, reference = (
            render(definition["input"], sample_text, item),
            render(definition["reference"], sample_text, item),
        )
        return similarity(definition["evaluation_metric"], given, reference), {}
    if kind == "python":
        raise UsageError("a python grader runs only inside a training job, never in the API server")
    graders = _sub_graders(definition, "grader")
    subs = {name: scores(sub, sample_text, item)[0] for name, sub in graders.items()}
    try:
        total = _compile_formula(definition["calculate_output"], set(graders))(subs)
    except (ArithmeticError, ValueError) as exc:  # 1/0, sqrt(-1), log(0): the formula's own failure
        raise ArithmeticError(f"calculate_output failed: {exc}") from None
    return float(total), subs


def grader_for(definition: Mapping[str, Any]) -> Callable[[str, Mapping[str, Any]], float]:
    """A trainkit grader (``grade(completion, example)``) of the OpenAI grader `definition`."""
    checked = check(definition)

    def grade(completion: str, example: Mapping[str, Any]) -> float:
        return scores(checked, completion, example)[0]

    return grade


def grader_names(specs: list[dict[str, Any]]) -> list[str]:
    """The names the run's OpenAI graders report under: their own, made unique, else ``grader_<i>``."""
    names: list[str] = []
    for index, definition in enumerate(specs):
        base = re.sub(r"[^A-Za-z0-9_]+", "_", str(definition.get("name") or "")).strip("_") or f"grader_{index + 1}"
        name, count = base, 2
        while name in names:
            name, count = f"{base}_{count}", count + 1
        names.append(name)
    return names
