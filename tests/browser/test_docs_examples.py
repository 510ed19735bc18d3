"""The examples of the user docs run against a real server, as a reader would paste them.

Every ```sh block of docs/quickstart.md and docs/api.md that calls curl, every ```python block
(one interpreter per page, in page order, with the official openai SDK) and the quick start's
Node example (npm openai) run against SmolLM2 on a free port instead of 30000. curl runs with
--fail-with-body, so an example that gets an HTTP error fails the test. docs/migration.md's
"after" launch line of each system starts a server of its own for that section's curl calls.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from server_util import SMOLLM2, Server

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
NPM = pathlib.Path(os.environ.get("RADIX_NPM", pathlib.Path.home() / ".cache/radixserve/npm"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(page, language):
    return [body for lang, body in BLOCK.findall((DOCS / page).read_text()) if lang == language]


def localize(text, server):
    return text.replace("127.0.0.1:30000", f"127.0.0.1:{server.port}")


@pytest.fixture(scope="module")
def server():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    srv = Server(SMOLLM2, "--enable-metrics", "--enable-cache-report")
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("page", ["quickstart.md", "api.md"])
def test_curl_examples(server, page):
    examples = [b for b in blocks(page, "sh") if "curl " in b]
    assert examples, page
    for example in examples:
        script = localize(example, server).replace("curl ", "curl -sS --fail-with-body ")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script + "\nwait\n"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{example}\n{done.stdout}\n{done.stderr}"
    server.assert_no_leak()


@pytest.mark.parametrize("page", ["quickstart.md", "api.md"])
def test_python_examples(server, page):
    code = "\n".join(localize(b, server) for b in blocks(page, "python"))
    assert code, page
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    server.assert_no_leak()


def test_node_example(server, tmp_path):
    if shutil.which("node") is None or not (NPM / "node_modules/openai").exists():
        message = f"node and the npm openai package in {NPM} are needed (scripts/setup)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    (example,) = blocks("quickstart.md", "js")
    # ES module resolution looks for node_modules beside the script.
    script = NPM / f"quickstart_example_{os.getpid()}.mjs"
    script.write_text(localize(example, server))
    try:
        done = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=600)
    finally:
        script.unlink()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def migration_sections():
    """docs/migration.md's "## From X" sections: (name, the "# after" launch line's arguments,
    the section's curl examples)."""
    text = (DOCS / "migration.md").read_text()
    sections = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        name = part.splitlines()[0]
        if not name.startswith("From "):
            continue
        launch, clients = None, []
        for lang, body in BLOCK.findall(part):
            if lang != "sh":
                continue
            if "# after" in body:
                line = body.split("# after", 1)[1].replace("\\\n", " ")
                launch = shlex.split(line)
            elif "curl " in body:
                clients.append(body)
        sections.append((name, launch, clients))
    return sections


@pytest.mark.parametrize("name,launch,clients", migration_sections(),
                         ids=[s[0] for s in migration_sections()])
def test_migration_launch_lines_serve_their_clients(name, launch, clients):
    """Each system's "after" launch line, as docs/migration.md gives it (the model swapped for
    SmolLM2, on loopback and a free port), starts and answers that system's client calls."""
    assert launch and launch[0] == "radixserve", name
    assert clients, f"{name}: no client call"
    port = "30000"
    args = []
    words = iter(launch[1:])
    for word in words:
        if word in ("--model-path", "--model_dir", "--host"):
            next(words)
        elif word == "--port":
            port = next(words)
        else:
            args.append(word)
    srv = Server(SMOLLM2, *args)
    try:
        for example in clients:
            script = example.replace(f"127.0.0.1:{port}", f"127.0.0.1:{srv.port}")
            script = script.replace("curl ", "curl -sS --fail-with-body ")
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", script],
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{example}\n{done.stdout}\n{done.stderr}"
            assert done.stdout.strip(), example
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()
