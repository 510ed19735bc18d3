"""Request sets for bench_serving.py, built locally from a real tokenizer and a seed.

Every request is a `BenchRequest`: the prompt as text (or token ids), the number of prompt tokens
the tokenizer gives it, and the number of output tokens to ask for (sent with ignore_eos, so the
server generates exactly that many). Datasets follow SGLang's bench_serving semantics:

- `random`: input/output lengths drawn uniformly from [len * range_ratio, len]; each prompt is a
  fresh run of random vocabulary words (no two prompts share a prefix).
- `sharegpt`: synthetic multi-turn chats (no download): each conversation has 1-4 turns with
  long-tailed turn lengths; every user turn becomes one request holding the transcript so far, so
  later turns of a conversation share a growing prefix, as when a chat client re-sends its history.
- `generated-shared-prefix`: num_groups system prompts, each followed by prompts_per_group
  distinct questions ("{system}\\n\\n{question}"), shuffled.

Prompt text is made of single-token words (" word" strings that the tokenizer maps to exactly one
id), so a prompt of N words encodes to N tokens; `WordTokenizer.text_of_length` checks the count
by encoding and trims or extends until it is exact.
"""

import dataclasses
import pathlib
import random
import re


@dataclasses.dataclass
class BenchRequest:
    prompt: object          # str, or list[int] with --prompt-format ids
    prompt_len: int         # tokens, as counted by the benchmark's tokenizer
    output_len: int         # tokens to generate (max_tokens with ignore_eos)


class WordTokenizer:
    """Encodes text with the model's real tokenizer: a GGUF vocabulary read by llama.cpp
    (llama-cpp-python, vocab only) or a Hugging Face tokenizer.json (`tokenizers`)."""

    def __init__(self, path):
        path = pathlib.Path(path)
        if path.suffix == ".gguf":
            import llama_cpp
            self._llama = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
            self.vocab_size = self._llama.n_vocab()
            self._encode = lambda text: self._llama.tokenize(text.encode(), add_bos=False,
                                                             special=False)
            self._decode = lambda ids: self._llama.detokenize(ids).decode("utf-8", "replace")
        else:
            import tokenizers
            file = path / "tokenizer.json" if path.is_dir() else path
            tok = tokenizers.Tokenizer.from_file(str(file))
            self.vocab_size = tok.get_vocab_size()
            self._encode = lambda text: tok.encode(text, add_special_tokens=False).ids
            self._decode = lambda ids: tok.decode(ids)
        self.words = self._single_token_words()
        if len(self.words) < 100:
            raise ValueError(f"{path}: only {len(self.words)} single-token words in the vocabulary")

    def encode(self, text):
        return list(self._encode(text))

    def _single_token_words(self):
        words = []
        for token_id in range(self.vocab_size):
            text = self._decode([token_id])
            if re.fullmatch(r" [a-z]{2,12}", text) and self.encode(text) == [token_id]:
                words.append(text)
        return words

    def text_of_length(self, rng, num_tokens):
        """Random words whose encoding has exactly num_tokens tokens (num_tokens >= 1)."""
        words = [rng.choice(self.words) for _ in range(num_tokens)]
        for _ in range(16):
            text = "".join(words)
            count = len(self.encode(text))
            if count == num_tokens:
                return text
            if count > num_tokens:
                del words[-min(len(words) - 1, count - num_tokens):]
            else:
                words.extend(rng.choice(self.words) for _ in range(num_tokens - count))
        raise RuntimeError(f"cannot make a prompt of exactly {num_tokens} tokens")


def random_lens(rng, full_len, range_ratio, count):
    low = max(int(full_len * range_ratio), 1)
    return [rng.randint(low, max(full_len, low)) for _ in range(count)]


def random_requests(tok, rng, num_prompts, input_len, output_len, range_ratio):
    inputs = random_lens(rng, input_len, range_ratio, num_prompts)
    outputs = random_lens(rng, output_len, range_ratio, num_prompts)
    return [BenchRequest(tok.text_of_length(rng, n), n, m) for n, m in zip(inputs, outputs)]


def _turn_len(rng, median, cap):
    # Long-tailed like ShareGPT turn lengths: lognormal around the median, clipped.
    return max(4, min(cap, int(rng.lognormvariate(0.0, 0.8) * median)))


def sharegpt_requests(tok, rng, num_prompts, max_input_len, max_output_len):
    """Synthetic chats; one request per user turn until num_prompts requests exist."""
    requests = []
    while len(requests) < num_prompts:
        transcript = ""
        for _ in range(rng.randint(1, 4)):
            user = tok.text_of_length(rng, _turn_len(rng, 96, 1024))
            transcript += f"User:{user}\nAssistant:"
            answer_len = _turn_len(rng, 128, max_output_len)
            prompt_len = len(tok.encode(transcript))
            if prompt_len + answer_len > max_input_len + max_output_len or \
                    prompt_len > max_input_len:
                break
            requests.append(BenchRequest(transcript, prompt_len, answer_len))
            if len(requests) == num_prompts:
                break
            # The history continues with an answer of the length the model was asked for.
            transcript += tok.text_of_length(rng, answer_len) + "\n"
    rng.shuffle(requests)
    return requests


def shared_prefix_requests(tok, rng, num_groups, prompts_per_group, system_prompt_len,
                           question_len, output_len, range_ratio):
    system_lens = random_lens(rng, system_prompt_len, range_ratio, num_groups)
    total = num_groups * prompts_per_group
    question_lens = random_lens(rng, question_len, range_ratio, total)
    output_lens = random_lens(rng, output_len, range_ratio, total)
    requests = []
    for group in range(num_groups):
        system = tok.text_of_length(rng, system_lens[group])
        for k in range(prompts_per_group):
            index = group * prompts_per_group + k
            prompt = f"{system}\n\n{tok.text_of_length(rng, question_lens[index])}"
            requests.append(BenchRequest(prompt, len(tok.encode(prompt)), output_lens[index]))
    rng.shuffle(requests)
    return requests


def to_token_ids(tok, requests):
    """Switches every prompt to its token ids (--prompt-format ids)."""
    for r in requests:
        r.prompt = tok.encode(r.prompt)
        r.prompt_len = len(r.prompt)
    return requests
