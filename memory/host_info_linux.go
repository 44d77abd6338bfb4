//go:build linux

package memory

import (
	"bytes"
	"os"
	"strconv"
)

// hostMemInfo reads MemAvailable and MemTotal from /proc/meminfo: the
// memory a new allocation can get without swapping, and the machine's RAM.
func hostMemInfo() (free, total int64, ok bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, false
	}
	free, okFree := meminfoField(data, "MemAvailable:")
	total, okTotal := meminfoField(data, "MemTotal:")
	return free, total, okFree && okTotal
}

// meminfoField returns the value of a "Key:   1234 kB" line in bytes.
func meminfoField(data []byte, key string) (int64, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0, false
	}
	line := data[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, false
	}
	if len(f) > 1 && string(f[1]) == "kB" {
		v *= 1024
	}
	return v, true
}
