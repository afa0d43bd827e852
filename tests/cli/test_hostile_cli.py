"""The CLI under hostile and careless input: exit 1 or 2 with a message, never a traceback.

Specific classes first (deep JSON, settings naming a file, unknown model sizes, the
dataset naming rule, unknown keys under --strict, a blank API token), then a property
test that drives every command with generated bad arguments, files and settings.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainkit_core.datasets.strict_json import MAX_DEPTH
from trainkit_core.ids import NAME_PATTERN
from trainkit_core.models.presets import PRESETS

GOOD = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}


@pytest.fixture(autouse=True)
def datasets_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty datasets folder: no command here may find (and train on) a real dataset."""
    folder = tmp_path / "datasets"
    folder.mkdir()
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(folder))
    monkeypatch.delenv("TRAINKIT_API_TOKEN", raising=False)
    return folder


def make_dataset(folder: Path, name: str, lines: list[object], fmt: str = "chat") -> Path:
    path = folder / name
    path.mkdir(parents=True)
    (path / "dataset.toml").write_text(f'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n')
    (path / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def ok(code: int, output: str) -> None:
    assert "Traceback" not in output, output
    assert code in (1, 2), f"exit {code}: {output}"


# ---------------------------------------------------------------- deeply nested JSON


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5_000, 200_000])
def test_deep_json_to_infer_messages_is_exit_2(tmp_path: Path, levels: int) -> None:
    file = tmp_path / "deep.json"
    file.write_text("[" * levels + "]" * levels)
    code, output = run_main("infer", "--model-size", "tiny", "--messages", str(file))
    ok(code, output)
    assert code == 2 and "nested too deeply" in output and str(file) in output


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5_000, 200_000])
def test_deep_json_to_eval_add_is_exit_2(tmp_path: Path, levels: int) -> None:
    file = tmp_path / "deep.jsonl"
    file.write_text(json.dumps(GOOD) + "\n" + '{"messages": ' + "[" * levels + "]" * levels + "}\n")
    code, output = run_main("eval", "add", "--name", "set1", str(file))
    ok(code, output)
    assert code == 2 and "nested too deeply" in output and f"{file}:2" in output
    assert run_main("eval", "sets", "--json")[1].count('"name"') == 0  # nothing stored


@pytest.mark.parametrize("content", ['[{"role": "user", "content": NaN}]', '{"messages": [], "messages": []}'])
def test_non_rfc_json_to_infer_messages_is_exit_2(tmp_path: Path, content: str) -> None:
    file = tmp_path / "m.json"
    file.write_text(content)
    code, output = run_main("infer", "--model-size", "tiny", "--messages", str(file))
    ok(code, output)
    assert code == 2 and "not valid JSON" in output


# ------------------------------------------------------- settings that name a file


@pytest.mark.parametrize("command", [["models"], ["runs", "list"], ["eval", "sets"], ["ping", "--timeout", "5"]])
def test_a_home_that_is_a_file_is_exit_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    file = tmp_path / "not-a-folder"
    file.write_text("x")
    for home in (file, file / "below"):
        monkeypatch.setenv("TRAINKIT_HOME", str(home))
        code, output = run_main(*command)
        ok(code, output)
        assert code == 2 and "TRAINKIT_HOME" in output and "names a file" in output


@pytest.mark.parametrize("command", [["datasets"], ["sync", "demo"], ["validate", "demo", "--local"]])
def test_a_datasets_dir_that_is_a_file_is_exit_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    file = tmp_path / "datasets-file"
    file.write_text("x")
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(file))
    code, output = run_main(*command)
    ok(code, output)
    assert code == 2 and "TRAINKIT_DATASETS_DIR" in output


@pytest.mark.parametrize(
    ("variable", "kind", "command"),
    [
        ("TRAINKIT_VOL_MODELS", "models", ["models"]),
        ("TRAINKIT_VOL_EVAL", "eval", ["eval", "sets"]),
        ("TRAINKIT_VOL_DATA", "data", ["validate", "demo"]),
    ],
)
def test_a_volume_that_is_a_file_is_exit_2_naming_its_setting(
    trainkit_home: Path, monkeypatch: pytest.MonkeyPatch, variable: str, kind: str, command: list[str]
) -> None:
    (trainkit_home / "volumes").mkdir(exist_ok=True)
    (trainkit_home / "volumes" / "blocked").write_text("a file where a volume should be")
    monkeypatch.setenv(variable, "blocked")
    code, output = run_main(*command)
    ok(code, output)
    assert code == 2 and variable in output


# ----------------------------------------------------------------- model sizes


@pytest.mark.parametrize("size", ["/etc/passwd", "4B", "tiny; rm -rf ~", "$(id)", "", "x" * 500])
def test_infer_with_an_unknown_model_size_is_exit_2_listing_the_sizes(size: str) -> None:
    code, output = run_main("infer", "--model-size", size, "--prompt", "hi")
    ok(code, output)
    assert code == 2 and all(known in output for known in PRESETS)
    hints = [line for line in output.splitlines() if line.startswith("hint:")]
    assert all(size.strip() not in hint for hint in hints if size.strip())


# ----------------------------------------------------------- one naming rule


def test_a_mixed_case_dataset_is_refused_by_sync_validate_and_train(datasets_dir: Path) -> None:
    folder = datasets_dir / "Up.Case"
    folder.mkdir()
    (folder / "dataset.toml").write_text('name = "Up.Case"\ntrain = ["train.jsonl"]\n')
    (folder / "train.jsonl").write_text(json.dumps(GOOD) + "\n")
    for command in (["sync", "Up.Case"], ["validate", "Up.Case"], ["validate", "Up.Case", "--local"]):
        code, output = run_main(*command)
        ok(code, output)
        assert code == 2 and "lower-case" in output, (command, output)
    code, output = run_main("train", "--dataset", "Up.Case", "--steps", "1")
    ok(code, output)
    assert code == 2 and "lower-case" in output
    code, output = run_main("sync", str(folder))  # as a path: the folder's name is the dataset's
    ok(code, output)
    assert code == 2 and "lower-case" in output


def test_name_may_be_a_path_to_a_dataset_folder(tmp_path: Path) -> None:
    folder = make_dataset(tmp_path / "elsewhere", "pathy", [GOOD])
    code, output = run_main("sync", str(folder), "--json")
    assert code == 0, output
    assert json.loads(output)["name"] == "pathy"
    code, output = run_main("validate", "pathy", "--json")  # on the volume, by name
    assert code == 0 and json.loads(output)["ok"]
    code, output = run_main("validate", str(folder))  # the volume is read by name only
    ok(code, output)
    assert code == 2 and "dataset name" in output


# ------------------------------------------------------------- unknown keys


def test_unknown_keys_warn_by_default_and_fail_under_strict(datasets_dir: Path) -> None:
    extra = {
        "id": 7,
        "messages": [{"role": "user", "content": "q", "name": "bob"}, {"role": "assistant", "content": "a"}],
    }
    make_dataset(datasets_dir, "extra", [GOOD, extra])
    code, output = run_main("validate", "extra", "--local")
    assert code == 0, output
    assert "train.jsonl:2: warning [unknown-key] unknown key 'id'" in output
    assert "train.jsonl:2: warning [unknown-key] unknown key 'messages[0].name'" in output
    code, output = run_main("validate", "extra", "--local", "--strict")
    ok(code, output)
    assert code == 2 and "unknown-key" in output
    code, output = run_main("sync", "extra", "--strict")
    ok(code, output)
    assert code == 2 and "unknown key" in output
    assert "never synced" in run_main("validate", "extra")[1]  # a strict refusal wrote nothing
    code, output = run_main("sync", "extra")
    assert code == 0 and "warning" in output and "unknown-key" in output


def test_unknown_keys_of_prompt_completion(datasets_dir: Path) -> None:
    make_dataset(datasets_dir, "pc", [{"prompt": "p", "completion": "c", "label": 1}], fmt="prompt_completion")
    code, output = run_main("validate", "pc", "--local", "--strict", "--json")
    report = json.loads(output)
    assert code == 2 and not report["ok"]
    (problem,) = report["problems"]
    assert (problem["file"], problem["line"], problem["code"], problem["severity"]) == (
        "train.jsonl",
        1,
        "unknown-key",
        "warning",
    )


# ---------------------------------------------------------------- serve's token


@pytest.mark.parametrize("token", [" ", "\t\t", " \n "])
def test_serve_refuses_a_blank_token(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    monkeypatch.setenv("TRAINKIT_API_TOKEN", token)
    code, output = run_main("serve", "--host", "0.0.0.0", "--port", "1")
    ok(code, output)
    assert code == 2 and "TRAINKIT_API_TOKEN" in output and "whitespace" in output


# ------------------------------------------------------ every command, generated


def bad_name() -> st.SearchStrategy[str]:
    """Text that is not a dataset or set name (and, as a NAME, not a path to one)."""
    text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=80)
    plain = text.filter(lambda s: not NAME_PATTERN.match(s) and "/" not in s and not s.startswith(("~", ".")))
    paths = st.sampled_from(["x/Up.Case", "./a b", "../A", "~/-x", "/etc/passwd", "/"])
    return st.one_of(plain, paths, st.sampled_from(["Up.Case", "a" * 65, "é", "-x", "_x", "a.b", " a", "a\n"]))


def bad_text() -> st.SearchStrategy[str]:
    return st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=60)


BAD_RUN_IDS = bad_text().filter(lambda s: not s.startswith("run-") or len(s) != 26)
BAD_MODEL_PATHS = st.one_of(
    bad_text().filter(lambda s: not s.startswith("trained/run-")),
    st.sampled_from(["trained/../../etc", "trained/run-1", "/etc/passwd", "trained/", "trained/run-x/checkpoints/-1"]),
)
BAD_SIZES = bad_text().filter(lambda s: s not in PRESETS)
BAD_INTS = st.one_of(st.integers(max_value=0), st.sampled_from(["x", "1.5", "1e3", "", "²", "0x10"]))
BAD_FILE_BYTES = st.one_of(
    st.binary(max_size=200),
    bad_text().map(str.encode),
    st.integers(MAX_DEPTH + 1, 3000).map(lambda n: b'{"messages": ' + b"[" * n + b"]" * n + b"}"),
    st.sampled_from([b"NaN", b'{"messages": NaN}', b"\xef\xbb\xbf{}", b'{"a": 1, "a": 2}', b'"\\ud800"', b"1e999"]),
)
#: Settings that fail when read, for every command that reads them.
BAD_ENV = st.sampled_from(
    [
        {"TRAINKIT_VOL_DATA": "../x"},
        {"TRAINKIT_VOL_MODELS": "a b"},
        {"TRAINKIT_TRAIN_TIMEOUT_S": "-5"},
        {"TRAINKIT_INFER_IDLE_TIMEOUT_S": "soon"},
        {"TRAINKIT_API_TOKEN": "   "},
        {"TRAINKIT_API_MAX_BODY_BYTES": "12"},
        {"TRAINKIT_APP_NAME": "-bad"},
    ]
)
#: Every command that reads the settings (all but `providers`, `--help` and `--version`).
SETTINGS_COMMANDS = [
    ["datasets"],
    ["sync", "demo"],
    ["validate", "demo"],
    ["train", "--dataset", "demo"],
    ["sweep", "--dataset", "demo", "--grid", "lr=1e-4"],
    ["demo"],
    ["infer", "--model-size", "tiny", "--prompt", "hi"],
    ["models"],
    ["ping"],
    ["runs", "list"],
    ["eval", "sets"],
    ["eval", "show", "ev-20260101-000000-abcdef"],
    ["app", "status"],
    ["serve"],
]


def invocations(file: str) -> st.SearchStrategy[tuple[list[str], dict[str, str], bytes | None]]:
    """(arguments, environment, bytes for FILE) of one bad invocation of some command."""
    none: dict[str, str] = {}

    def args(*parts: st.SearchStrategy[list[str]]) -> st.SearchStrategy[tuple[list[str], dict[str, str], None]]:
        return st.tuples(*parts).map(lambda groups: ([a for g in groups for a in g], none, None))

    def fixed(*words: str) -> st.SearchStrategy[list[str]]:
        return st.just(list(words))

    def one(option: str, values: st.SearchStrategy[object]) -> st.SearchStrategy[list[str]]:
        return values.map(lambda v: [option, str(v)])

    with_file = st.tuples(
        st.sampled_from(
            [
                ["eval", "add", "--name", "set1", file],
                ["infer", "--model-size", "no-such-size", "--messages", file],
                ["eval", "add", "--replace", "--name", "set1", file],
            ]
        ),
        BAD_FILE_BYTES,
    ).map(lambda t: (t[0], none, t[1]))
    with_env = st.tuples(st.sampled_from(SETTINGS_COMMANDS), BAD_ENV).map(lambda t: (t[0], t[1], None))
    bad_args = st.one_of(
        args(fixed("validate"), bad_name().map(lambda n: [n])),
        args(fixed("validate", "--local"), bad_name().map(lambda n: [n])),
        args(fixed("validate", "demo"), one("--max-tokens", BAD_INTS)),
        args(fixed("sync"), bad_name().map(lambda n: [n])),
        args(fixed("sync", "demo"), one("--model-size", BAD_SIZES)),
        args(fixed("train"), one("--dataset", bad_name())),
        args(fixed("train", "--dataset", "demo"), one("--steps", BAD_INTS)),
        args(fixed("train", "--dataset", "demo"), one("--model-size", BAD_SIZES)),
        args(fixed("train", "--dataset", "demo"), one("--lr", st.sampled_from(["nan", "-1", "inf", "0", "x"]))),
        args(fixed("train", "--dataset", "demo"), one("--base-model", bad_text().filter(lambda s: "/" not in s))),
        args(fixed("sweep", "--dataset", "demo"), one("--grid", bad_text().filter(lambda s: "=" not in s))),
        args(fixed("demo"), one("--steps", BAD_INTS)),
        args(fixed("demo"), one("--dataset", bad_name())),
        args(fixed("infer", "--prompt", "hi"), one("--model-path", BAD_MODEL_PATHS)),
        args(fixed("infer", "--prompt", "hi"), one("--model-size", BAD_SIZES)),
        args(fixed("infer", "--model-size", "tiny"), one("--temperature", st.sampled_from(["-1", "9", "nan", "x"]))),
        args(fixed("eval", "run"), one("--model-path", BAD_MODEL_PATHS)),
        args(fixed("eval", "show"), bad_text().map(lambda s: ["--", s])),
        args(fixed("eval", "add", "--name"), bad_name().map(lambda n: [n, "/dev/null"])),
        *(
            args(fixed("runs", sub), BAD_RUN_IDS.map(lambda s: ["--", s]))
            for sub in ("show", "stop", "cancel", "resume", "wait", "logs", "plot")
        ),
        args(fixed("runs", "list"), one("--limit", BAD_INTS)),
        args(fixed("runs", "list"), one("--status", bad_text())),
        args(fixed("serve"), one("--port", st.sampled_from(["-1", "65536", "x", "80.5"]))),
        args(fixed("serve"), one("--host", st.sampled_from(["0.0.0.0", "::", "example.com", "10.0.0.1", ""]))),
        args(
            fixed("serve"),
            one("--log-level", bad_text().filter(lambda s: s not in ("debug", "info", "warning", "error"))),
        ),
        args(fixed("ping"), one("--timeout", st.sampled_from(["x", ""]))),
        args(
            st.sampled_from([["models"], ["providers"], ["datasets"], ["app", "status"], ["eval", "sets"]]),
            st.sampled_from(["--no-such-option", "-Z", "extra-argument"]).map(lambda o: [o]),
        ),
    )
    return st.one_of(bad_args, with_file, with_env)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-files")


@pytest.mark.slow
@settings(
    max_examples=120,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples on every run: CI never fails by chance
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_every_command_refuses_bad_input_without_a_traceback(
    data: st.DataObject, scratch: Path, trainkit_home: Path
) -> None:
    file = scratch / "input.jsonl"
    argv, env, content = data.draw(invocations(str(file)))
    if content is not None:
        file.write_bytes(content)
    code, output = run_main(*argv, env=env)
    assert "Traceback" not in output, (argv, env, output)
    assert code in (1, 2), (argv, env, code, output)
    shutil.rmtree(trainkit_home / "volumes" / "trainkit-eval" / "sets", ignore_errors=True)


@pytest.mark.parametrize("url", ["https://example.com/cat.png", "HTTP://127.0.0.1:9/cat.png"])
def test_infer_refuses_a_remote_image_with_the_datasets_wording(url: str) -> None:
    from trainkit_core.datasets.images import url_problem

    code, output = run_main("infer", "--model-size", "tiny", "--prompt", "hi", "--image", url)
    assert code == 2, output
    _, dataset_message = url_problem(url) or ("", "")
    assert dataset_message.startswith(f"remote image {url!r} is not fetched")  # the datasets' wording ...
    assert f"--image: remote image {url!r} is not fetched by trainkit infer" in output  # ... for infer
    assert "Traceback" not in output and "No such file" not in output
