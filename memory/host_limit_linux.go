//go:build linux

package memory

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
)

// hostMemoryLimit is the memory this process may use: the smaller of the
// machine's RAM (MemTotal) and the memory limit of its cgroup and every
// ancestor (v2 memory.max, v1 memory.limit_in_bytes), with what the number
// is, for messages. 0 when nothing can be read.
func hostMemoryLimit() (int64, string) {
	limit, what := int64(0), ""
	if _, total, ok := hostMemInfo(); ok {
		limit, what = total, "RAM"
	}
	if l, ok := cgroupMemoryLimit(); ok && (limit == 0 || l < limit) {
		limit, what = l, "cgroup memory limit"
	}
	return limit, what
}

// cgroupMemoryLimit reads the smallest memory limit on the path from this
// process's cgroup up to the root of the mounted hierarchy. It assumes the
// usual mount points: /sys/fs/cgroup (v2, or v1's memory controller at
// /sys/fs/cgroup/memory).
func cgroupMemoryLimit() (int64, bool) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	best, found := int64(0), false
	take := func(dir, file string) {
		for p := dir; ; p = path.Dir(p) {
			if v, ok := readLimit(path.Join(p, file)); ok && (!found || v < best) {
				best, found = v, true
			}
			if p == "/" || p == "." || p == "/sys/fs/cgroup" || p == "/sys/fs/cgroup/memory" {
				return
			}
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			take(path.Join("/sys/fs/cgroup", parts[2]), "memory.max")
		case strings.Contains(","+parts[1]+",", ",memory,"):
			take(path.Join("/sys/fs/cgroup/memory", parts[2]), "memory.limit_in_bytes")
		}
	}
	return best, found
}

// readLimit reads a cgroup limit file; "max" and v1's huge "no limit"
// values are no limit.
func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}
