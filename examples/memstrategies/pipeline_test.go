package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// -pipeline runs the hybrid strategies' update pipelined (the device
// strategy's stays plain): the same loss, the row says so; it is refused
// beside -overlap.
func TestPipelineOnCPU(t *testing.T) {
	_, err := parse([]string{"-overlap", "-pipeline"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "-pipeline: not with -overlap")
	o, err := parse([]string{"-config", "tiny", "-steps", "2", "-warmup", "1", "-strategies", "device,hybrid", "-png", "", "-pipeline"}, &bytes.Buffer{})
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(o, tensor.CPU(), &stdout, &stderr))
	var rows []result
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r result
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		rows = append(rows, r)
	}
	require.Len(t, rows, 2)
	require.Equal(t, rows[0].Loss, rows[1].Loss, "identical numerics, identical loss")
	require.False(t, rows[0].Pipelined)
	require.True(t, rows[1].Pipelined)
	require.Contains(t, rows[1].Tools, "pipelined")
}
