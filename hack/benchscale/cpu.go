package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// cpuTimes are CPU-seconds spent so far: by this process (and how much of
// it the Go GC took), and by the control plane's kube-apiserver and etcd,
// which share the machine's cores with it. The walls are noisy on a shared
// machine; these are what a pass costs.
type cpuTimes struct {
	self, gc, apiserver, etcd time.Duration
}

func readCPU() cpuTimes {
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	sample := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(sample)
	return cpuTimes{
		self:      time.Duration(usage.Utime.Nano() + usage.Stime.Nano()),
		gc:        time.Duration(sample[0].Value.Float64() * float64(time.Second)),
		apiserver: siblingCPU("kube-apiserver"),
		etcd:      siblingCPU("etcd"),
	}
}

func (c cpuTimes) since(before cpuTimes) string {
	return fmt.Sprintf("cpu: instance %.2fs (gc %.2fs), kube-apiserver %.2fs, etcd %.2fs",
		(c.self - before.self).Seconds(), (c.gc - before.gc).Seconds(),
		(c.apiserver - before.apiserver).Seconds(), (c.etcd - before.etcd).Seconds())
}

// controlPlaneParent is the process that started the control plane: the
// bench's driver, this instance's parent (or -control-plane-parent).
var controlPlaneParent int

// siblingCPU is the CPU time of the processes named comm whose parent is
// controlPlaneParent.
func siblingCPU(comm string) time.Duration { return siblingCPUOf(controlPlaneParent, comm) }

// siblingCPUOf is the CPU time of the processes named comm whose parent is
// parent.
func siblingCPUOf(parent int, comm string) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		name, ppid, ticks, ok := parseStat(string(raw))
		if ok && name == comm && ppid == parent {
			total += time.Duration(ticks) * time.Second / clockTicks
		}
	}
	return total
}

// parseStat reads comm, ppid and utime+stime from /proc/<pid>/stat (proc(5)).
func parseStat(stat string) (comm string, parent int, ticks int64, ok bool) {
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return "", 0, 0, false
	}
	fields := strings.Fields(stat[closing+1:])
	if len(fields) < 13 { // state ppid ... utime(12) stime(13), counted from state
		return "", 0, 0, false
	}
	parent, err := strconv.Atoi(fields[1])
	if err != nil {
		return "", 0, 0, false
	}
	user, userErr := strconv.ParseInt(fields[11], 10, 64)
	system, systemErr := strconv.ParseInt(fields[12], 10, 64)
	if userErr != nil || systemErr != nil {
		return "", 0, 0, false
	}
	return stat[open+1 : closing], parent, user + system, true
}
