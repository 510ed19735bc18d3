"""Deeply nested JSON in every field of every JSON route: 400 naming the 128-level limit, never a
crash (contract 1)."""
import pytest

from fault_util import CHAT, COMPLETIONS, assert_alive, error_message, post

MAX_DEPTH = 128
DEPTHS = [10, 129, 1_000, 100_000, 1_000_000]

# Request bodies with one placeholder, @@, where the nested value goes. "@@" alone is the body.
GEN = '{"text": "hi", "sampling_params": {"max_new_tokens": 1, %s}}'
TEMPLATES = {
    "/generate": {
        "top": "@@",
        "text": '{"text": @@, "sampling_params": {"max_new_tokens": 1}}',
        "input_ids": '{"input_ids": @@, "sampling_params": {"max_new_tokens": 1}}',
        "rid": '{"text": "hi", "rid": @@, "sampling_params": {"max_new_tokens": 1}}',
        "sampling_params": '{"text": "hi", "sampling_params": @@}',
        "sampling_params.stop": GEN % '"stop": @@',
        "sampling_params.stop_token_ids": GEN % '"stop_token_ids": @@',
        "sampling_params.logit_bias": GEN % '"logit_bias": @@',
        "sampling_params.custom_params": GEN % '"custom_params": @@',
        "sampling_params.json_schema": GEN % '"json_schema": @@',
        "sampling_params.n": GEN % '"n": @@',
        "return_logprob": '{"text": "hi", "return_logprob": @@, '
                          '"sampling_params": {"max_new_tokens": 1}}',
        "token_ids_logprob": '{"text": "hi", "return_logprob": true, "token_ids_logprob": @@, '
                             '"sampling_params": {"max_new_tokens": 1}}',
        "top_logprobs_num": '{"text": "hi", "top_logprobs_num": @@, '
                            '"sampling_params": {"max_new_tokens": 1}}',
        "stream": '{"text": "hi", "stream": @@, "sampling_params": {"max_new_tokens": 1}}',
        "session_params": '{"text": "hi", "session_params": @@, '
                          '"sampling_params": {"max_new_tokens": 1}}',
        "custom_labels": '{"text": "hi", "custom_labels": @@, '
                         '"sampling_params": {"max_new_tokens": 1}}',
        "image_data": '{"text": "hi", "image_data": @@, "sampling_params": {"max_new_tokens": 1}}',
        "priority": '{"text": "hi", "priority": @@, "sampling_params": {"max_new_tokens": 1}}',
    },
    COMPLETIONS: {
        "top": "@@",
        "prompt": '{"prompt": @@, "max_tokens": 1}',
        "stop": '{"prompt": "hi", "max_tokens": 1, "stop": @@}',
        "logit_bias": '{"prompt": "hi", "max_tokens": 1, "logit_bias": @@}',
        "stream_options": '{"prompt": "hi", "max_tokens": 1, "stream": true, "stream_options": @@}',
        "metadata": '{"prompt": "hi", "max_tokens": 1, "metadata": @@}',
        "max_tokens": '{"prompt": "hi", "max_tokens": @@}',
        "n": '{"prompt": "hi", "max_tokens": 1, "n": @@}',
    },
    CHAT: {
        "top": "@@",
        "messages": '{"messages": @@, "max_tokens": 1}',
        "messages[0]": '{"messages": [@@], "max_tokens": 1}',
        "messages[0].content": '{"messages": [{"role": "user", "content": @@}], "max_tokens": 1}',
        "chat_template_kwargs": '{"messages": [{"role": "user", "content": "hi"}], '
                                '"max_tokens": 1, "chat_template_kwargs": @@}',
        "response_format": '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, '
                           '"response_format": @@}',
        "tools": '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "tools": @@}',
        "stop": '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "stop": @@}',
        "logit_bias": '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, '
                      '"logit_bias": @@}',
    },
    "/tokenize": {
        "top": "@@",
        "prompt": '{"prompt": @@}',
        "add_special_tokens": '{"prompt": "hi", "add_special_tokens": @@}',
    },
    "/v1/tokenize": {
        "top": "@@",
        "prompt": '{"prompt": @@}',
    },
    "/detokenize": {
        "top": "@@",
        "tokens": '{"tokens": @@}',
        "skip_special_tokens": '{"tokens": [1, 2], "skip_special_tokens": @@}',
    },
    "/v1/detokenize": {
        "top": "@@",
        "tokens": '{"tokens": @@}',
    },
    "/abort_request": {
        "top": "@@",
        "rid": '{"rid": @@}',
        "abort_all": '{"abort_all": @@}',
    },
}

CASES = [(route, field) for route, fields in TEMPLATES.items() for field in fields]


def nested_array(depth):
    return "[" * depth + "]" * depth


def nested_object(depth):
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("route, field", CASES, ids=[f"{r}:{f}" for r, f in CASES])
def test_nested_value_is_rejected(stories, route, field, depth):
    template = TEMPLATES[route][field]
    for form, value in (("array", nested_array(depth)), ("object", nested_object(depth))):
        body = template.replace("@@", value)
        r = post(stories, route, data=body, timeout=60)
        where = f"{route} {field} {form} depth {depth}: {r.status_code} {r.text[:300]}"
        assert r.status_code < 500, where
        if depth > MAX_DEPTH:
            assert r.status_code == 400, where
            message = error_message(r).lower()
            assert "128" in message, where
            assert "depth" in message or "nest" in message, where
        else:
            # Within the limit the value is merely of the wrong shape for most fields.
            assert "128" not in error_message(r), where
        assert_alive(stories)


@pytest.mark.parametrize("route", ["/generate", COMPLETIONS, CHAT, "/tokenize"])
def test_depth_limit_boundary(stories, route):
    """A body exactly 128 levels deep is parsed (then refused for its shape, not its depth);
    129 levels is the depth error."""
    for depth, too_deep in ((MAX_DEPTH, False), (MAX_DEPTH + 1, True)):
        r = post(stories, route, data=nested_array(depth))
        assert r.status_code == 400, r.text[:300]
        message = error_message(r).lower()
        is_depth_error = "128" in message and ("depth" in message or "nest" in message)
        assert is_depth_error == too_deep, (depth, message)


def test_unbalanced_deep_prefix(stories):
    """A body that only opens brackets (never closes them) is a 400, not a crash."""
    for route in ("/generate", CHAT, "/abort_request"):
        r = post(stories, route, data="[" * 1_000_000)
        assert r.status_code == 400, r.text[:300]
        assert_alive(stories)


def test_many_shallow_siblings_are_fine(stories):
    """Width is not depth: a wide but shallow stop list is parsed normally."""
    r = post(stories, "/generate", body={"text": "Once upon a time",
                                         "sampling_params": {"max_new_tokens": 2,
                                                             "stop": ["zzz"] * 50}})
    assert r.status_code == 200, r.text[:300]
