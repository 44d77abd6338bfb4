package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// checkInputs refuses a -resume or -init file cut short or unreadable
// (checkWhole), after checkFiles has checked the paths: a flag that names
// the wrong file is told that first.
func (o *options) checkInputs() error {
	for _, in := range [][2]string{{"-resume", o.resume}, {"-init", o.init}} {
		if in[1] != "" {
			if err := checkWhole(in[0], in[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkWhole refuses a safetensors file (-resume's state, -init's
// weights) shorter than its header says it is (a copy cut short, or a
// save that died on a file system without atomic renames), saying
// "truncated", and one whose header cannot be read ("not a safetensors
// file"), before any work: the load would say only "bad header", and end
// the run with status 1. The error names the flag and the file.
func checkWhole(flag, path string) error {
	if err := checkLength(flag, path); err != nil {
		return err
	}
	if _, err := nn.ReadWeightsInfo(path); err != nil {
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "nn: "), path+": ")
		if !strings.Contains(msg, "not a safetensors file") {
			msg = "not a safetensors file: " + msg
		}
		return fmt.Errorf("%s %s: %s", flag, path, msg)
	}
	return nil
}

// checkLength is checkWhole's comparison of the file's length with what
// its header says; a header it cannot read is left to ReadWeightsInfo.
func checkLength(flag, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // Readable reported it
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	size := fi.Size()
	if size == 0 {
		return fmt.Errorf("%s %s: empty file (0 bytes), not a safetensors file", flag, path)
	}
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return fmt.Errorf("%s %s: truncated: %d bytes, shorter than the 8 bytes that give a safetensors header's length", flag, path, size)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen > tensor.MaxSafetensorsHeader {
		return nil // not a length: not a safetensors file, which the readers say
	}
	if int64(hlen) > size-8 {
		return fmt.Errorf("%s %s: truncated: %d bytes, its header alone says it is %d bytes long", flag, path, size, 8+hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil
	}
	var entries map[string]json.RawMessage
	if json.Unmarshal(hdr, &entries) != nil {
		return nil
	}
	var end uint64 // where the last tensor's data ends, from the data's start
	for name, raw := range entries {
		var e struct {
			DataOffsets []uint64 `json:"data_offsets"`
		}
		if name == "__metadata__" || json.Unmarshal(raw, &e) != nil || len(e.DataOffsets) != 2 {
			continue
		}
		end = max(end, e.DataOffsets[1])
	}
	if data := uint64(size) - 8 - hlen; end > data {
		return fmt.Errorf("%s %s: truncated: %d bytes, its header describes %d bytes of tensor data after it and the file holds %d", flag, path, size, end, data)
	}
	return nil
}
