package snapshot

import (
	"errors"
	"math"
	"testing"
)

// The budget follows the instance's memory: GOMEMLIMIT (the function
// app's setting, from instanceMemoryMB), else the cgroup's limit, else a
// 2 GB Flex instance.
func TestMemoryLimit(t *testing.T) {
	cgroup := func(body string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if path != "/sys/fs/cgroup/memory.max" {
				t.Errorf("read %s, want the cgroup v2 memory.max", path)
			}
			return []byte(body), nil
		}
	}
	noCgroup := func(string) ([]byte, error) { return nil, errors.New("no cgroup v2") }
	cases := []struct {
		name     string
		goLimit  int64
		readFile func(string) ([]byte, error)
		want     int64
		from     string
	}{
		{"GOMEMLIMIT of a 2 GB instance", 1792 << 20, cgroup("4294967296\n"), 1792 << 20, "GOMEMLIMIT"},
		{"GOMEMLIMIT of a 4 GB instance", 3840 << 20, noCgroup, 3840 << 20, "GOMEMLIMIT"},
		{"cgroup of a 4 GB instance", math.MaxInt64, cgroup("4294967296\n"), 4 << 30, "cgroup memory.max"},
		{"cgroup unbounded", math.MaxInt64, cgroup("max\n"), fallbackLimit, "the 2 GB instance size"},
		{"nothing says", math.MaxInt64, noCgroup, fallbackLimit, "the 2 GB instance size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			limit, from := memoryLimitFrom(tc.goLimit, tc.readFile)
			if limit != tc.want || from != tc.from {
				t.Errorf("limit %d MiB from %s; want %d MiB from %s", limit>>20, from, tc.want>>20, tc.from)
			}
		})
	}
}
