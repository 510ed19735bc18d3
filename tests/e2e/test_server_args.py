"""Black-box tests of argument parsing, resolution and --print-config (issue 2)."""
import json
import re
import subprocess
import sys

import pytest

from e2e_util import run_radixserve

MODEL = "/models/example"


def spelling_key(spelling):
    return spelling.lstrip("-").replace("_", "-")


def print_config(binary, *args):
    proc = run_radixserve(binary, "--model-path", MODEL, "--print-config", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def seed_spellings(shared_dir):
    out = subprocess.run([sys.executable, str(shared_dir / "tools/seed_args.py"),
                          str(shared_dir / "seeds")], check=True, capture_output=True,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        seed, names = line.split("\t")
        for name in names.split("|"):
            rows.append((seed[:3], name))
    return rows


def sglang_dest_names(shared_dir):
    """SGLang's own spelling -> dest (the ServerArgs field) from seed 004's add_argument calls."""
    text = next((shared_dir / "seeds").glob("004_*.txt")).read_text()
    dest = {}
    for match in re.finditer(r'parser\.add_argument\(\s*((?:"--[^"]+",\s*)+)(.*?)\n\)', text, re.S):
        names = re.findall(r'"--([^"]+)"', match.group(1))
        # The ServerArgs field is what the default refers to; argparse's dest may differ
        # (--tensor-parallel-size is copied into tp_size).
        field_ref = re.search(r'default=ServerArgs\.(\w+)', match.group(2))
        explicit = re.search(r'dest="([^"]+)"', match.group(2))
        if field_ref:
            field = field_ref.group(1)
        elif explicit:
            field = explicit.group(1)
        else:
            field = names[0].replace("-", "_")
        for name in names:
            dest[spelling_key(name)] = field
    return dest


def index_spellings(arg_table):
    index = {}
    for entry in arg_table.values():
        index[spelling_key(entry["name"])] = entry
        for alias in entry["aliases"]:
            index[spelling_key(alias["name"])] = entry
    return index


# Values that validation rewrites or that need a companion argument; everything else is chosen
# from the table's type and choices.
OVERRIDES = {
    "device": (["cpu"], "cpu"),
    "log-level": (["debug"], "debug"),
    "nnodes": (["1"], 1),
    "sampling-backend": (["pytorch"], "pytorch"),
    "grammar-backend": (["llguidance"], "llguidance"),
    "speculative-algorithm": (["NGRAM"], "NGRAM"),
    "sp-type": (["vanilla"], "vanilla"),
    "page-size": (["16"], 16),
    "tool-call-parser": (["llama3"], "llama3"),
    "prompt-tokens-buckets": (["customer", "1", "5"], ["customer", "1", "5"]),
    "generation-tokens-buckets": (["tse", "100", "2", "8"], ["tse", "100", "2", "8"]),
    "hicache-storage-backend-extra-config": (['{"prefetch_threshold": 128}'],
                                             {"prefetch_threshold": 128}),
}
EXTRA_ARGS = {
    "enable-dp-attention": ["--dp-size", "2", "--tp-size", "2"],
    "ep-size": ["--tp-size", "8"],  # expert blocks divide the tensor-parallel ranks
    "enable-eplb": ["--tp-size", "2", "--ep-size", "2"],  # balancing needs two expert blocks
    "node-rank": ["--nnodes", "16", "--tp-size", "16", "--dist-init-addr", "10.0.0.1:29500"],
    "multi-item-scoring-delimiter": ["--disable-radix-cache", "--chunked-prefill-size", "-1"],
    "export-metrics-to-file": ["--export-metrics-to-file-dir", "/tmp"],
    "enable-priority-scheduling": ["--schedule-policy", "fcfs"],
    "served-model-name": [],
    "quantization-param-path": ["--kv-cache-dtype", "fp8_e4m3"],
    "hicache-storage-backend": ["--enable-hierarchical-cache"],
    "hicache-storage-backend-extra-config": ["--enable-hierarchical-cache",
                                             "--hicache-storage-backend", "file"],
}
# Deprecated switches land on their replacement (SGLang maps them the same way).
DEPRECATED = {"enable-ep-moe", "enable-deepep-moe", "enable-triton-kernel-moe",
              "enable-flashinfer-cutlass-moe", "enable-flashinfer-trtllm-moe",
              "enable-flashinfer-mxfp4-moe", "enable-flashinfer-cutedsl-moe"}


SECRETS = ("api-key", "admin-api-key")


def valid_value(entry):
    """(command-line words, expected resolved value) for one argument."""
    if entry["name"] in OVERRIDES:
        return OVERRIDES[entry["name"]]
    kind, choices, default = entry["type"], entry["choices"], entry["default"]
    if kind == "flag":
        return [], True
    if kind == "bool":
        value = not bool(default)
        return [str(value).lower()], value
    if kind in ("str list", "int list", "float list"):
        if entry["append"]:  # argparse action="append": one word per occurrence
            return ["alpha"], ["alpha"]
        if choices:
            return list(choices[:2]), list(choices[:2])
        if kind == "int list":
            return ["4", "8"], [4, 8]
        if kind == "float list":
            return ["0.5", "1.5"], [0.5, 1.5]
        return ["alpha", "beta"], ["alpha", "beta"]
    if choices:
        pick = next((c for c in choices if c != default), choices[0])
        if kind == "int":
            return [pick], int(pick)
        return [pick], pick
    if kind == "int":
        return ["8"], 8
    if kind == "float":
        return ["0.5"], 0.5
    if kind == "JSON":
        return ['{"k": 1}'], {"k": 1}
    return ["x-value"], "x-value"


# Environment an argument needs to be valid.
EXTRA_ENV = {"first-token-constraint-mode": {"FIRST_ALLOWED_TOKENS": "1,2"}}


def test_every_seed_spelling_is_accepted(radixserve_bin, shared_dir, arg_table):
    index = index_spellings(arg_table)
    dest = sglang_dest_names(shared_dir)
    failures = []
    checked = set()
    for seed, spelling in seed_spellings(shared_dir):
        key = spelling_key(spelling)
        entry = index.get(key)
        if entry is None:
            failures.append(f"{seed} {spelling}: not in the table")
            continue
        if key in dest and dest[key] != entry["key"]:
            failures.append(f"{spelling}: lands in {entry['key']}, SGLang's field is {dest[key]}")
        if (spelling, entry["name"]) in checked:
            continue
        checked.add((spelling, entry["name"]))
        if entry["name"] in ("revision", "speculative-draft-model-revision", "config",
                             "print-config", "mtp-mode"):
            continue  # covered by their own tests (mtp-mode: test_speculative_nextn.py)
        words, expected = valid_value(entry)
        if entry["name"] in SECRETS:
            expected = "<redacted>"  # keys never appear in --print-config (docs/security.md)
        proc = run_radixserve(radixserve_bin, "--model-path", MODEL, "--print-config",
                              *EXTRA_ARGS.get(entry["name"], []), spelling, *words,
                              env=EXTRA_ENV.get(entry["name"]))
        if proc.returncode != 0:
            failures.append(f"{seed} {spelling} {words}: exit {proc.returncode}: "
                            f"{proc.stderr.strip()}")
            continue
        if entry["name"] in DEPRECATED:
            continue
        resolved = json.loads(proc.stdout)
        if resolved.get(entry["key"]) != expected:
            failures.append(f"{seed} {spelling} {words}: {entry['key']} = "
                            f"{resolved.get(entry['key'])!r}, expected {expected!r}")
    assert not failures, "\n".join(failures)
    assert len(checked) > 440


def test_dashes_and_underscores_are_interchangeable(radixserve_bin):
    a, _ = print_config(radixserve_bin, "--max_running_requests", "5", "--random-seed", "1")
    b, _ = print_config(radixserve_bin, "--max-running-requests=5", "--random_seed=1")
    assert a == b
    assert a["max_running_requests"] == 5


def test_derived_defaults(radixserve_bin):
    config, _ = print_config(radixserve_bin)
    assert config["tokenizer_path"] == MODEL
    assert config["served_model_name"] == MODEL
    assert config["device"] == "cpu"
    assert config["page_size"] == 1
    assert isinstance(config["random_seed"], int) and 0 <= config["random_seed"] <= 2**30
    assert config["mem_fraction_static"] is None  # the engine's cpu rule applies
    assert config["chunked_prefill_size"] in (2048, 8192, 16384)
    assert config["host"] == "127.0.0.1" and config["port"] == 30000
    assert config["schedule_policy"] == "fcfs"
    assert config["max_prefill_tokens"] == 16384
    assert config["threads"] >= 1


def test_explicit_values_win_over_derived(radixserve_bin):
    config, _ = print_config(radixserve_bin, "--tokenizer-path", "/tok", "--served-model-name",
                             "m", "--random-seed", "7", "--chunked-prefill-size", "512")
    assert (config["tokenizer_path"], config["served_model_name"]) == ("/tok", "m")
    assert (config["random_seed"], config["chunked_prefill_size"]) == (7, 512)


def test_device_only_argument_warns_once(radixserve_bin):
    _, stderr = print_config(radixserve_bin, "--disable-cuda-graph", "--cuda-graph-max-bs", "4")
    assert stderr.count("--disable-cuda-graph") == 1
    assert stderr.count("--cuda-graph-max-bs") == 1
    assert "device cpu" in stderr


def test_rtp_max_batch_size_zero_means_no_limit_of_its_own(radixserve_bin):
    """RTP-LLM's --max-batch-size defaults to 0 (no limit): the derived default applies."""
    zero, _ = print_config(radixserve_bin, "--max-batch-size", "0")
    unset, _ = print_config(radixserve_bin)
    assert zero["max_running_requests"] == unset["max_running_requests"]


def test_dp_attention_takes_its_effects_without_a_no_effect_warning(radixserve_bin):
    config, stderr = print_config(radixserve_bin, "--dp-size", "2", "--tp-size", "2",
                                  "--enable-dp-attention")
    assert config["schedule_conservativeness"] == 0.3
    assert "--enable-dp-attention has no effect" not in stderr


def test_deprecated_switch_maps_to_replacement(radixserve_bin):
    config, stderr = print_config(radixserve_bin, "--enable-deepep-moe")
    assert config["moe_a2a_backend"] == "deepep"
    assert "deprecated" in stderr


def test_lightllm_launch_command_works(radixserve_bin):
    config, _ = print_config(radixserve_bin, "--model_dir", "/m2", "--tp", "1",
                             "--max_total_token_num", "4096", "--running_max_req_size", "12",
                             "--mem_fraction", "0.6", "--tokenizer_mode", "fast")
    assert config["model_path"] == "/m2"
    assert config["max_total_tokens"] == 4096
    assert config["max_running_requests"] == 12
    assert config["mem_fraction_static"] == 0.6
    assert config["tokenizer_mode"] == "auto"


def test_help_is_grouped(radixserve_bin):
    proc = run_radixserve(radixserve_bin, "--help")
    assert proc.returncode == 0
    text = proc.stdout
    groups = ["Model and tokenizer:", "HTTP server:", "Memory and scheduling:", "Logging:",
              "LightLLM-specific:", "RTP-LLM-specific:"]
    positions = [text.index(g) for g in groups]
    assert positions[:4] == sorted(positions[:4])
    assert "--model-path, --model" in text


@pytest.mark.parametrize("args, named", [
    (["--no-such-flag"], "--no-such-flag"),
    (["--port", "abc"], "--port"),
    (["--port"], "--port"),
    (["--mem-fraction-static", "x"], "--mem-fraction-static"),
    (["--schedule-policy", "bogus"], "--schedule-policy"),
    (["--disable-radix-cache", "maybe"], None),  # 'maybe' is then an unrecognized word
    (["--json-model-override-args", "{not json"], "--json-model-override-args"),
    (["--device", "cuda"], "--device"),
    (["--mem-fraction-static", "1.5"], "--mem-fraction-static"),
    (["--max-queued-requests", "0"], "--max-queued-requests"),
    (["--page-size", "16", "--chunked-prefill-size", "100"], "--chunked-prefill-size"),
    (["--enable-hierarchical-cache", "--disable-radix-cache"], "--enable-hierarchical-cache"),
    (["--revision", "main"], "--revision"),
    (["--schedule-conservativeness", "-1"], "--schedule-conservativeness"),
    (["--config", "/nonexistent.yaml"], "--config"),
    (["stray"], "stray"),
])
def test_bad_input_exits_2_naming_the_argument(radixserve_bin, args, named):
    proc = run_radixserve(radixserve_bin, "--model-path", MODEL, "--print-config", *args)
    assert proc.returncode == 2, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if "error" in l]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    if named:
        assert named in lines[0]
    choices = "fcfs" in lines[0] if "--schedule-policy" in args and "bogus" in args else True
    assert choices


def test_missing_model_path(radixserve_bin):
    proc = run_radixserve(radixserve_bin, "--print-config")
    assert proc.returncode == 2
    assert "--model-path" in proc.stderr


def test_yaml_and_command_line_precedence(radixserve_bin, tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("model_path: /from/yaml\n"
                   "max-running-requests: 9\n"
                   "--port: 31000\n"
                   "enable_metrics: true\n"
                   "json-model-override-args:\n  rope_theta: 5.0\n"
                   "cuda-graph-bs: [1, 2]\n")
    config, _ = print_config(radixserve_bin, "--config", cfg, "--port", "32000")
    # --model-path on the command line (print_config passes it) beats the file.
    assert config["model_path"] == MODEL
    assert config["port"] == 32000
    assert config["max_running_requests"] == 9
    assert config["enable_metrics"] is True
    assert config["json_model_override_args"] == {"rope_theta": 5.0}
    assert config["cuda_graph_bs"] == [1, 2]
    # The file alone supplies the model path.
    proc = run_radixserve(radixserve_bin, "--config", cfg, "--print-config")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["model_path"] == "/from/yaml"


@pytest.mark.parametrize("body, named", [
    ("no_such_key: 1\n", "no_such_key"),
    ("port: [unclosed\n", "--config"),
    ("port: abc\n", "--port"),
    ("- a\n- b\n", "--config"),
])
def test_bad_yaml_exits_2(radixserve_bin, tmp_path, body, named):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(body)
    proc = run_radixserve(radixserve_bin, "--model-path", MODEL, "--config", cfg,
                          "--print-config")
    assert proc.returncode == 2
    assert named in proc.stderr
    assert len([l for l in proc.stderr.splitlines() if "error" in l]) == 1


def test_version(radixserve_bin):
    proc = run_radixserve(radixserve_bin, "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("radixserve ")
