"""While the startup warmup runs, the health routes answer 503 and /server_info says "starting",
as SGLang's server does before it is ready; once the ready line is logged they answer 200.

The warmup is slowed down with the engine's test hook RADIX_TEST_STEP_DELAY_MS so the window is
wide enough to observe."""
import os
import subprocess
import time

import pytest
import requests

from server_util import BUILD, STORIES, cpu_flags, free_port


def test_health_is_503_until_the_warmup_is_over(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "server.log"
    env = dict(os.environ, RADIX_TEST_STEP_DELAY_MS="400")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(BUILD / "radixserve"), "--model-path", str(STORIES), "--host", "127.0.0.1",
             "--port", str(port), "--max-total-tokens", "4096"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        seen_starting = False
        deadline = time.time() + 120
        while time.time() < deadline:
            assert proc.poll() is None, log_path.read_text()
            try:
                status = requests.get(url + "/health", timeout=5).status_code
            except requests.ConnectionError:
                time.sleep(0.02)
                continue
            if status == 503:
                seen_starting = True
                # 503 while starting; the warmup may end between the two requests, and then
                # /health must say so too.
                if requests.get(url + "/health_generate", timeout=5).status_code != 503:
                    assert requests.get(url + "/health", timeout=5).status_code == 200
                info = requests.get(url + "/server_info", timeout=5).json()
                assert info["status"] in ("starting", "ready")  # the warmup may end in between
            else:
                assert status == 200
                break
            time.sleep(0.02)
        assert seen_starting, log_path.read_text()
        assert "The server is fired up and ready to roll!" in log_path.read_text()
        assert requests.get(url + "/server_info", timeout=5).json()["status"] == "ready"
        assert requests.get(url + "/health_generate", timeout=60).status_code == 200
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


def test_server_info_has_sglangs_launch_and_startup_keys():
    """SGLang 0.5.23's build_server_info keys: launch_command (secrets redacted), kv_events (null:
    no KV events are published), startup_time (its phases in seconds), frontend."""
    from server_util import Server
    srv = Server(STORIES, "--skip-server-warmup", "--api-key", "sekrit")
    try:
        info = requests.get(srv.url + "/server_info", timeout=30,
                            headers={"Authorization": "Bearer sekrit"}).json()
        command = info["launch_command"]
        assert command.split()[0].endswith("radixserve") and "--model-path" in command
        assert "sekrit" not in command and "--api-key <redacted>" in command
        assert info["kv_events"] is None
        phases = info["startup_time"]
        assert set(phases) == {"load_weight", "kv_cache_allocation", "scheduler_e2e",
                               "cuda_graph", "tokenizer_e2e"}
        assert 0 < phases["load_weight"] <= phases["scheduler_e2e"] <= phases["tokenizer_e2e"]
        assert all(v == 0 for v in phases["cuda_graph"].values())
        assert info["frontend"] == "radixserve"
    finally:
        assert srv.stop() == 0, srv.logs()


def test_server_info_reports_the_kernel_choice(tmp_path):
    """The startup log line and /server_info name the kernels this CPU runs; a forced BF16
    product (RADIX_BF16_PRODUCT) or quantized tiling (RADIX_QUANT_TILES) is what both report,
    and the measurements are kept under $RADIX_CACHE/kernels for the next start, which reuses
    them."""
    from server_util import Server
    flags = cpu_flags()
    avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
    want_set = "avx512" if avx512 else "avx2" if "avx2" in flags else "ref"
    # Both vector tables have panels; without AVX512-BF16 they have one product (widen_fma).
    bf16_panels = want_set != "ref"
    one_product = bf16_panels and "avx512_bf16" not in flags
    vnni = avx512 and "avx512_vnni" in flags
    for forced, forced_tiles in (("widen_fma", "expand"), ("dot_bf16", "compact"), (None, None)):
        env = {"RADIX_CACHE": str(tmp_path / "cache")}
        if forced:
            env["RADIX_BF16_PRODUCT"] = forced
            env["RADIX_QUANT_TILES"] = forced_tiles
        srv = Server(STORIES, "--skip-server-warmup", env=env)
        try:
            kernels = requests.get(srv.url + "/server_info", timeout=30).json()["kernels"]
            log = srv.log_path.read_text(errors="replace")
        finally:
            assert srv.stop() == 0, srv.logs()
        assert kernels["instruction_set"] == want_set, kernels
        assert kernels["bf16_panels"] == bf16_panels, kernels
        assert kernels["quantized_matmul"] == ("avx512_vnni" if vnni else "avx2" if want_set != "ref"
                                               else ""), kernels
        line = next(l for l in log.splitlines() if "Kernels: " in l)
        assert f"{want_set} instruction set" in line, line
        if not vnni:
            assert "quant_tiles" not in kernels, kernels
        elif forced_tiles:
            assert kernels["quant_tiles"] == forced_tiles, kernels
            assert kernels["quant_tiles_source"] == "forced", kernels
            assert f"with {forced_tiles} tiles (forced by RADIX_QUANT_TILES)" in line, line
        else:
            assert kernels["quant_tiles_source"] == "measured", kernels
            tile_times = kernels["quant_tiles_calibration_seconds"]
            assert kernels["quant_tiles"] == min(tile_times, key=tile_times.get), kernels
        if one_product:
            assert kernels["bf16_product"] == "widen_fma", kernels
            source = "forced" if forced == "widen_fma" else "the only one here"
            assert kernels["bf16_product_source"] == source, kernels
            assert "BF16 panels with widen_fma" in line, line
        elif forced:
            assert kernels["bf16_product"] == forced and kernels["bf16_product_source"] == "forced"
            assert f"BF16 panels with {forced} (forced by RADIX_BF16_PRODUCT)" in line or \
                not bf16_panels, line
        elif bf16_panels:
            assert kernels["bf16_product_source"] == "measured", kernels
            times = kernels["bf16_calibration_seconds"]
            faster = min(times, key=times.get)
            assert kernels["bf16_product"] == faster, kernels
            # With AMX, whether one-token steps run on the tiles' reproduction is checked once at
            # start-up and reported (a CPU whose tiles add differently reports false).
            if kernels["bf16_product"] == "amx_bf16":
                assert isinstance(kernels["bf16_amx_small_steps_reproduced"], bool), kernels
                assert ("steps of 1-2 tokens on vector tiles" in line) == \
                    kernels["bf16_amx_small_steps_reproduced"], line
            else:
                assert "bf16_amx_small_steps_reproduced" not in kernels, kernels
            kept = list((tmp_path / "cache" / "kernels").iterdir())
            assert len(kept) == 1, kept
            # The next start reads the measurement instead of repeating it.
            srv = Server(STORIES, "--skip-server-warmup", env=env)
            try:
                again = requests.get(srv.url + "/server_info", timeout=30).json()["kernels"]
            finally:
                assert srv.stop() == 0, srv.logs()
            assert again["bf16_product_source"] == "cached", again
            assert again["bf16_product"] == kernels["bf16_product"]
            assert again["bf16_calibration_seconds"] == times
            if vnni:
                assert again["quant_tiles_source"] == "cached", again
                assert again["quant_tiles"] == kernels["quant_tiles"]
                assert again["quant_tiles_calibration_seconds"] == \
                    kernels["quant_tiles_calibration_seconds"]


@pytest.mark.parametrize("variable, value, message", [
    ("RADIX_BF16_PRODUCT", "fastest", "is not a BF16 product"),
    ("RADIX_QUANT_TILES", "widest", "is not a quantized tiling"),
    ("RADIX_QUANT_AMX", "yes", "is not 0 or 1"),
])
def test_unknown_forced_kernel_is_a_usage_error(variable, value, message):
    proc = subprocess.run(
        [str(BUILD / "radixserve"), "--model-path", str(STORIES), "--port", str(free_port())],
        env=dict(os.environ, **{variable: value}), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"{variable}={value} {message}" in proc.stderr


def test_quantized_amx_tiles_are_reported_and_can_be_turned_off():
    """Where the CPU has AMX-INT8 the avx512_vnni matmul runs groups of 16 tokens on AMX tiles
    (/server_info's quant_amx_int8 and the startup line say so) unless RADIX_QUANT_AMX=0; the
    greedy continuation of a long prompt is the same either way (the tiles give the VNNI bits).
    Without AMX-INT8 the key is absent and RADIX_QUANT_AMX=1 is a usage error."""
    from server_util import SMOLLM2, Server
    flags = cpu_flags()
    amx = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "amx_int8",
           "amx_tile"} <= flags
    if not amx:
        proc = subprocess.run(
            [str(BUILD / "radixserve"), "--model-path", str(STORIES), "--port", str(free_port())],
            env=dict(os.environ, RADIX_QUANT_AMX="1"), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "RADIX_QUANT_AMX=1: this machine has no usable AMX-INT8" in proc.stderr
    prompt = " ".join(["The library opens at nine and closes at five on weekdays."] * 12)
    outputs = []
    for setting in ("1", "0") if amx else ("0",):
        srv = Server(SMOLLM2, "--skip-server-warmup", env={"RADIX_QUANT_AMX": setting})
        try:
            kernels = requests.get(srv.url + "/server_info", timeout=30).json()["kernels"]
            r = requests.post(srv.url + "/generate", timeout=120, json={
                "text": prompt, "sampling_params": {"max_new_tokens": 16, "temperature": 0}})
            assert r.status_code == 200, r.text
            outputs.append(r.json()["text"])
            line = next(l for l in srv.log_path.read_text(errors="replace").splitlines()
                        if "Kernels: " in l)
        finally:
            assert srv.stop() == 0, srv.logs()
        if amx:
            assert kernels["quant_amx_int8"] == (setting == "1"), kernels
            assert ("AMX-INT8 tiles for 16+ tokens" if setting == "1"
                    else "AMX-INT8 off (RADIX_QUANT_AMX=0)") in line, line
        else:
            assert "quant_amx_int8" not in kernels, kernels
    assert len(set(outputs)) == 1, outputs


def test_packed_weights_leave_their_source_pages():
    """Once weights are packed into panels, the checkpoint's mapped pages leave the server's
    resident set and the stacked Q/K/V and gate/up copies are freed: resident file pages stay
    far below the file's size, and resident anonymous memory near the panels' (the file's size
    for Q4_1), not twice it. Generation still works (the embedding rows fault back in)."""
    from server_util import SMOLLM2, Server
    size_mb = SMOLLM2.stat().st_size / 2**20
    srv = Server(SMOLLM2, "--max-total-tokens", "4096")
    try:
        r = requests.post(srv.url + "/generate", timeout=60, json={
            "text": "The capital of France is", "sampling_params": {"max_new_tokens": 8}})
        assert r.status_code == 200 and r.json()["text"], r.text
        status = {"model_file": 0.0}
        with open(f"/proc/{srv.proc.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "RssAnon":
                    status[key] = int(value.split()[0]) / 1024
        mapping = None  # resident pages of the model file's mapping, from smaps
        with open(f"/proc/{srv.proc.pid}/smaps") as f:
            for line in f:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5:
                    mapping = fields[5] if len(fields) > 5 else ""
                elif fields[0] == "Rss:" and mapping == str(SMOLLM2):
                    status["model_file"] += int(fields[1]) / 1024
    finally:
        assert srv.stop() == 0, srv.logs()
    assert status["model_file"] < 0.2 * size_mb, (status, size_mb)
    assert status["RssAnon"] < 1.6 * size_mb + 64, (status, size_mb)
