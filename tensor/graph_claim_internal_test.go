package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestCaptureGraphClaimsDeviceOnce: a CaptureGraph started from another
// goroutine while one is still preparing its capture on the same device
// (between its check and the capture's start) is refused, instead of
// both finding the device free and beginning captures on it. The fake
// device stops each capture at the expandable-sync check, after the
// claim; once the first has returned the device is free again.
func TestCaptureGraphClaimsDeviceOnce(t *testing.T) {
	d, _, _ := fakeCUDADevice(t)
	d.vmm = true
	t.Setenv(memory.EnvExpandableSync, "1")
	var second error
	testHookCaptureClaimed = func(*cudaDevice) {
		testHookCaptureClaimed = nil
		done := make(chan error)
		go func() {
			_, err := CaptureGraph(d, func() {})
			done <- err
		}()
		second = <-done
	}
	defer func() { testHookCaptureClaimed = nil }()
	_, first := CaptureGraph(d, func() {})
	require.ErrorContains(t, first, memory.EnvExpandableSync)
	require.ErrorIs(t, second, ErrArgument)
	require.ErrorContains(t, second, "already capturing a graph")
	_, again := CaptureGraph(d, func() {})
	require.ErrorContains(t, again, memory.EnvExpandableSync, "the claim is given back when CaptureGraph returns")
}
