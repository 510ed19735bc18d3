"""Arguments made real (LightLLM's, SGLang's scheduler and logging ones), checked against the same
server without them.

The guard that no argument marked as taking effect is silently ignored lives in
tests/unit/args/arg_readers_test.cpp: every argument whose entry in src/args/server_args.json says
cpu "yes" or "partial" is read outside src/args/ through its generated key:: constant, or says
"read_in": "args" with the reason."""
import os
import re
import subprocess
import threading

import requests

from server_util import BUILD, STORIES, Server


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
    """LightLLM's --disable_chunked_prefill and RTP-LLM's --enable-fast-gen false prefill a long
    prompt whole; left out, or --enable-fast-gen true, it is chunked."""
    prompt = " ".join(["The little dog ran to the park and played with a ball."] * 12)
    for flags, whole in (([], False), (["--disable_chunked_prefill"], True),
                         (["--enable-fast-gen", "false"], True),
                         (["--enable-fast-gen", "true"], False)):
        srv = Server(STORIES, "--chunked-prefill-size", 32, "--disable-radix-cache", *flags)
        try:
            out = generate(srv, prompt, 2)
            logs = srv.logs()
        finally:
            assert srv.stop() == 0
        assert out["meta_info"]["prompt_tokens"] > 64
        sizes = [int(n) for n in re.findall(r"Prefill batch, #new-seq: \d+, #new-token: (\d+)",
                                             logs)]
        if whole:
            assert sizes and max(sizes) > 64, (flags, sizes)
        else:
            assert max(sizes) <= 32 and len(sizes) > 2, (flags, sizes)


def finish_order(*flags):
    """A long streamed request decodes (steps slowed by the test hook); a one-token request
    arrives meanwhile. Returns which finished first, as the client saw it."""
    srv = Server(STORIES, "--skip-server-warmup", *flags, env={"RADIX_TEST_STEP_DELAY_MS": "10"})
    try:
        order = []
        long = requests.post(srv.url + "/generate", stream=True, timeout=120, json={
            "text": "Once upon a time", "stream": True,
            "sampling_params": {"max_new_tokens": 80, "ignore_eos": True}})
        lines = long.iter_lines()
        # Decoding now: the first event comes from the prefill step, after which the engine looks
        # at its inbox once more, so a request sent on it alone may still be admitted at once on a
        # busy machine; after three events the engine has run decode steps.
        seen = 0
        while seen < 3:
            seen += next(lines).startswith(b"data:")

        def drain():
            for _ in lines:
                pass
            order.append("long")

        reader = threading.Thread(target=drain)
        reader.start()
        generate(srv, "Hello", 1)
        order.append("short")
        reader.join()
        srv.assert_no_leak()
        return order
    finally:
        assert srv.stop() == 0, srv.logs()


def test_scheduler_recv_interval_defers_new_requests_while_decoding():
    """SGLang's --scheduler-recv-interval: with a large interval the engine does not look at its
    inbox while it only decodes, so the new request waits for the long one to end; with the
    default (1) it joins at once and ends first."""
    assert finish_order("--scheduler-recv-interval", 1) == ["short", "long"]
    assert finish_order("--scheduler-recv-interval", 100000) == ["long", "short"]


def test_disable_aggressive_schedule_waits_router_max_wait_tokens_between_prefills():
    """LightLLM's --disable_aggressive_schedule: a request arriving while a batch decodes is
    prefilled only after --router_max_wait_tokens decode steps; aggressive (the default) takes
    it at once, whatever the wait setting."""
    assert finish_order("--router_max_wait_tokens", 100000) == ["short", "long"]
    assert finish_order("--disable_aggressive_schedule", "--router_max_wait_tokens",
                        100000) == ["long", "short"]


def test_router_token_ratio_admits_on_the_shorter_output_estimate():
    """LightLLM's --router_token_ratio / --router_max_new_token_len: in a 300-token pool, four
    requests of up to 200 output tokens run at most two at a time under SGLang's estimate (each
    counts its 200 tokens); while usage is below the ratio each counts 16, so all four run at once (and
    some are retracted later, the price LightLLM's documentation names). All finish either way."""
    def max_running(*flags):
        srv = Server(STORIES, "--skip-server-warmup", "--max-total-tokens", 300,
                     "--decode-log-interval", 1, *flags)
        try:
            r = requests.post(srv.url + "/generate", timeout=120, json={
                "text": ["Once upon a time", "The cat sat", "A little dog", "One day a bird"],
                "sampling_params": {"temperature": 0, "max_new_tokens": 200, "ignore_eos": True}})
            assert r.status_code == 200, r.text
            assert all(o["meta_info"]["completion_tokens"] == 200 for o in r.json())
            srv.assert_no_leak()
            srv.log.flush()
            return max(int(n) for n in re.findall(r"Decode batch, #running-req: (\d+)",
                                                  srv.log_path.read_text()))
        finally:
            assert srv.stop() == 0, srv.logs()

    assert max_running() <= 2
    assert max_running("--router_max_new_token_len", 16) <= 2  # ratio 0: no effect
    assert max_running("--router_token_ratio", 0.9, "--router_max_new_token_len", 16) == 4


def test_show_time_cost_logs_the_stage_times():
    for flags, want in (([], False), (["--show-time-cost"], True)):
        srv = Server(STORIES, "--skip-server-warmup", *flags,
                     env={"RADIX_TEST_STEP_DELAY_MS": "30"})
        try:
            generate(srv, "Once upon a time", 10)
            srv.log.flush()
            lines = re.findall(r"\] decode: (\d+\.\d{3})s$", srv.log_path.read_text(), re.M)
            assert bool(lines) == want, srv.logs()
            if want:  # cumulative: never decreasing
                assert [float(x) for x in lines] == sorted(float(x) for x in lines)
        finally:
            assert srv.stop() == 0, srv.logs()


def test_request_time_stats_logging_logs_sglangs_line_per_request():
    import time
    srv = Server(STORIES, "--skip-server-warmup", "--enable-request-time-stats-logging")
    try:
        r = requests.post(srv.url + "/generate", timeout=60, json={
            "text": "Once upon a time", "rid": "ts-1",
            "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}})
        meta = r.json()["meta_info"]
        srv.log.flush()
        [line] = re.findall(
            r"ReqTimeStats\(rid=ts-1, input_len=(\d+), cached_input_len=(\d+), output_len=(\d+), "
            r"attempts=1, type=unified\): queue_duration=([\d.]+)ms, forward_duration=([\d.]+)ms, "
            r"entry_time=([\d.]+)", srv.log_path.read_text())
        assert [int(x) for x in line[:3]] == [meta["prompt_tokens"], meta["cached_tokens"],
                                              meta["completion_tokens"]]
        queue_ms, forward_ms = float(line[3]), float(line[4])
        assert (queue_ms + forward_ms) / 1000 <= meta["e2e_latency"] + 0.05
        assert abs(float(line[5]) - time.time()) < 120
    finally:
        assert srv.stop() == 0, srv.logs()


def test_long_truncation_mode_cuts_the_prompt_as_lightllm_does():
    """LightLLM's --long_truncation_mode: the reference is the plain server given the cut ids
    by hand (head keeps the last tokens, center the first and last halves)."""
    context = 64
    prompt_ids = [(i * 7) % 200 + 10 for i in range(100)]
    max_new = 10  # leaves the prompt under SGLang's input margin too
    plain = Server(STORIES, "--skip-server-warmup", "--context-length", context)
    try:
        limit = context - 1  # SGLang's max_req_len
        keep = limit - max_new
        want = {"head": prompt_ids[-keep:],
                "center": prompt_ids[:keep // 2] + prompt_ids[-(keep - keep // 2):]}
        ref = {}
        for mode, ids in want.items():
            r = requests.post(plain.url + "/generate", timeout=60, json={
                "input_ids": ids, "sampling_params": {"temperature": 0, "max_new_tokens": max_new}})
            assert r.status_code == 200, r.text
            ref[mode] = r.json()
        r = requests.post(plain.url + "/generate", timeout=60, json={
            "input_ids": prompt_ids, "sampling_params": {"max_new_tokens": max_new}})
        assert r.status_code == 400, r.text  # without the mode: refused
    finally:
        assert plain.stop() == 0
    for mode in ("head", "center"):
        srv = Server(STORIES, "--skip-server-warmup", "--context-length", context,
                     "--long_truncation_mode", mode)
        try:
            r = requests.post(srv.url + "/generate", timeout=60, json={
                "input_ids": prompt_ids,
                "sampling_params": {"temperature": 0, "max_new_tokens": max_new}})
            assert r.status_code == 200, r.text
            got = r.json()
            assert got["meta_info"]["prompt_tokens"] == len(want[mode])
            assert got["output_ids"] == ref[mode]["output_ids"]
        finally:
            assert srv.stop() == 0, srv.logs()


def test_first_token_constraint_mode_restricts_the_first_token():
    """LightLLM's --first_token_constraint_mode: the first output token is one of
    FIRST_ALLOWED_TOKENS (chosen here among tokens the model would not pick greedily); later
    tokens are free. Without the variable the start stops naming the flag (exit 2)."""
    prompt = "Once upon a time"
    plain = Server(STORIES, "--skip-server-warmup")
    try:
        free = generate(plain, prompt, 4)["output_ids"]
    finally:
        assert plain.stop() == 0
    allowed = [t for t in (300, 301) if t != free[0]]
    srv = Server(STORIES, "--skip-server-warmup", "--first_token_constraint_mode",
                 env={"FIRST_ALLOWED_TOKENS": ",".join(map(str, allowed))})
    try:
        for _ in range(2):
            assert generate(srv, prompt, 4)["output_ids"][0] in allowed
        r = requests.post(srv.url + "/generate", timeout=60, json={
            "text": prompt, "sampling_params": {"max_new_tokens": 4, "temperature": 1.0}})
        assert r.json()["output_ids"][0] in allowed
    finally:
        assert srv.stop() == 0, srv.logs()
    out = subprocess.run([str(BUILD / "radixserve"), "--model-path", str(STORIES),
                          "--first_token_constraint_mode"], capture_output=True, text=True,
                         timeout=120, env={k: v for k, v in os.environ.items()
                                           if k != "FIRST_ALLOWED_TOKENS"})
    assert out.returncode == 2, out.stderr
    assert "--first_token_constraint_mode" in out.stderr + out.stdout


def test_reuse_cache_false_turns_prefix_reuse_off():
    """RTP-LLM's --reuse-cache, given as false: a repeated prompt is computed again (no cached
    tokens); given as true, the radix cache serves the repeat."""
    prompt = " ".join(["The little dog ran to the park and played with a ball."] * 4)
    for value, reused in (("false", False), ("true", True)):
        srv = Server(STORIES, "--skip-server-warmup", "--reuse-cache", value)
        try:
            generate(srv, prompt, 2)
            again = generate(srv, prompt, 2)["meta_info"]
            assert (again["cached_tokens"] > 0) == reused, (value, again)
            assert srv.server_info()["disable_radix_cache"] == (not reused)
        finally:
            assert srv.stop() == 0, srv.logs()


def test_scheduler_reserve_resource_ratio_keeps_headroom_for_running_requests():
    """RTP-LLM's --scheduler-reserve-resource-ratio: with 99% of a 1024-token pool reserved
    while a request runs, a new one waits for it to end; with nothing running it is admitted."""
    assert finish_order("--max-total-tokens", 1024) == ["short", "long"]
    assert finish_order("--max-total-tokens", 1024,
                        "--scheduler-reserve-resource-ratio", 99) == ["long", "short"]
