"""No server argument marked as taking effect is silently ignored.

The guard: every argument whose row in docs/server_args.md (generated from the argument table,
kept fresh by the server_args_doc_fresh unit test) says "yes" or "partial" is read by name
somewhere in src/ outside the table files. An argument nobody reads must say "no" (it then logs
one warning when set). Plus the LightLLM arguments this round made real, checked against the
same server without them."""
import pathlib
import re

import requests

from server_util import REPO, STORIES, Server


def supported_arguments():
    rows = [line for line in (REPO / "docs/server_args.md").read_text().splitlines()
            if line.startswith("| `--")]
    assert len(rows) > 400, len(rows)
    out = []
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        name = re.findall(r"`--([^`]+)`", cells[0])[0]
        if cells[-1].split(":")[0].strip() in ("yes", "partial"):
            out.append(name)
    return out


def value_checked_arguments():
    """Partial arguments with cpu_values: the values that apply on cpu are their defaults, any
    other value is warned about by name at startup (src/args/validate.cpp)."""
    names = set()
    for table in (REPO / "src/args").glob("arg_table*.cpp"):
        for entry in re.split(r"\{\.name = ", table.read_text())[1:]:
            body = entry.split("\n      {", 1)[0]
            if ".cpu_values" in body:
                names.add(re.match(r'"([^"]+)"', entry).group(1))
    assert names, "no argument with cpu_values found: the table format changed"
    return names


def test_every_supported_argument_is_read_outside_the_table():
    sources = [p for p in (REPO / "src").rglob("*") if p.suffix in (".cpp", ".h")
               and not p.name.startswith("arg_table")]
    text = "\n".join(p.read_text() for p in sources)
    checked = value_checked_arguments()
    unread = [name for name in supported_arguments() if name not in checked
              and f'"{name}"' not in text and f'"{name.replace("-", "_")}"' not in text]
    assert not unread, f"marked supported but never read: {unread}"


def generate(srv, prompt, max_new_tokens):
    r = requests.post(srv.url + "/generate", json={
        "text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens}},
        timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_eos_id_replaces_the_models_end_of_sequence_ids():
    prompt = "Once upon a time"
    plain = Server(STORIES)
    try:
        ref = generate(plain, prompt, 12)
    finally:
        assert plain.stop() == 0
    ids = ref["output_ids"]
    stop_at = next(i for i in range(2, len(ids)) if ids[i] not in ids[:i])
    srv = Server(STORIES, "--eos_id", ids[stop_at])
    try:
        out = generate(srv, prompt, 12)
    finally:
        assert srv.stop() == 0
    assert out["output_ids"][:stop_at] == ids[:stop_at]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": ids[stop_at]}


def test_disable_chunked_prefill_prefills_a_long_prompt_in_one_step():
    prompt = " ".join(["The little dog ran to the park and played with a ball."] * 12)
    logs = {}
    for flag in ([], ["--disable_chunked_prefill"]):
        srv = Server(STORIES, "--chunked-prefill-size", 32, "--disable-radix-cache", *flag)
        try:
            out = generate(srv, prompt, 2)
            logs[bool(flag)] = srv.logs()
        finally:
            assert srv.stop() == 0
        assert out["meta_info"]["prompt_tokens"] > 64
    chunks = [int(n) for n in re.findall(r"Prefill batch, #new-seq: \d+, #new-token: (\d+)",
                                          logs[False])]
    whole = [int(n) for n in re.findall(r"Prefill batch, #new-seq: \d+, #new-token: (\d+)",
                                         logs[True])]
    assert max(chunks) <= 32 and len(chunks) > 2, chunks
    assert whole and max(whole) > 64, whole
