package main

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// The memory limit the Go runtime keeps the heap under, where GOMEMLIMIT
// does not set one: this share of the container's limit (its cgroup's), so
// that the collector works harder as the limit nears instead of the kernel
// killing the run. Nothing where the container has no limit.
const memLimitShare = 0.9

// cgroupLimit: the container's memory limit in bytes from its cgroup (v2's
// memory.max, else v1's memory.limit_in_bytes), 0 where it has none.
func cgroupLimit(read func(string) ([]byte, error)) int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := read(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		// "max" (v2) or v1's page-rounded maximum: no limit.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}

// setMemoryLimit: memLimitShare of the container's limit, unless GOMEMLIMIT
// is set (the runtime has read it) or there is none; the limit set, 0: none.
func setMemoryLimit(getenv func(string) string, read func(string) ([]byte, error)) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	n := cgroupLimit(read)
	if n == 0 {
		return 0
	}
	limit := int64(float64(n) * memLimitShare)
	debug.SetMemoryLimit(limit)
	return limit
}
