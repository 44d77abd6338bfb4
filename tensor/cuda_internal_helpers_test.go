package tensor

import (
	"os"
	"testing"
)

// internalCUDA returns cuda:0 for the package's internal GPU tests, and
// skips t without one (fails it when STRATA_REQUIRE_GPU is set).
func internalCUDA(t *testing.T) Device {
	t.Helper()
	dev, err := CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	return dev
}
