package plan

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// inputFor is the largest dump that reading takes at most mem bytes for:
// decoding holds the compacted objects (snapshot.Compact) plus what the
// decoders allocate on the way. A plan's peak memory is well under its
// dump's size for full-size dumps (hack/scaledump: 5,000 nodes, 152,000
// API-server pods, as indented JSON and as YAML), YAML costing the more
// per byte; the limit allows 1.25 times the dump, a margin over both
// (docs/performance.md).
func inputFor(mem int64) int64 { return mem / 5 * 4 }

// SizeError is a dump too large for the memory at hand: it is refused
// before it is read, rather than read until the process is killed.
type SizeError struct {
	File string
	// Size is the dump's size, or how much was read before the limit.
	Size, Limit int64
	// Source says where Limit comes from.
	Source string
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%s is %s, more than the %s this process can read within its memory (%s); "+
		"raise GOMEMLIMIT on a machine with more memory, or pass --max-input with a larger size", e.File, bytesText(e.Size), bytesText(e.Limit), e.Source)
}

func bytesText(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// InputLimit is the largest dump this process can read within its memory:
// GOMEMLIMIT when set, else the cgroup's memory.max, else the machine's
// available memory, over what reading takes (inputFor). source says which.
func InputLimit() (limit int64, source string) {
	if mem := debug.SetMemoryLimit(-1); mem != math.MaxInt64 {
		return inputFor(mem), "GOMEMLIMIT " + bytesText(mem)
	}
	if raw, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if mem, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil {
			return inputFor(mem), "the cgroup's memory.max " + bytesText(mem)
		}
	}
	if mem, ok := memAvailable(); ok {
		return inputFor(mem), "MemAvailable " + bytesText(mem)
	}
	return math.MaxInt64, "no memory limit found"
}

// memAvailable reads MemAvailable from /proc/meminfo.
func memAvailable() (int64, bool) {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// LimitedReader fails with a SizeError once more than Limit bytes were
// read: for input whose size is not known up front (stdin).
type LimitedReader struct {
	R      io.Reader
	File   string
	Limit  int64
	Source string
	read   int64
}

func (l *LimitedReader) Read(p []byte) (int, error) {
	n, err := l.R.Read(p)
	l.read += int64(n)
	if l.read > l.Limit {
		return n, &SizeError{File: l.File, Size: l.read, Limit: l.Limit, Source: l.Source}
	}
	return n, err
}
