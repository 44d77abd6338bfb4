package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTextNamedBinRefused: a text file named .bin (no llm.c header) is
// refused with a hint, not read as uint16 ids of its byte pairs (it used
// to train on garbage); the token files of a text, gpt2's or bytes',
// still load.
func TestTextNamedBinRefused(t *testing.T) {
	dir := t.TempDir()
	gpt2, byteTok := mustTokenizer(t, "gpt2"), mustTokenizer(t, "byte")
	text := strings.Repeat("The quick brown fox jumps over the lazy dog, 42 times. Ünïcödé: 日本語のテキスト.\n", 2000)
	for name, body := range map[string]string{"text.bin": text, "odd.bin": text + "x", "cjk.bin": strings.Repeat("日本語のテキスト", 3000)} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		_, err := loadTokens(path, gpt2, 64, nil)
		require.EqualError(t, err, "-data "+path+": no llm.c header, and its first 65536 bytes look like text, not uint16 token ids "+
			"(no NUL byte, nearly all printable or UTF-8): rename it to .txt, or give an llm.c or nanoGPT token file")
	}
	for name, tok := range map[string]string{"gpt2.bin": "gpt2", "bytes.bin": "byte"} {
		ids := mustTokenizer(t, tok).Encode(text)
		u := make([]uint16, len(ids))
		for i, id := range ids {
			u[i] = uint16(id)
		}
		path := filepath.Join(dir, name)
		writeTokenFile(t, path, u, true)
		d, err := loadTokens(path, gpt2, 64, nil)
		require.NoError(t, err, name)
		require.Equal(t, len(u), len(d.train)+len(d.test))
	}
	_, err := loadTokens(filepath.Join(dir, "bytes.bin"), byteTok, 64, nil)
	require.NoError(t, err)
}

// looksLikeText on samples: text and text cut mid-character, not ids.
func TestLooksLikeText(t *testing.T) {
	require.True(t, looksLikeText([]byte("hello\tworld\r\n")))
	require.True(t, looksLikeText([]byte("日本語")[:7]), "cut inside a character")
	require.False(t, looksLikeText(nil))
	require.False(t, looksLikeText([]byte("hello\x00world")))
	require.False(t, looksLikeText([]byte{0x06, 0x01, 0x1a, 0x03, 0x41, 0x02, 0x90, 0x11}), "ids 262, 794, 577, 4496")
}
