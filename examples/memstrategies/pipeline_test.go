package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// -pipeline runs the hybrid strategies' update pipelined (the device
// strategy's stays plain): the same loss, the row says so; it is refused
// beside -overlap.
func TestPipelineOnCPU(t *testing.T) {
	_, err := parse([]string{"-overlap", "-pipeline"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "-pipeline: not with -overlap")
	rows, _ := runRows(t, "-config", "tiny", "-steps", "2", "-warmup", "1", "-strategies", "device,hybrid", "-png", "", "-pipeline")
	require.Len(t, rows, 2)
	require.Equal(t, rows[0].Loss, rows[1].Loss, "identical numerics, identical loss")
	require.False(t, rows[0].Pipelined)
	require.True(t, rows[1].Pipelined)
	require.Contains(t, rows[1].Tools, "pipelined")
}
