"""Numeric edge values are refused with 400, never a 5xx and never a success (contract 7).

Bodies are written as raw text so that values Python's json module cannot produce exactly
(2**64, NaN, Infinity, 1e999) reach the server verbatim.
"""
import pytest

from fault_util import CHAT, COMPLETIONS, assert_alive, assert_error, post

I63 = 2**63 - 1
GEN = '{"text": "hi", "sampling_params": {%s}}'
MSG = '[{"role": "user", "content": "hi"}]'


def gen(sampling):
    return GEN % sampling


BAD = [
    # max_new_tokens
    ("/generate", gen(f'"max_new_tokens": {I63}')),
    ("/generate", gen(f'"max_new_tokens": {2**64}')),
    ("/generate", gen('"max_new_tokens": -1')),
    ("/generate", gen(f'"max_new_tokens": {2**31}')),
    (COMPLETIONS, f'{{"prompt": "hi", "max_tokens": {I63}}}'),
    (COMPLETIONS, f'{{"prompt": "hi", "max_tokens": {2**64}}}'),
    (CHAT, f'{{"messages": {MSG}, "max_tokens": {2**64}}}'),
    (CHAT, f'{{"messages": {MSG}, "max_completion_tokens": {I63}}}'),
    # input_ids
    ("/generate", f'{{"input_ids": [{2**40}], "sampling_params": {{"max_new_tokens": 1}}}}'),
    ("/generate", '{"input_ids": [1.5], "sampling_params": {"max_new_tokens": 1}}'),
    ("/generate", '{"input_ids": [true], "sampling_params": {"max_new_tokens": 1}}'),
    ("/generate", '{"input_ids": [-1], "sampling_params": {"max_new_tokens": 1}}'),
    ("/generate", f'{{"input_ids": [{2**31}], "sampling_params": {{"max_new_tokens": 1}}}}'),
    ("/generate", f'{{"input_ids": [{2**64}], "sampling_params": {{"max_new_tokens": 1}}}}'),
    ("/generate", f'{{"input_ids": [[1], [{2**32 + 5}]], '
                  '"sampling_params": {"max_new_tokens": 1}}'),
    (COMPLETIONS, f'{{"prompt": [{2**40}], "max_tokens": 1}}'),
    (COMPLETIONS, '{"prompt": [-1], "max_tokens": 1}'),
    ("/detokenize", f'{{"tokens": [{2**40}]}}'),
    ("/detokenize", f'{{"tokens": [{2**64}]}}'),
    ("/detokenize", '{"tokens": [1.5]}'),
    # logprobs
    ("/generate", f'{{"text": "hi", "return_logprob": true, "top_logprobs_num": {2**32 + 1}, '
                  '"sampling_params": {"max_new_tokens": 1}}'),
    ("/generate", '{"text": "hi", "return_logprob": true, "top_logprobs_num": -5, '
                  '"sampling_params": {"max_new_tokens": 1}}'),
    ("/generate", f'{{"text": "hi", "return_logprob": true, "logprob_start_len": {2**63}, '
                  '"sampling_params": {"max_new_tokens": 1}}'),
    ("/generate", f'{{"text": "hi", "return_logprob": true, "token_ids_logprob": [{2**40}], '
                  '"sampling_params": {"max_new_tokens": 1}}'),
    (CHAT, f'{{"messages": {MSG}, "max_tokens": 1, "logprobs": true, '
           f'"top_logprobs": {2**32 + 1}}}'),
    (COMPLETIONS, f'{{"prompt": "hi", "max_tokens": 1, "logprobs": {2**32 + 1}}}'),
    # temperature and friends: NaN / Infinity are not JSON, 1e999 overflows a double
    ("/generate", gen('"max_new_tokens": 1, "temperature": NaN')),
    ("/generate", gen('"max_new_tokens": 1, "temperature": Infinity')),
    ("/generate", gen('"max_new_tokens": 1, "temperature": -Infinity')),
    ("/generate", gen('"max_new_tokens": 1, "temperature": 1e999')),
    ("/generate", gen('"max_new_tokens": 1, "top_p": 1e999')),
    ("/generate", gen('"max_new_tokens": 1, "repetition_penalty": 1e999')),
    ("/generate", gen('"max_new_tokens": 1, "frequency_penalty": -1e999')),
    ("/generate", gen('"max_new_tokens": 1, "logit_bias": {"5": 1e999}')),
    (COMPLETIONS, '{"prompt": "hi", "max_tokens": 1, "temperature": NaN}'),
    (COMPLETIONS, '{"prompt": "hi", "max_tokens": 1, "temperature": 1e999}'),
    (CHAT, f'{{"messages": {MSG}, "max_tokens": 1, "temperature": Infinity}}'),
    (CHAT, f'{{"messages": {MSG}, "max_tokens": 1, "top_p": 1e999}}'),
    # n and seeds
    ("/generate", gen(f'"max_new_tokens": 1, "n": {2**63}')),
    ("/generate", gen(f'"max_new_tokens": 1, "n": {2**64}')),
    ("/generate", gen('"max_new_tokens": 1, "n": -1')),
    (COMPLETIONS, f'{{"prompt": "hi", "max_tokens": 1, "n": {2**63}}}'),
    (CHAT, f'{{"messages": {MSG}, "max_tokens": 1, "n": {2**63}}}'),
    ("/generate", gen(f'"max_new_tokens": 1, "sampling_seed": {2**64}')),
    (COMPLETIONS, f'{{"prompt": "hi", "max_tokens": 1, "seed": {2**64}}}'),
    (CHAT, f'{{"messages": {MSG}, "max_tokens": 1, "seed": {2**64}}}'),
    # token-id lists inside sampling params
    ("/generate", gen(f'"max_new_tokens": 1, "stop_token_ids": [{2**40}]')),
    ("/generate", gen(f'"max_new_tokens": 1, "logit_bias": {{"{2**40}": 1.0}}')),
    ("/generate", gen('"max_new_tokens": 1, "logit_bias": {"-1": 1.0}')),
    ("/generate", gen(f'"max_new_tokens": 1, "min_new_tokens": {2**63}')),
]


@pytest.mark.parametrize("path, raw", BAD, ids=[f"{p}:{r[:70]}" for p, r in BAD])
def test_numeric_edge_is_400(stories, path, raw):
    r = post(stories, path, data=raw, timeout=60)
    assert_error(r, 400)
    assert_alive(stories)


@pytest.mark.parametrize("path, raw", [
    ("/generate", f'{{"text": "hi", "priority": {2**63}, '
                  '"sampling_params": {"max_new_tokens": 1}}'),
    ("/generate", f'{{"text": "hi", "priority": {-2**63 - 1}, '
                  '"sampling_params": {"max_new_tokens": 1}}'),
    (COMPLETIONS, f'{{"prompt": "hi", "max_tokens": 1, "priority": {2**63}}}'),
    (CHAT, f'{{"messages": {MSG}, "max_tokens": 1, "priority": {2**64}}}'),
    ("/generate", gen('"max_new_tokens": 1, "temperature": 1e-999')),
    ("/generate", gen('"max_new_tokens": 1, "top_k": -1')),
    ("/generate", gen(f'"max_new_tokens": 1, "top_k": {2**63}')),
    ("/generate", f'{{"text": "hi", "logprob_start_len": {-2**63}, "return_logprob": true, '
                  '"sampling_params": {"max_new_tokens": 1}}'),
])
def test_numeric_edge_is_not_5xx(stories, path, raw):
    r = post(stories, path, data=raw, timeout=60)
    assert r.status_code < 500, r.text[:300]
    assert_alive(stories)
