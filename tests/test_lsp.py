"""`jaxlint server`, driven over the Language Server Protocol as an editor drives it: JSON-RPC
messages on the server's standard input and output."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from test_cli import CHAIN, CHAIN_FIXED_LINE, CLEAN, LOOP
from test_projects import CASES, PROJECTS as PROJECTS_DIR, _expected, _files


pytest.importorskip("pygls")
pytestmark = pytest.mark.xdist_group("lsp")  # one server for the module, on one worker

TIMEOUT = 60


class Client:
    """A minimal LSP client: requests wait for their response; notifications from the
    server are queued."""

    def __init__(self, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jaxlint", "server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                header = stream.readline()
                if not header:
                    return
                if header.strip() == b"":
                    break
                name, _, value = header.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None
            self.messages.put(json.loads(stream.read(length)))

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: dict[str, Any] | None) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        message = self.wait(lambda m: m.get("id") == self.next_id and "method" not in m)
        assert "error" not in message, message
        return message["result"]

    def wait(self, match) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        while True:
            try:
                message = self.messages.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError("the server did not answer") from None
            if match(message):
                return message

    def diagnostics(self, uri: str) -> list[dict[str, Any]]:
        message = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)
        return message["params"]["diagnostics"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One server for the module (starting one costs seconds); each test opens its own file."""
    root = tmp_path_factory.mktemp("workspace")
    client = Client(root)
    result = client.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}})
    assert result["serverInfo"]["name"] == "jaxlint"
    client.notify("initialized", {})
    yield client
    client.request("shutdown", None)
    client.notify("exit", None)
    assert client.process.wait(timeout=TIMEOUT) == 0
    for stream in (client.process.stdin, client.process.stdout, client.process.stderr):
        stream.close()  # type: ignore[union-attr]


def open_document(client: Client, path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
    )
    return uri


def apply(text: str, edits: list[dict[str, Any]]) -> str:
    """Apply LSP text edits (ASCII text: UTF-16 offsets are characters)."""
    lines = text.splitlines(keepends=True)

    def offset(position: dict[str, int]) -> int:
        return sum(len(line) for line in lines[: position["line"]]) + position["character"]

    for edit in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        start, end = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        text = text[:start] + edit["newText"] + text[end:]
    return text


def test_diagnostics_on_open(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", CHAIN)
    (diagnostic,) = client.diagnostics(uri)
    assert diagnostic["code"] == "JL003" and diagnostic["source"] == "jaxlint"
    assert diagnostic["range"]["start"] == {"line": 4, "character": 12}
    assert diagnostic["severity"] == 2  # warning


def test_a_code_action_applies_a_fix(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", CHAIN)
    (diagnostic,) = client.diagnostics(uri)
    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]}},
    )
    titles = [a["title"] for a in actions]
    fix = next(a for a in actions if a["kind"] == "quickfix" and a.get("isPreferred"))
    assert fix["title"] == "jaxlint: Merge the 2 `tree_at` calls into one"
    fixed = apply(CHAIN, fix["edit"]["changes"][uri])
    assert CHAIN_FIXED_LINE in fixed and fixed.count("tree_at(") == 1
    noqa = next(a for a in actions if "noqa" in a["title"])
    assert apply(CHAIN, noqa["edit"]["changes"][uri]).splitlines()[4].endswith("model, enc)  # noqa: JL003")
    assert "jaxlint: fix all safely fixable findings" in titles


def test_fix_all_is_a_source_action_with_safe_fixes_only(client: Client, tmp_path: Path) -> None:
    text = LOOP + "\n\n" + CHAIN.split("\n", 3)[3]
    uri = open_document(client, tmp_path / "model.py", text)
    assert len(client.diagnostics(uri)) == 2
    actions = client.request(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "context": {"diagnostics": [], "only": ["source.fixAll"]},
        },
    )
    (action,) = actions
    assert action["kind"] == "source.fixAll.jaxlint"
    fixed = apply(text, action["edit"]["changes"][uri])
    assert CHAIN_FIXED_LINE in fixed
    assert "for name, layer in plan.items():\n        model = eqx.tree_at(" in fixed  # unsafe: left


def test_an_unsafe_fix_is_offered_as_such(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", LOOP)
    (diagnostic,) = client.diagnostics(uri)
    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]}},
    )
    (fix,) = [a for a in actions if a["title"].endswith("(unsafe)")]
    assert "tree_at_batched" in apply(LOOP, fix["edit"]["changes"][uri])
    assert not fix.get("isPreferred")


def test_hover_shows_the_rule_doc(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", CHAIN)
    client.diagnostics(uri)
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 20}})
    assert hover["contents"]["kind"] == "markdown"
    assert hover["contents"]["value"].startswith("# tree-at-batch (JL003)")
    assert "## What it does" in hover["contents"]["value"]
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}) is None


def test_changes_are_linted_after_a_pause_and_save_lints_at_once(client: Client, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "model.py", CHAIN)
    assert len(client.diagnostics(uri)) == 1
    for version, text in enumerate([LOOP, CLEAN], start=2):  # typing: only the last text counts
        client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )
    message = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)
    assert message["params"] == {"uri": uri, "version": 3, "diagnostics": []}
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 4}, "contentChanges": [{"text": LOOP}]},
    )
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert [d["code"] for d in client.diagnostics(uri)] == ["JL003"]


def test_the_nearest_configuration_applies(client: Client, tmp_path: Path) -> None:
    (tmp_path / "quiet").mkdir()
    (tmp_path / "quiet" / "pyproject.toml").write_text('[tool.jaxlint]\nignore = ["tree-at-batch"]\n', encoding="utf-8")
    assert client.diagnostics(open_document(client, tmp_path / "quiet" / "model.py", CHAIN)) == []
    assert len(client.diagnostics(open_document(client, tmp_path / "model.py", CHAIN))) == 1


def test_server_without_pygls_is_a_one_line_error(tmp_path: Path) -> None:
    script = "import sys; sys.modules['pygls'] = None; from jaxlint._cli import main; main(['server'])"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2
    assert done.stderr.startswith("jaxlint: error: jaxlint server needs pygls")
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_other_modules_of_the_project_count(client: Client, tmp_path: Path) -> None:
    """As `jaxlint check` does for a run: a step jitted in another module returns
    device values, so the per-step float() in the loop waits for the device (JL005)."""
    import shutil

    project = Path(__file__).resolve().parents[1] / "fixtures" / "_projects" / "jitted_elsewhere"
    shutil.copytree(project, tmp_path / "project")
    (tmp_path / "project" / "pyproject.toml").write_text("[tool.jaxlint]\n", encoding="utf-8")
    loop = tmp_path / "project" / "trainer" / "loop.py"
    diagnostics = client.diagnostics(open_document(client, loop, loop.read_text(encoding="utf-8")))
    assert [(d["code"], d["range"]["start"]["line"]) for d in diagnostics] == [("JL005", 9)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_open_document_sees_the_rest_of_the_project(client: Client, tmp_path: Path, case: Path) -> None:
    """Each file of a fixture project opened in the editor is linted knowing what the other
    modules define: together the findings `jaxlint check` reports on the folder."""
    import shutil

    shutil.copytree(case, tmp_path / "project")
    config = tmp_path / "project" / "pyproject.toml"
    if not config.exists():
        config.write_text("[tool.jaxlint]\n", encoding="utf-8")
    found = set()
    for name in _files(case):
        path = tmp_path / "project" / name
        for d in client.diagnostics(open_document(client, path, path.read_text(encoding="utf-8"))):
            found.add((name, d["range"]["start"]["line"] + 1, d["data"]["rule"]))
    assert found == _expected(case)


def test_unsaved_edits_of_another_module_count_until_it_is_closed(client: Client, tmp_path: Path) -> None:
    """What an open module defines is what its editor buffer holds: with the jit taken off the
    step (not saved), the loop's float() is no longer a host copy of device values; closed
    without saving, the step on disk counts again."""
    import shutil

    shutil.copytree(PROJECTS_DIR / "jitted_elsewhere", tmp_path / "project")
    (tmp_path / "project" / "pyproject.toml").write_text("[tool.jaxlint]\n", encoding="utf-8")
    loop, steps = (tmp_path / "project" / "trainer" / name for name in ("loop.py", "steps.py"))
    loop_uri = open_document(client, loop, loop.read_text(encoding="utf-8"))
    assert [d["code"] for d in client.diagnostics(loop_uri)] == ["JL005"]
    text = steps.read_text(encoding="utf-8")
    steps_uri = open_document(client, steps, text)
    client.diagnostics(steps_uri)
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": steps_uri, "version": 2}, "contentChanges": [{"text": text.replace("@jax.jit\n", "")}]},
    )
    client.diagnostics(steps_uri)
    client.notify("textDocument/didSave", {"textDocument": {"uri": loop_uri}})
    assert client.diagnostics(loop_uri) == []
    client.notify("textDocument/didClose", {"textDocument": {"uri": steps_uri}})
    client.diagnostics(steps_uri)
    client.notify("textDocument/didSave", {"textDocument": {"uri": loop_uri}})
    assert [d["code"] for d in client.diagnostics(loop_uri)] == ["JL005"]
