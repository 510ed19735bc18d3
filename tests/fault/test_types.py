"""Wrong JSON types get a 4xx naming the field, never a 5xx (contract 6)."""
import pytest

from fault_util import CHAT, COMPLETIONS, assert_alive, assert_error, post

MSG = [{"role": "user", "content": "hi"}]
VALUES = [None, True, 1, -1, 1.5, "x", [], {}, [1], {"a": 1}]


@pytest.mark.parametrize("path, body, field", [
    ("/generate", {"text": "hi", "stream": "yes", "sampling_params": {"max_new_tokens": 1}},
     "stream"),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "stream": "yes"}, "stream"),
    (CHAT, {"messages": MSG, "max_tokens": 1, "stream": "yes"}, "stream"),
    (CHAT, {"messages": MSG, "max_tokens": 1, "response_format": {"type": 5}}, "response_format"),
    (CHAT, {"messages": MSG, "max_tokens": 1, "response_format": "json"}, "response_format"),
    ("/tokenize", {"prompt": "hi", "add_special_tokens": "x"}, "add_special_tokens"),
    ("/v1/tokenize", {"prompt": "hi", "add_special_tokens": "x"}, "add_special_tokens"),
    ("/detokenize", {"tokens": [1, 2], "skip_special_tokens": "x"}, "skip_special_tokens"),
    ("/abort_request", {"abort_all": "yes"}, "abort_all"),
    ("/abort_request", {"rid": 5}, "rid"),
    ("/generate", {"text": "hi", "return_logprob": "yes",
                   "sampling_params": {"max_new_tokens": 1}}, "return_logprob"),
    ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": "1"}}, "max_new_tokens"),
    ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1, "n": "2"}}, "n"),
    ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1, "stop": 5}}, "stop"),
    ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1, "logit_bias": [1]}},
     "logit_bias"),
    ("/generate", {"text": "hi", "sampling_params": "fast"}, "sampling_params"),
    (CHAT, {"messages": MSG, "max_tokens": 1, "chat_template_kwargs": "x"},
     "chat_template_kwargs"),
    (CHAT, {"messages": MSG, "max_tokens": 1, "stream_options": "x"}, "stream_options"),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "logit_bias": "x"}, "logit_bias"),
])
def test_wrong_type_names_the_field(stories, path, body, field):
    assert_error(post(stories, path, body), 400, field)
    assert_alive(stories)


# Known top-level fields of each route (src/api/generate_api.cpp KnownFields, the OpenAI handlers
# in src/api/openai_*.cpp and the admin handlers in src/api/admin_api.cpp) and a valid base body.
GENERATE_FIELDS = [
    "text", "input_ids", "input_embeds", "image_data", "video_data", "audio_data",
    "sampling_params", "rid", "return_logprob", "logprob_start_len", "top_logprobs_num",
    "token_ids_logprob", "return_text_in_logprobs", "stream", "log_metrics",
    "return_hidden_states", "modalities", "session_params", "lora_path", "lora_id",
    "custom_logit_processor", "bootstrap_host", "bootstrap_port", "bootstrap_room",
    "bootstrap_pair_key", "require_reasoning", "data_parallel_rank", "priority", "extra_key",
    "no_logs", "custom_labels", "return_entropy", "background", "conversation_id",
]
SAMPLING_FIELDS = [
    "max_new_tokens", "min_new_tokens", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "stop", "stop_token_ids",
    "stop_regex", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens",
    "no_stop_trim", "n", "logit_bias", "sampling_seed", "json_schema", "regex", "ebnf",
    "structural_tag", "custom_params", "stream_interval",
]
OPENAI_SAMPLING = [
    "temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty",
    "repetition_penalty", "min_tokens", "seed", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim", "stop", "stop_token_ids", "logit_bias",
    "regex", "json_schema", "ebnf", "user",
]
COMPLETION_FIELDS = OPENAI_SAMPLING + [
    "model", "prompt", "best_of", "echo", "logprobs", "max_tokens", "n", "stream",
    "stream_options", "suffix", "rid", "priority", "metadata",
]
CHAT_FIELDS = OPENAI_SAMPLING + [
    "model", "messages", "max_tokens", "max_completion_tokens", "n", "stream", "stream_options",
    "logprobs", "top_logprobs", "response_format", "tools", "tool_choice",
    "chat_template_kwargs", "continue_final_message", "rid", "priority", "metadata",
    "separate_reasoning", "parallel_tool_calls",
]

SWEEP = (
    [("/generate", f, {"text": "hi", "sampling_params": {"max_new_tokens": 1}}, None)
     for f in GENERATE_FIELDS]
    + [("/generate", f, {"text": "hi", "sampling_params": {"max_new_tokens": 1}},
        "sampling_params") for f in SAMPLING_FIELDS]
    + [(COMPLETIONS, f, {"prompt": "hi", "max_tokens": 1}, None) for f in COMPLETION_FIELDS]
    + [(CHAT, f, {"messages": MSG, "max_tokens": 1}, None) for f in CHAT_FIELDS]
    + [(p, f, {"prompt": "hi"}, None)
       for p in ("/tokenize", "/v1/tokenize") for f in ("prompt", "add_special_tokens")]
    + [(p, f, {"tokens": [1, 2]}, None)
       for p in ("/detokenize", "/v1/detokenize") for f in ("tokens", "skip_special_tokens")]
    + [("/abort_request", f, {}, None) for f in ("rid", "abort_all")]
)


@pytest.mark.parametrize("path, field, base, inner", SWEEP,
                         ids=[f"{p}:{i + '.' if i else ''}{f}" for p, f, _, i in SWEEP])
def test_type_confusion_sweep(stories, path, field, base, inner):
    for value in VALUES:
        body = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
        if inner:
            body[inner][field] = value
        else:
            body[field] = value
        r = post(stories, path, body, timeout=60)
        assert r.status_code < 500, (field, value, r.status_code, r.text[:300])
        if r.status_code >= 400:
            assert r.headers.get("content-type", "").startswith("application/json"), \
                (field, value, r.headers.get("content-type"), r.text[:300])
    assert_alive(stories)


def test_top_level_not_an_object(stories):
    for path in ("/generate", COMPLETIONS, CHAT, "/tokenize", "/detokenize", "/abort_request"):
        for raw in ("null", "1", '"x"', "[]", "true", "[1,2]"):
            r = post(stories, path, data=raw)
            assert r.status_code == 400, (path, raw, r.status_code, r.text[:300])
            assert_error(r, 400)
    assert_alive(stories)
