package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/base64"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
)

// r50kBase is tiktoken's r50k_base.tiktoken (GPT-2's vocabulary: one line
// "base64(token bytes) rank" per token, rank == id), gzipped. The file is
// the one OpenAI publishes (sha256 306cd27f...dd930, checked by the
// tests), taken from a package registry; RANKS.md says where and how.
//
//go:embed r50k_base.tiktoken.gz
var r50kBase []byte

const (
	gpt2Vocab = 50257
	gpt2EOT   = 50256
	eotText   = "<|endoftext|>"
)

func init() {
	constructors["gpt2"] = func() (Tokenizer, error) { return loadGPT2() }
}

var gpt2Once = sync.OnceValues(func() (*GPT2, error) { return parseRanks(r50kBase) })

// loadGPT2 returns the one GPT2 tokenizer, built on first use (about 20
// ms) from the embedded ranks.
func loadGPT2() (*GPT2, error) { return gpt2Once() }

// GPT2 is GPT-2's byte-level BPE: tiktoken's "gpt2" (r50k_base)
// encoding, 50257 ids, 50256 being <|endoftext|>.
//
// Encode splits the text with GPT-2's pre-tokenization pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (a hand-written scanner with the regular expression's leftmost-first
// semantics; \s is Unicode's White_Space, as in tiktoken) and encodes
// each piece by tiktoken's byte-pair merge: the adjacent pair whose
// bytes have the lowest rank is joined first, leftmost on ties, until no
// pair is a token. Text that is not valid UTF-8 is encoded too: each
// invalid byte is a character of the pattern's last class (neither
// letter, number nor space), so Decode(Encode(s)) == s for every s.
//
// The zero value and a nil *GPT2 are the same tokenizer as New("gpt2")
// returns: their methods use its tables.
type GPT2 struct {
	ranks  rankTable  // token bytes -> id (no special token)
	tokens []string   // id -> bytes; tokens[50256] is "<|endoftext|>"
	bytes  [256]int32 // the id of each single byte
}

// rankTable maps token bytes to ids: open addressing with linear probing
// over a power-of-two table of (hash tag << 32 | id+1), 0 for empty. It
// made the encoder about twice as fast as a Go map did: lookups dominate the
// encoder's time, and the slots are 8 bytes (a 1 MiB table) against the
// map's groups of string headers.
type rankTable struct {
	seed   maphash.Seed
	slots  []uint64
	tokens []string
}

// newRankTable indexes tokens[:n], or returns the first token that is
// there twice.
func newRankTable(tokens []string, n int) (rankTable, error) {
	size := 1
	for size < 2*n { // load factor below 1/2
		size *= 2
	}
	t := rankTable{seed: maphash.MakeSeed(), slots: make([]uint64, size), tokens: tokens}
	for id := range n {
		h := maphash.String(t.seed, tokens[id])
		i := h & uint64(size-1)
		for t.slots[i] != 0 {
			if tokens[t.slots[i]&0xFFFFFFFF-1] == tokens[id] {
				return t, fmt.Errorf("token %q twice", tokens[id])
			}
			i = (i + 1) & uint64(size-1)
		}
		t.slots[i] = h&^0xFFFFFFFF | uint64(id+1)
	}
	return t, nil
}

// get returns the id of the token s, if s is one.
func (t *rankTable) get(s string) (int32, bool) {
	h := maphash.String(t.seed, s)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return 0, false
		}
		if v&^0xFFFFFFFF == h&^0xFFFFFFFF {
			if id := int32(v&0xFFFFFFFF) - 1; t.tokens[id] == s {
				return id, true
			}
		}
	}
}

// parseRanks reads a gzipped .tiktoken file of GPT-2's 50256 ranks.
func parseRanks(gz []byte) (*GPT2, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks: %w", err)
	}
	g := &GPT2{tokens: make([]string, gpt2Vocab)}
	sc := bufio.NewScanner(zr)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		// A line past the last rank has no slot in tokens (the one after
		// it is the end-of-text token's): refused, not written out of range.
		if n == gpt2EOT {
			return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks hold more than %d tokens (line %d)", gpt2EOT, n+1)
		}
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks: line %d: %q", n+1, line)
		}
		tok := make([]byte, base64.StdEncoding.DecodedLen(sp))
		k, err := base64.StdEncoding.Decode(tok, line[:sp])
		if err != nil || k == 0 {
			return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks: line %d: %q", n+1, line)
		}
		rank, err := strconv.Atoi(string(line[sp+1:]))
		if err != nil || rank != n {
			return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks: line %d has rank %q, want %d", n+1, line[sp+1:], n)
		}
		s := string(tok[:k])
		g.tokens[rank] = s
		n++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks: %w", err)
	}
	if n != gpt2EOT {
		return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks hold %d tokens, want %d", n, gpt2EOT)
	}
	g.tokens[gpt2EOT] = eotText
	if g.ranks, err = newRankTable(g.tokens, gpt2EOT); err != nil {
		return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks: %w", err)
	}
	for b := range 256 {
		id, ok := g.ranks.get(string([]byte{byte(b)}))
		if !ok {
			return nil, fmt.Errorf("tokenizer gpt2: the embedded ranks lack byte %#x", b)
		}
		g.bytes[b] = id
	}
	return g, nil
}

// built returns g, or the built-in tokenizer when g has no tables (the
// zero value, or nil).
func (g *GPT2) built() *GPT2 {
	if g != nil && g.tokens != nil {
		return g
	}
	b, err := loadGPT2()
	if err != nil { // the embedded ranks, which the tests parse: never
		panic(err)
	}
	return b
}

func (g *GPT2) Name() string     { return "gpt2" }
func (g *GPT2) VocabSize() int   { return gpt2Vocab }
func (g *GPT2) EOT() (int, bool) { return gpt2EOT, true }

// Encode returns the ids of text; "<|endoftext|>" in text is plain text
// (tiktoken's encode_ordinary).
//
// A long text's pieces that are not tokens themselves are merged once
// each: their ids are cached for the rest of the call (words repeat).
func (g *GPT2) Encode(text string) []int {
	g = g.built()
	ids := make([]int, 0, len(text)/4+1)
	var parts []int // scratch of merge
	var cache map[string]uint64
	if len(text) >= cacheFrom {
		cache = make(map[string]uint64)
	}
	for i := 0; i < len(text); {
		j := nextPiece(text, i)
		piece := text[i:j]
		i = j
		if id, ok := g.ranks.get(piece); ok {
			ids = append(ids, int(id))
			continue
		}
		if cache == nil {
			ids, parts = g.merge(ids, piece, parts)
			continue
		}
		// The cache holds where the piece's ids first were in ids.
		if at, ok := cache[piece]; ok {
			ids = append(ids, ids[at>>32:at>>32+at&0xFFFFFFFF]...)
			continue
		}
		start := len(ids)
		ids, parts = g.merge(ids, piece, parts)
		if len(cache) < maxCached && start < 1<<32 {
			cache[piece] = uint64(start)<<32 | uint64(len(ids)-start)
		}
	}
	return ids
}

// Texts of cacheFrom bytes or more cache the ids of up to maxCached
// pieces.
const (
	cacheFrom = 4 << 10
	maxCached = 1 << 16
)

// merge appends the ids of piece (not itself a token, so at least two
// bytes long) by tiktoken's byte-pair merge. parts is scratch space,
// returned for reuse.
//
// parts holds the start of each part and, after it, the rank of the
// part joined with the next one (math.MaxInt32: not a token); a piece of
// n bytes starts as n parts. Each round joins the pair of lowest rank,
// the leftmost on ties, and recomputes the ranks of the pairs around it.
// Pieces are short (a word), so the linear scans cost less than a heap.
func (g *GPT2) merge(ids []int, piece string, parts []int) ([]int, []int) {
	if len(piece) > longPiece {
		return g.mergeLong(ids, piece), parts
	}
	return g.mergeShort(ids, piece, parts)
}

func (g *GPT2) mergeShort(ids []int, piece string, parts []int) ([]int, []int) {
	n := len(piece)
	parts = parts[:0]
	for i := range n {
		parts = append(parts, i, math.MaxInt32)
	}
	parts = append(parts, n, math.MaxInt32) // the end
	// rank of the pair starting at part k (k+2 < number of entries).
	rank := func(k int) int {
		end := 2*k + 4
		if end >= len(parts) {
			return math.MaxInt32
		}
		if id, ok := g.ranks.get(piece[parts[2*k]:parts[end]]); ok {
			return int(id)
		}
		return math.MaxInt32
	}
	np := n // number of parts
	for k := range np - 1 {
		parts[2*k+1] = rank(k)
	}
	for np > 1 {
		best, at := math.MaxInt32, -1
		for k := range np - 1 {
			if r := parts[2*k+1]; r < best {
				best, at = r, k
			}
		}
		if at < 0 {
			break
		}
		// Join part at and at+1: drop at+1's entry.
		copy(parts[2*at+2:], parts[2*at+4:])
		parts = parts[:len(parts)-2]
		np--
		parts[2*at+1] = rank(at)
		if at > 0 {
			parts[2*at-1] = rank(at - 1)
		}
	}
	for k := range np {
		p := piece[parts[2*k]:parts[2*k+2]]
		if len(p) == 1 {
			ids = append(ids, int(g.bytes[p[0]]))
		} else {
			id, _ := g.ranks.get(p)
			ids = append(ids, int(id))
		}
	}
	return ids, parts
}

// Pieces longer than longPiece bytes (a word without spaces: a DNA
// sequence, base64, minified code) are merged by mergeLong, in O(n log
// n) instead of merge's O(n²).
const longPiece = 256

// mergeLong is merge for long pieces, with the same result: the parts
// are a linked list and the pairs' ranks a heap ordered by (rank, start),
// so the lowest rank, leftmost on ties, comes first; an entry whose pair
// has changed since it was pushed is skipped when popped. Its indexes are
// int32 (half the memory) while the piece's length fits, int beyond: a
// piece of 2 GiB or more (one line of a multi-GB DNA file) wrapped int32
// negative and gave no ids at all.
func (g *GPT2) mergeLong(ids []int, piece string) []int {
	if len(piece) <= math.MaxInt32 {
		return mergeLongAt[int32](g, ids, piece)
	}
	return mergeLongAt[int](g, ids, piece)
}

// pieceIndex is the type of mergeLongAt's byte offsets into a piece.
type pieceIndex interface{ int32 | int }

// mergeLongAt is mergeLong with offsets of type I, which must hold the
// piece's length.
func mergeLongAt[I pieceIndex](g *GPT2, ids []int, piece string) []int {
	n := I(len(piece))
	next := make([]I, n) // the start of the next part (n at the end); -1: joined into its left neighbour
	prev := make([]I, n)
	for i := I(0); i < n; i++ {
		next[i], prev[i] = i+1, i-1
	}
	h := make(pairHeap[I], 0, n)
	// push queues the pair of parts starting at i (if it is a token).
	push := func(i I) {
		j := next[i]
		if j >= n {
			return
		}
		if id, ok := g.ranks.get(piece[i:next[j]]); ok {
			h.push(pairEntry[I]{rank: id, start: i, end: next[j]})
		}
	}
	for i := I(0); i < n-1; i++ {
		push(i)
	}
	for len(h) > 0 {
		e := h.pop()
		i := e.start
		// Stale: i was joined into its left neighbour, or its pair no
		// longer ends where it did.
		if next[i] < 0 || next[i] >= n || next[next[i]] != e.end {
			continue
		}
		j := next[i]
		next[i] = next[j]
		if next[j] < n {
			prev[next[j]] = i
		}
		next[j] = -1
		push(i)
		if p := prev[i]; p >= 0 {
			push(p)
		}
	}
	for i := I(0); i < n; i = next[i] {
		id, _ := g.ranks.get(piece[i:next[i]])
		ids = append(ids, int(id))
	}
	return ids
}

// pairEntry is a pair of adjacent parts: the first starts at start, the
// second ends at end; rank is the id of their joined bytes.
type pairEntry[I pieceIndex] struct {
	rank       int32
	start, end I
}

// pairHeap is a binary min-heap of pairs by (rank, start).
type pairHeap[I pieceIndex] []pairEntry[I]

func (e pairEntry[I]) less(f pairEntry[I]) bool {
	return e.rank < f.rank || e.rank == f.rank && e.start < f.start
}

func (h *pairHeap[I]) push(e pairEntry[I]) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].less(a[p]) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *pairHeap[I]) pop() pairEntry[I] {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(a) && a[l].less(a[m]) {
			m = l
		}
		if r := l + 1; r < len(a) && a[r].less(a[m]) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// Decode returns the text of ids; 50256 decodes to "<|endoftext|>".
func (g *GPT2) Decode(ids []int) (string, error) {
	g = g.built()
	n := 0
	for i, id := range ids {
		if id < 0 || id >= gpt2Vocab {
			return "", fmt.Errorf("tokenizer gpt2: id %d at position %d is out of range [0, %d)", id, i, gpt2Vocab)
		}
		n += len(g.tokens[id])
	}
	b := make([]byte, 0, n)
	for _, id := range ids {
		b = append(b, g.tokens[id]...)
	}
	return string(b), nil
}

// Character classes of the pre-tokenization pattern.
const (
	classOther  = iota // [^\s\p{L}\p{N}], and every byte that is not valid UTF-8
	classLetter        // \p{L}
	classNumber        // \p{N}
	classSpace         // \s: Unicode's White_Space
)

var asciiClass = func() (c [utf8.RuneSelf]uint8) {
	for b := range utf8.RuneSelf {
		c[b] = classOf(rune(b))
	}
	return c
}()

func classOf(r rune) uint8 {
	switch {
	case unicode.IsLetter(r) || r > unicode.MaxLatin1 && unicode.Is(newerLetters, r):
		return classLetter
	case unicode.IsNumber(r) || r > unicode.MaxLatin1 && unicode.Is(newerNumbers, r):
		return classNumber
	case unicode.IsSpace(r): // White_Space: \t-\r, space, U+0085, U+00A0 and categories Zs, Zl, Zp
		return classSpace
	}
	return classOther
}

// newerLetters and newerNumbers are the letters (\p{L}) and numbers
// (\p{N}) that Unicode 15.1 and 16.0 added, which Go's unicode package
// (Unicode 15.0) does not know and tiktoken's pattern engine does: CJK
// Extension I, Egyptian Hieroglyphs Extended-A, the scripts of 16.0 and
// their digits. (Unicode 17.0's are not letters or numbers in tiktoken
// yet.)
var newerLetters = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x1c89, 0x1c8a, 1}, {0xa7cb, 0xa7cd, 1}, {0xa7da, 0xa7dc, 1},
	},
	R32: []unicode.Range32{
		{0x105c0, 0x105f3, 1}, {0x10d4a, 0x10d65, 1}, {0x10d6f, 0x10d85, 1},
		{0x10ec2, 0x10ec4, 1}, {0x11380, 0x11389, 1}, {0x1138b, 0x1138e, 3},
		{0x11390, 0x113b5, 1}, {0x113b7, 0x113d1, 26}, {0x113d3, 0x113d3, 1},
		{0x11bc0, 0x11be0, 1}, {0x13460, 0x143fa, 1}, {0x16100, 0x1611d, 1},
		{0x16d40, 0x16d6c, 1}, {0x18cff, 0x18cff, 1}, {0x1e5d0, 0x1e5ed, 1},
		{0x1e5f0, 0x1e5f0, 1}, {0x2ebf0, 0x2ee5d, 1},
	},
}

var newerNumbers = &unicode.RangeTable{
	R32: []unicode.Range32{
		{0x10d40, 0x10d49, 1}, {0x116d0, 0x116e3, 1}, {0x11bf0, 0x11bf9, 1},
		{0x16130, 0x16139, 1}, {0x16d70, 0x16d79, 1}, {0x1ccf0, 0x1ccf9, 1},
		{0x1e5f1, 0x1e5fa, 1},
	},
}

// charAt returns the class and the width of the character at s[i]; a
// byte that does not start a valid UTF-8 sequence is one character.
func charAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return classOther, 1
	}
	return classOf(r), n
}

// nextPiece returns the end of the piece of s that starts at i < len(s):
// the match of GPT-2's pattern there, its alternatives tried in order.
func nextPiece(s string, i int) int {
	if s[i] == '\'' && i+1 < len(s) { // 's|'t|'re|'ve|'m|'ll|'d
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	class, n := charAt(s, i)
	j := i + n
	if s[i] == ' ' && j < len(s) {
		// " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a space joins the
		// run of letters, numbers or others after it.
		if c, m := charAt(s, j); c != classSpace {
			class, j = c, j+m
		}
	}
	if class != classSpace {
		for j < len(s) {
			c, m := charAt(s, j)
			if c != class {
				break
			}
			j += m
		}
		return j
	}
	// "\s+(?!\S)|\s+": a run of spaces at the end of s is one piece; a run
	// before something else leaves its last space to that something (the
	// run's longest part followed by a space), unless the run is one space.
	last := i
	for j < len(s) {
		c, m := charAt(s, j)
		if c != classSpace {
			break
		}
		last = j
		j += m
	}
	if j < len(s) && last > i {
		return last
	}
	return j
}
