package memviz

import (
	"fmt"
	"io"

	"github.com/strata-ml/strata/memory"
)

// checkHistory refuses a nil history, which the functions would otherwise
// dereference.
func checkHistory(fn string, h *memory.History) error {
	if h == nil {
		return fmt.Errorf("memviz: %s of a nil history (take one with Manager.History or Pool.History): %w", fn, memory.ErrInvalidArgument)
	}
	return nil
}

// checkWriter refuses a nil writer.
func checkWriter(fn string, w io.Writer) error {
	if w == nil {
		return fmt.Errorf("memviz: %s to a nil writer: %w", fn, memory.ErrInvalidArgument)
	}
	return nil
}
