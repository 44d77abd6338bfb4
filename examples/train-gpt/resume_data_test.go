package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumeChecksDataContents: a state records the SHA-256 of -data. A
// file with one byte changed (the same token counts) is refused, naming
// both files and hashes (it used to be resumed silently); an identical
// copy at another path is accepted with a note (it used to be refused
// for its path).
func TestResumeChecksDataContents(t *testing.T) {
	text := textFile(t)
	dir := t.TempDir()
	c := resumeCase{"text", 4, []string{"-batch", "2", "-sample", "0"}}
	o, err := parseFlags(c.args(dir, "cpu", "-data", text))
	require.NoError(t, err)
	o.stopAt = 2
	require.Error(t, run(o))
	state := filepath.Join(dir, "state.safetensors")
	resume := func(data string) error {
		o, err := parseFlags(c.args(t.TempDir(), "cpu", "-data", data, "-resume", state))
		require.NoError(t, err)
		return run(o)
	}

	b, err := os.ReadFile(text)
	require.NoError(t, err)
	copied := filepath.Join(t.TempDir(), "copy.txt")
	require.NoError(t, os.WriteFile(copied, b, 0o644))
	require.NoError(t, resume(copied), "the same contents at another path")

	b[100] ^= 1
	require.NoError(t, os.WriteFile(copied, b, 0o644))
	err = resume(copied)
	require.ErrorContains(t, err, "-data "+copied+" (sha256 ")
	require.ErrorContains(t, err, ") is not the data the state was saved with: "+text+" (sha256 ")
	require.NoError(t, os.WriteFile(text, b, 0o644))
	require.ErrorContains(t, resume(text), "-data "+text+" has changed since the state was saved: sha256 ")
}

// TestCompareRunsData: the notes and errors of compareRuns about the data.
func TestCompareRunsData(t *testing.T) {
	saved := runIdentity{Config: "tiny", Tokenizer: "byte", Data: "/a.txt", DataTokens: []int{90, 10}, DataSHA256: "00112233445566778899aabbccddeeff"}
	now := saved
	now.Data = "/b.txt"
	var w bytes.Buffer
	require.NoError(t, compareRuns(saved, now, &w))
	require.Equal(t, "train-gpt: note: -data is /b.txt now, /a.txt in the saved run: the same contents (sha256 0011223344556677)\n", w.String())

	old := saved // a state saved before the hash was recorded: the counts, with a note
	old.DataSHA256 = ""
	now.Data = old.Data
	w.Reset()
	require.NoError(t, compareRuns(old, now, &w))
	require.Contains(t, w.String(), "the state records no hash of -data (saved by an older train-gpt): only its token counts were compared")
	now.DataTokens = []int{91, 10}
	require.ErrorContains(t, compareRuns(old, now, &w), "-data /a.txt has changed since the state was saved")

	task := runIdentity{Config: "tiny", Tokenizer: "byte", Digits: 3}
	require.EqualError(t, compareRuns(saved, task, &w), "saved by a run on -data /a.txt, this one trains on the built-in addition task (-digits 3)")
	require.EqualError(t, compareRuns(task, saved, &w), "saved by a run on the built-in addition task (-digits 3), this one trains on -data /a.txt")
}
