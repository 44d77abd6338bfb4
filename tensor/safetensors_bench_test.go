package tensor_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-ml/strata/tensor"
)

// BenchmarkReadSafetensorsHeader reads a file of 1,000 float32 tensors of
// one element each with metadata: the header (about 70 KB of JSON) is
// most of the work.
func BenchmarkReadSafetensorsHeader(b *testing.B) {
	const n = 1000
	var h strings.Builder
	h.WriteString(`{"__metadata__":{"format":"pt","step":"100"}`)
	for i := range n {
		fmt.Fprintf(&h, `,"layer.%d.weight":%s`, i, stEntry(i))
	}
	h.WriteString("}")
	file := binary.LittleEndian.AppendUint64(nil, uint64(h.Len()))
	file = append(file, h.String()...)
	file = append(file, make([]byte, 4*n)...)
	path := filepath.Join(b.TempDir(), "many.safetensors")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("ReadSafetensors", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tensor.WithScope(func() {
				got, _, err := tensor.ReadSafetensors(path, cpu)
				if err != nil || len(got) != n {
					b.Fatal(len(got), err)
				}
			})
		}
	})
	b.Run("ReadSafetensorsMetadata", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tensor.ReadSafetensorsMetadata(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}
