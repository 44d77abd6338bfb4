package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func gpt2(t testing.TB) Tokenizer {
	tok, err := New("gpt2")
	require.NoError(t, err)
	return tok
}

// The embedded ranks are OpenAI's r50k_base.tiktoken byte for byte (the
// sha256 tiktoken checks it against).
func TestEmbeddedRanksAreOpenAIs(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(r50kBase))
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.Equal(t, "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", hex.EncodeToString(sum[:]))
}

func TestGPT2Basics(t *testing.T) {
	tok := gpt2(t)
	require.Equal(t, "gpt2", tok.Name())
	require.Equal(t, 50257, tok.VocabSize())
	eot, ok := tok.EOT()
	require.True(t, ok)
	require.Equal(t, 50256, eot)
	s, err := tok.Decode([]int{15496, 11, 995, 0, 50256})
	require.NoError(t, err)
	require.Equal(t, "Hello, world!<|endoftext|>", s)
	_, err = tok.Decode([]int{0, 50257})
	require.ErrorContains(t, err, "id 50257 at position 1 is out of range [0, 50257)")
	_, err = tok.Decode([]int{-3})
	require.ErrorContains(t, err, "id -3 at position 0")
	tok2 := gpt2(t)
	require.Same(t, tok, tok2, "built once")
	require.Equal(t, []string{"byte", "gpt2"}, Names())
}

// TestGPT2Reference compares Encode with the encodings of
// testdata/gpt2_reference.jsonl, made by gen_reference.py (OpenAI's GPT-2
// algorithm in Python on GPT-2's encoder.json and vocab.bpe).
func TestGPT2Reference(t *testing.T) {
	tok := gpt2(t)
	f, err := os.Open("testdata/gpt2_reference.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var c struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		if c.IDs == nil {
			c.IDs = []int{}
		}
		require.Equal(t, c.IDs, tok.Encode(c.Text), "%q", c.Text)
		back, err := tok.Decode(c.IDs)
		require.NoError(t, err)
		require.Equal(t, c.Text, back)
		n++
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, n, 70)
}

// Round trips of text that no reference covers: invalid UTF-8 and every
// class boundary.
func TestGPT2RoundTrip(t *testing.T) {
	tok := gpt2(t)
	for _, s := range []string{
		"", "\xff", "a\xffb\xc3 \xe2\x82", "\xc3\xa9\xe9", " \x80\x81 x", "'\xff", "it'\xffs",
		strings.Repeat("ab", 3000), strings.Repeat(" ", 1000) + "x", strings.Repeat("🙂", 500),
		"<|endoftext|><|endoftext|>",
	} {
		ids := tok.Encode(s)
		for _, id := range ids {
			require.True(t, id >= 0 && id < 50256, "%q: id %d", s, id)
		}
		back, err := tok.Decode(ids)
		require.NoError(t, err)
		require.Equal(t, s, back)
	}
	require.Equal(t, []int{27, 91, 437, 1659, 5239, 91, 29}, tok.Encode("<|endoftext|>"), "plain text, not the special token")
}

// piecesByRegexp splits s with Go's regexp package (leftmost-first, like
// the pattern's engine; an invalid UTF-8 byte is U+FFFD, a character of
// the last class, as nextPiece treats it), emulating "\s+(?!\S)", which
// RE2 lacks: a run of spaces before a non-space gives its last space to
// what follows, unless it is a single space. \p{L} and \p{N} include the
// newer letters and numbers that Go's tables lack.
var gpt2Pattern = func() *regexp.Regexp {
	L, N := `\p{L}`+classRanges(newerLetters), `\p{N}`+classRanges(newerNumbers)
	return regexp.MustCompile(`'s|'t|'re|'ve|'m|'ll|'d| ?[` + L + `]+| ?[` + N + `]+| ?[^\t\n\v\f\r \x{85}\p{Z}` + L + N + `]+|[\t\n\v\f\r \x{85}\p{Z}]+`)
}()

// classRanges writes the ranges of t for a regexp character class.
func classRanges(t *unicode.RangeTable) string {
	var sb strings.Builder
	for _, r := range t.R16 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			fmt.Fprintf(&sb, `\x{%x}`, c)
		}
	}
	for _, r := range t.R32 {
		if r.Stride == 1 {
			fmt.Fprintf(&sb, `\x{%x}-\x{%x}`, r.Lo, r.Hi)
			continue
		}
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			fmt.Fprintf(&sb, `\x{%x}`, c)
		}
	}
	return sb.String()
}

func piecesByRegexp(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		loc := gpt2Pattern.FindStringIndex(s[i:])
		if loc == nil || loc[0] != 0 {
			panic("the pattern matches every character")
		}
		end := i + loc[1]
		piece := s[i:end]
		if spaceRun.MatchString(piece) {
			if end < len(s) && utf8.RuneCountInString(piece) > 1 {
				_, w := utf8.DecodeLastRuneInString(piece)
				end -= w
			}
		}
		out = append(out, s[i:end])
		i = end
	}
	return out
}

var spaceRun = regexp.MustCompile(`^[\t\n\v\f\r \x{85}\p{Z}]+$`)

func pieces(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := nextPiece(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func TestPieces(t *testing.T) {
	for s, want := range map[string][]string{
		"Hello world":    {"Hello", " world"},
		"it's I'll":      {"it", "'s", " I", "'ll"},
		"   x":           {"  ", " x"},
		"a  \n\n b":      {"a", "  \n\n", " b"},
		"x   ":           {"x", "   "},
		"\t\tx":          {"\t", "\t", "x"},
		"!'s":            {"!'", "s"},
		" 's":            {" '", "s"},
		"abc123 45 !?":   {"abc", "123", " 45", " !?"},
		"a\u3000\u3000b": {"a", "\u3000", "\u3000", "b"},
		"a\xff\xfe b":    {"a", "\xff\xfe", " b"},
		"<|endoftext|>":  {"<|", "endoftext", "|>"},
		"'S 'RE 're 'x":  {"'", "S", " '", "RE", " '", "re", " '", "x"}, // a space before an apostrophe takes it
		"x're'll":        {"x", "'re", "'ll"},
	} {
		require.Equal(t, want, pieces(s), "%q", s)
		require.Equal(t, want, piecesByRegexp(s), "%q (regexp)", s)
	}
}

// FuzzGPT2 checks, for any input: the split matches the regexp's, the
// ids are ordinary tokens, and Decode(Encode(s)) == s.
func FuzzGPT2(f *testing.F) {
	for _, s := range []string{"Hello, world!", "it's  \n\n x", "\xff\u3000 🙂 12 ab'll", "   ", "a\tb\r\n"} {
		f.Add(s)
	}
	tok := gpt2(f)
	f.Fuzz(func(t *testing.T, s string) {
		require.Equal(t, piecesByRegexp(s), pieces(s), "%q", s)
		ids := tok.Encode(s)
		for _, id := range ids {
			require.True(t, id >= 0 && id < 50256, "%q: id %d", s, id)
		}
		back, err := tok.Decode(ids)
		require.NoError(t, err)
		require.Equal(t, s, back)
		require.Equal(t, ids, encodeParallel(tok, s, 2, 3), "%q in chunks", s)
	})
}

// BenchmarkGPT2Encode reports MB/s on a mixed text (prose, code, numbers,
// Unicode).
func BenchmarkGPT2Encode(b *testing.B) {
	tok := gpt2(b)
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		sb.WriteString("The quick brown fox jumps over the lazy dog; it's 1234 times faster!\n")
		sb.WriteString("\tfunc f(x int) (int, error) { return x*2 + 1, nil } // café 日本語 🙂\n")
		sb.WriteString("supercalifragilisticexpialidocious    antidisestablishmentarianism\n\n")
	}
	s := sb.String()
	b.SetBytes(int64(len(s)))
	b.ResetTimer()
	for range b.N {
		tok.Encode(s)
	}
}

// parseRanks refuses a damaged ranks file with an error, never a panic.
func TestParseRanksRefusesBadFiles(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	for in, msg := range map[string]string{
		"not gzip":         "the embedded ranks",
		"\x00":             "",
		"IQ== 0\nIg== 5\n": "line 2 has rank",
		"IQ== 0\nIQ== 1\n": "hold 2 tokens, want 50256",
		"IQ==\n":           "line 1",
		"!!!! 0\n":         "line 1",
	} {
		data := gz(in)
		if in == "not gzip" {
			data = []byte(in)
		}
		_, err := parseRanks(data)
		require.ErrorContains(t, err, msg, "%q", in)
	}
	// Every token once, but one of them twice: refused by the table.
	_, err := newRankTable([]string{"a", "b", "a"}, 3)
	require.ErrorContains(t, err, `token "a" twice`)
}

// A ranks file with more tokens than GPT-2's is refused with an error:
// the lines past the end-of-text slot were written into tokens by rank,
// out of its range, and parseRanks panicked instead.
func TestParseRanksRefusesExtraTokens(t *testing.T) {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	for i := range gpt2Vocab + 1 {
		fmt.Fprintf(w, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(i))), i)
	}
	require.NoError(t, w.Close())
	var err error
	require.NotPanics(t, func() { _, err = parseRanks(b.Bytes()) })
	require.ErrorContains(t, err, "more than 50256 tokens")
}

// EncodeParallel equals Encode, for chunks small enough to cut every
// reference text many times.
func TestEncodeParallel(t *testing.T) {
	var all strings.Builder
	f, err := os.Open("testdata/gpt2_reference.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct{ Text string }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		all.WriteString(c.Text)
		all.WriteString("\n")
	}
	text := all.String() + "a\nb\n\nc \nd\n e\n'sf\n"
	for _, name := range Names() {
		tok, err := New(name)
		require.NoError(t, err)
		want := tok.Encode(text)
		for _, chunk := range []int{1, 7, 100, 4096} {
			require.Equal(t, want, encodeParallel(tok, text, 3, chunk), "%s, chunks of %d", name, chunk)
		}
		require.Equal(t, want, EncodeParallel(tok, text, 0))
	}
	require.Equal(t, 2, gpt2Cut("a\nb", 0))
	require.Equal(t, 4, gpt2Cut("a \nb", 0), "a space before the newline: no cut")
	require.Equal(t, 11, gpt2Cut("a\n b\n\nc\t\nd\ne", 0))
}

// mergeLong (the heap, with int32 offsets and with the int ones of
// pieces of 2 GiB or more) and mergeShort (linear scans) agree on pieces
// of every kind, and a long word costs O(n log n): 1 MB of letters with no
// space encodes in well under a second.
func TestMergeLong(t *testing.T) {
	g, err := loadGPT2()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{"ab", "abcdefghijklmnopqrstuvwxyz", "ACGT", "aaaaaaab", "日本語中文", "0123456789", "!?.,;:-=+*"}
	for i := range 300 {
		alpha := []rune(alphabets[i%len(alphabets)])
		var sb strings.Builder
		for range 1 + rng.IntN(400) {
			sb.WriteRune(alpha[rng.IntN(len(alpha))])
		}
		piece := sb.String()
		if i%5 == 0 {
			piece = " " + piece
		}
		short, _ := g.mergeShort(nil, piece, nil)
		require.Equal(t, short, g.mergeLong(nil, piece), "%q", piece)
		// The int offsets of pieces of 2 GiB or more, on the same pieces.
		require.Equal(t, short, mergeLongAt[int](g, nil, piece), "%q", piece)
	}
	long := strings.Repeat("supercalifragilisticexpialidocious", 30000)
	start := time.Now()
	ids := g.Encode(long)
	// About 0.6 s here (and 10x that under the race detector); the
	// quadratic merge this guards against does not finish in hours.
	require.Less(t, time.Since(start), 60*time.Second)
	// The int offsets on a long piece too (one piece of 1 MB: its merges
	// run long chains of stale heap entries).
	require.Equal(t, ids, mergeLongAt[int](g, nil, long))
	back, err := g.Decode(ids)
	require.NoError(t, err)
	require.Equal(t, long, back)
}

// Letters and numbers that Unicode 15.1 and 16.0 added, which Go's
// unicode tables (15.0) lack, are letters and numbers as in tiktoken:
// the ids are tiktoken's (the npm package tiktoken 1.0.22, r50k_base,
// encode_ordinary).
func TestGPT2NewerUnicode(t *testing.T) {
	tok := gpt2(t)
	for s, want := range map[string][]int{
		"\U0002EDC7'll":          {172, 106, 115, 229, 1183},                       // CJK Extension I (15.1)
		"\U00013460's x":         {172, 241, 239, 254, 338, 2124},                  // Egyptian Hieroglyphs Extended-A (16.0)
		"a\uA7DB're":             {64, 166, 253, 249, 821},                         // a Latin letter of 16.0
		"\U000116D0\U000116D1'd": {172, 239, 249, 238, 172, 239, 249, 239, 1549},   // Myanmar Extended-C digits (16.0)
		" \U0001E5D0\U0001E5F1!": {220, 172, 252, 245, 238, 172, 252, 245, 109, 0}, // Ol Onal: a letter, a digit
		"x\U00010D401":           {87, 172, 238, 113, 222, 16},                     // Garay digit
	} {
		require.Equal(t, want, tok.Encode(s), "%q", s)
	}
	for _, s := range []string{"\U0002EDC7'll", "a\uA7DB're", "\U0001E5D0\U0001E5F1 \U00011390\U000113b6"} {
		require.Equal(t, piecesByRegexp(s), pieces(s), "%q", s)
	}
	require.Equal(t, []string{"\U0002EDC7", "'ll"}, pieces("\U0002EDC7'll"))
}
