package azure

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// ipLocalReservedPorts is the port AgentBaker reserves when a custom
// ip_local_port_range reaches past it.
const ipLocalReservedPorts = 65330

// sysctlContent is the node's SYSCTL_CONTENT (written to
// /etc/sysctl.d/60-CIS.conf by the provisioning script).
//
// Without custom sysctls it is the Azure provider's static file
// (karpenter-provider-azure@352646f5
// pkg/providers/imagefamily/bootstrap/sysctl.conf, staticvalues.go:191).
// With them it follows AgentBaker's rule for an agent pool's custom Linux OS
// configuration, which the provider reaches by handing linuxOSConfig to the
// node bootstrapping service (customscriptsbootstrap/provisionclientbootstrap.go:140,
// utils.go:162-210): the same base values, each overridable, plus every
// setting given, sorted by key, one key=value a line; tcp_tw_reuse as 1/0;
// a port range ending above 65330 also reserves 65330
// (Azure/AgentBaker@0252ee13 aks-node-controller/parser/helper.go,
// getSysctlContent and getPortRangeEndValue).
func sysctlContent(s *v1beta1.SysctlConfiguration) string {
	if s == nil {
		return sysctlConfig
	}
	m := map[string]string{
		"net.ipv4.tcp_retries2":             "8",
		"net.core.message_burst":            "80",
		"net.core.message_cost":             "40",
		"net.core.somaxconn":                "16384",
		"net.ipv4.tcp_max_syn_backlog":      "16384",
		"net.ipv4.neigh.default.gc_thresh1": "4096",
		"net.ipv4.neigh.default.gc_thresh2": "8192",
		"net.ipv4.neigh.default.gc_thresh3": "16384",
	}
	for key, v := range sysctlInts(s) {
		if v != nil {
			m[key] = strconv.Itoa(int(*v))
		}
	}
	if s.NetIPv4TCPTwReuse != nil {
		m["net.ipv4.tcp_tw_reuse"] = "0"
		if *s.NetIPv4TCPTwReuse {
			m["net.ipv4.tcp_tw_reuse"] = "1"
		}
	}
	if r := s.NetIPv4IPLocalPortRange; r != nil && *r != "" {
		m["net.ipv4.ip_local_port_range"] = *r
		if portRangeEnd(*r) > ipLocalReservedPorts {
			m["net.ipv4.ip_local_reserved_ports"] = strconv.Itoa(ipLocalReservedPorts)
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%s=%s", k, m[k])
	}
	return strings.Join(lines, "\n")
}

// sysctlInts maps each integer setting to its kernel key.
func sysctlInts(s *v1beta1.SysctlConfiguration) map[string]*int32 {
	return map[string]*int32{
		"fs.aio-max-nr":                      s.FsAioMaxNr,
		"fs.file-max":                        s.FsFileMax,
		"fs.inotify.max_user_watches":        s.FsInotifyMaxUserWatches,
		"fs.nr_open":                         s.FsNrOpen,
		"kernel.threads-max":                 s.KernelThreadsMax,
		"net.core.netdev_max_backlog":        s.NetCoreNetdevMaxBacklog,
		"net.core.optmem_max":                s.NetCoreOptmemMax,
		"net.core.rmem_default":              s.NetCoreRmemDefault,
		"net.core.rmem_max":                  s.NetCoreRmemMax,
		"net.core.somaxconn":                 s.NetCoreSomaxconn,
		"net.core.wmem_default":              s.NetCoreWmemDefault,
		"net.core.wmem_max":                  s.NetCoreWmemMax,
		"net.ipv4.neigh.default.gc_thresh1":  s.NetIPv4NeighDefaultGcThresh1,
		"net.ipv4.neigh.default.gc_thresh2":  s.NetIPv4NeighDefaultGcThresh2,
		"net.ipv4.neigh.default.gc_thresh3":  s.NetIPv4NeighDefaultGcThresh3,
		"net.ipv4.tcp_fin_timeout":           s.NetIPv4TCPFinTimeout,
		"net.ipv4.tcp_keepalive_intvl":       s.NetIPv4TCPKeepaliveIntvl,
		"net.ipv4.tcp_keepalive_probes":      s.NetIPv4TCPKeepaliveProbes,
		"net.ipv4.tcp_keepalive_time":        s.NetIPv4TCPKeepaliveTime,
		"net.ipv4.tcp_max_syn_backlog":       s.NetIPv4TCPMaxSynBacklog,
		"net.ipv4.tcp_max_tw_buckets":        s.NetIPv4TCPMaxTwBuckets,
		"net.netfilter.nf_conntrack_buckets": s.NetNetfilterNfConntrackBuckets,
		"net.netfilter.nf_conntrack_max":     s.NetNetfilterNfConntrackMax,
		"vm.max_map_count":                   s.VMMaxMapCount,
		"vm.swappiness":                      s.VMSwappiness,
		"vm.vfs_cache_pressure":              s.VMVfsCachePressure,
	}
}

// portRangeEnd is the last port of "first last", or -1 when the range is
// malformed or empty (AgentBaker's getPortRangeEndValue).
func portRangeEnd(r string) int {
	parts := strings.Split(r, " ")
	if len(parts) != 2 {
		return -1
	}
	first, err1 := strconv.Atoi(parts[0])
	last, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || first <= 0 || last <= 0 || first >= last {
		return -1
	}
	return last
}
