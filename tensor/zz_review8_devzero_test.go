package tensor_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/strata-ml/strata/tensor"
)

func TestZZReview8DevZero(t *testing.T) {
	done := make(chan error, 1)
	go func() { _, _, err := tensor.ReadSafetensors("/dev/zero", tensor.CPU()); done <- err }()
	select {
	case err := <-done:
		t.Logf("returned: %v", err)
	case <-time.After(3 * time.Second):
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Fatalf("still reading /dev/zero after 3s; heap sys %d MiB", ms.HeapSys>>20)
	}
	_, err := tensor.ReadSafetensorsMetadata("/dev/zero")
	t.Logf("metadata: %v", err)
}
