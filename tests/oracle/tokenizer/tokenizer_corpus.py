"""Deterministic tokenizer test corpus (>= 2,000 strings).

`build_corpus()` returns a list of dicts {"kind": str, "text": str} and, for the invalid-UTF-8
entries, "raw_hex": the ill-formed bytes (their "text" is Python's lossy decoding of them, i.e.
what an HTTP layer hands the tokenizer after replacing bad bytes with U+FFFD).

Run `python tokenizer_corpus.py OUT.jsonl` to write it out for inspection. The same seed always gives
the same corpus, so failures are reproducible by index.
"""

import json
import random
import sys

SEED = 20261122

WORDS = (
    "the quick brown fox jumps over lazy dog time person year way day thing man world life hand "
    "part child eye woman place work week case point government company number group problem fact "
    "be have do say get make go know take see come think look want give use find tell ask seem "
    "feel try leave call good new first last long great little own other old right big high "
    "different small large next early young important few public bad same able tokenizer model "
    "server stream batch cache prefix radix kernel attention Paris London OpenAI GPT LLaMA Qwen"
).split()
CONTRACTIONS = ["I'm", "you're", "it's", "don't", "can't", "we've", "they'll", "she'd", "IT'S",
                "Don'T", "o'clock", "rock'n'roll", "'quoted'", "\"double\""]
PUNCT = [".", ",", "!", "?", ";", ":", "...", " -", " --", "—", "…", "(", ")", "[", "]", "{", "}"]

CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "const add = (a, b) => a + b; // arrow\n",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
    "if __name__ == '__main__':\n    main()\n",
    "    indented    with    spaces\n\t\ttabs\n",
    "x=[1,2,3];y={'a':1,\"b\":[None,True,False]}",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "<div class=\"row\"><span>&amp; &lt;tag&gt;</span></div>",
    "$ ls -la | grep '\\.py$' && echo \"done\" > /dev/null 2>&1",
    "a += b ** 2 // 3 % 4 ^ 5 | 6 & ~7 << 8 >> 9",
    "```python\nprint('hi')\n```",
    "{\"key\": [1.5e-3, -2, \"\\u00e9\"], \"nested\": {\"k\": null}}",
    "    \n    \n\n\t \n",
]

CJK = ["你好，世界！", "我爱自然语言处理。", "日本語のテキストです。", "ひらがなとカタカナ", "東京都渋谷区",
       "한국어 문장입니다.", "안녕하세요 세계", "中文English混合text", "繁體中文測試", "漢字かな交じり文",
       "第一章 总则", "２０２６年１１月２２日", "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ"]
OTHER_SCRIPTS = ["مرحبا بالعالم", "اللغة العربية جميلة", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
                 "Привет, мир!", "Γειά σου Κόσμε", "Ελληνικά κείμενα", "Tiếng Việt có dấu",
                 "Ünïcödé çhâràctèrs", "Straße über Öl", "ﷺ ﷽", "ქართული ენა", "Հայերեն"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "1️⃣", "❤️", "🧑🏿‍💻", "👩‍❤️‍💋‍👨", "🤖", "✨🎉",
         "🫠", "🐈‍⬛", "👁️‍🗨️", "©®™", "∑∫√∞≠≈", "→←↑↓", "★☆♠♣"]
COMBINING = ["e\u0301", "a\u0300\u0316", "n\u0303", "Z\u0351\u0352\u0353\u0354\u0355", "o\u0308\u0304",
             "\u0915\u094d\u0937", "\u1100\u1161\u11a8", "i\u0307", "A\u030a", "\u00c5", "\u212b",
             "\ufb01", "\u2460", "x\u20dd", "\u0647\u0670"]
WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u3000", "\u2003",
              "\u2028", "\u200b", "\t\t ", "\f", "\v", " " * 17]
SPECIAL = ["<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>",
           "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<start_of_turn>", "<end_of_turn>",
           "<bos>", "<eos>", "<pad>", "<think>", "</think>", "<tool_call>", "<｜begin▁of▁sentence｜>",
           "<｜User｜>", "<｜Assistant｜>", "<|fim_prefix|>", "[INST]", "<mask>", "<0x0A>", "▁"]


def _sentence(rng):
    n = rng.randint(3, 18)
    words = []
    for _ in range(n):
        w = rng.choice(WORDS) if rng.random() > 0.15 else rng.choice(CONTRACTIONS)
        if rng.random() < 0.1:
            w = w.capitalize() if rng.random() < 0.5 else w.upper()
        words.append(w)
    s = " ".join(words)
    return s[0].upper() + s[1:] + rng.choice([".", "!", "?", "", "...", ";"])


def _number(rng):
    forms = [
        lambda: str(rng.randint(0, 10 ** rng.randint(1, 15))),
        lambda: f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 6)}f}",
        lambda: f"{rng.randint(1, 9999):,}",
        lambda: f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        lambda: f"+1 ({rng.randint(200, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
        lambda: f"{rng.randint(0, 100)}% of {rng.randint(1, 10**6)} items cost ${rng.randint(1, 999)}.{rng.randint(0, 99):02d}",
        lambda: f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}",
        lambda: f"{rng.random():.3e}",
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40))),
        lambda: f"0x{rng.getrandbits(32):08X}",
        lambda: rng.choice(["٣٤٥", "१२३", "Ⅻ", "½ ¾", "²³", "①②"]),
    ]
    return rng.choice(forms)()


def _whitespace_mix(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(WHITESPACE) * rng.randint(1, 3))
        if rng.random() < 0.6:
            parts.append(rng.choice(WORDS))
    return "".join(parts)


def _special_mix(rng):
    parts = []
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        if r < 0.45:
            parts.append(rng.choice(SPECIAL))
        elif r < 0.8:
            parts.append(rng.choice(WORDS))
        else:
            parts.append(rng.choice(WHITESPACE))
        if rng.random() < 0.4:
            parts.append(" ")
    return "".join(parts)


def _mixed(rng):
    pools = [WORDS, CJK, OTHER_SCRIPTS, EMOJI, COMBINING, PUNCT, CONTRACTIONS, WHITESPACE]
    out = []
    for _ in range(rng.randint(2, 10)):
        out.append(rng.choice(rng.choice(pools)))
        if rng.random() < 0.5:
            out.append(" ")
    return "".join(out)


def _invalid_bytes(rng):
    good = rng.choice(WORDS + CJK + EMOJI).encode("utf-8")
    bad = rng.choice([b"\xff", b"\xc0\xaf", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\x80\x80",
                      b"\xf5\x80\x80\x80", b"\xe0\x80\x80", bytes([rng.randint(0x80, 0xff)])])
    cut = rng.randint(0, len(good))
    return good[:cut] + bad + good[cut:] + rng.choice([b"", b" tail", b"\xc3"])


def build_corpus():
    rng = random.Random(SEED)
    corpus = []

    def add(kind, text):
        corpus.append({"kind": kind, "text": text})

    for s in CODE + CJK + OTHER_SCRIPTS + EMOJI + COMBINING + WHITESPACE + SPECIAL + CONTRACTIONS:
        add("fixed", s)
    add("fixed", "")
    for _ in range(500):
        add("prose", " ".join(_sentence(rng) for _ in range(rng.randint(1, 4))))
    for _ in range(200):
        snippet = rng.choice(CODE)
        add("code", snippet if rng.random() < 0.3 else snippet.replace("x", rng.choice(WORDS)))
    for _ in range(250):
        add("numbers", _number(rng) + (" " + _number(rng) if rng.random() < 0.5 else ""))
    for _ in range(200):
        add("whitespace", _whitespace_mix(rng))
    for _ in range(150):
        add("cjk", "".join(rng.choice(CJK) for _ in range(rng.randint(1, 3))))
    for _ in range(120):
        add("scripts", " ".join(rng.choice(OTHER_SCRIPTS) for _ in range(rng.randint(1, 3))))
    for _ in range(120):
        add("emoji", "".join(rng.choice(EMOJI + [" ", "ok", "!"]) for _ in range(rng.randint(1, 6))))
    for _ in range(100):
        add("combining", "".join(rng.choice(COMBINING + WORDS[:5]) for _ in range(rng.randint(1, 5))))
    for _ in range(200):
        add("special", _special_mix(rng))
    for _ in range(150):
        add("mixed", _mixed(rng))
    for _ in range(60):
        raw = _invalid_bytes(rng)
        corpus.append({"kind": "invalid_utf8", "text": raw.decode("utf-8", errors="replace"),
                       "raw_hex": raw.hex()})
    long_text = " ".join(_sentence(rng) for _ in range(60)) + "\n\n" + "".join(CODE)
    add("long", long_text)
    return corpus


if __name__ == "__main__":
    items = build_corpus()
    with open(sys.argv[1] if len(sys.argv) > 1 else "corpus.jsonl", "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(len(items), "strings")
