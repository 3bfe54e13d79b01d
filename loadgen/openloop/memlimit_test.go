package main

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"
)

func TestMemoryLimitIsTheContainers(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // leave the test binary's as it was
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, errors.New("no such file")
		}
	}
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   string
		want  int64
	}{
		{"cgroup v2, 2 GiB", map[string]string{"/sys/fs/cgroup/memory.max": "2147483648\n"}, "", 1932735283},
		{"cgroup v2, no limit", map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, "", 0},
		{"cgroup v1, 256 MiB", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n"}, "", 241591910},
		{"cgroup v1, no limit", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, "", 0},
		{"no cgroup files", nil, "", 0},
		{"GOMEMLIMIT set: the runtime's", map[string]string{"/sys/fs/cgroup/memory.max": "2147483648\n"}, "1GiB", 0},
	} {
		getenv := none
		if tc.env != "" {
			getenv = func(k string) string { return map[string]string{"GOMEMLIMIT": tc.env}[k] }
		}
		debug.SetMemoryLimit(math.MaxInt64)
		got := setMemoryLimit(getenv, files(tc.files))
		if got != tc.want {
			t.Errorf("%s: limit %d, want %d", tc.name, got, tc.want)
		}
		if now := debug.SetMemoryLimit(-1); tc.want > 0 && now != tc.want || tc.want == 0 && now != math.MaxInt64 {
			t.Errorf("%s: the runtime's limit is %d", tc.name, now)
		}
	}
}
