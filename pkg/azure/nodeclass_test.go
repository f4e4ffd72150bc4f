package azure_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/azure"
)

// TestEncryptionAtHost: the AKSNodeClass's security.encryptionAtHost
// reaches ARM as the VM's securityProfile.encryptionAtHost, and is absent
// when not asked for.
func TestEncryptionAtHost(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	l := newLauncher(t, emu, "c")
	for _, tc := range []struct {
		name string
		on   bool
	}{{"eah-on", true}, {"eah-off", false}} {
		req := request(tc.name)
		req.EncryptionAtHost = tc.on
		if _, err := l.Create(ctx(t), req); err != nil {
			t.Fatalf("%s: Create: %v", tc.name, err)
		}
	}
	got := map[string]bool{}
	for _, vm := range emu.VMs() {
		sp := vm.Properties.SecurityProfile
		got[*vm.Name] = sp != nil && sp.EncryptionAtHost != nil && *sp.EncryptionAtHost
		if *vm.Name == "eah-off" && sp != nil {
			t.Errorf("eah-off: securityProfile = %+v, want none", sp)
		}
	}
	if !got["eah-on"] || got["eah-off"] {
		t.Errorf("securityProfile.encryptionAtHost by VM = %v; want eah-on true, eah-off false", got)
	}
}

// TestSysctlContent: SYSCTL_CONTENT is the provider's static file without
// custom sysctls, and AgentBaker's merged, sorted form with them.
func TestSysctlContent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sysctls *v1beta1.SysctlConfiguration
		want    string
	}{
		{name: "none", want: "net.ipv4.tcp_retries2=8\nnet.core.message_burst=80\nnet.core.message_cost=40\n" +
			"net.core.somaxconn=16384\nnet.ipv4.tcp_max_syn_backlog=16384\nnet.ipv4.neigh.default.gc_thresh1=4096\n" +
			"net.ipv4.neigh.default.gc_thresh2=8192\nnet.ipv4.neigh.default.gc_thresh3=16384\n"},
		{name: "custom", sysctls: &v1beta1.SysctlConfiguration{
			NetCoreSomaxconn: ptr[int32](32768), VMMaxMapCount: ptr[int32](262144), NetIPv4TCPTwReuse: ptr(true),
			NetIPv4IPLocalPortRange: ptr("32768 65535"), FsInotifyMaxUserWatches: ptr[int32](1048576),
		}, want: "fs.inotify.max_user_watches=1048576\n" +
			"net.core.message_burst=80\nnet.core.message_cost=40\nnet.core.somaxconn=32768\n" +
			"net.ipv4.ip_local_port_range=32768 65535\nnet.ipv4.ip_local_reserved_ports=65330\n" +
			"net.ipv4.neigh.default.gc_thresh1=4096\nnet.ipv4.neigh.default.gc_thresh2=8192\nnet.ipv4.neigh.default.gc_thresh3=16384\n" +
			"net.ipv4.tcp_max_syn_backlog=16384\nnet.ipv4.tcp_retries2=8\nnet.ipv4.tcp_tw_reuse=1\n" +
			"vm.max_map_count=262144"},
		{name: "port range below the reserved port", sysctls: &v1beta1.SysctlConfiguration{
			NetIPv4IPLocalPortRange: ptr("1024 60000"), NetIPv4TCPTwReuse: ptr(false),
		}, want: "net.core.message_burst=80\nnet.core.message_cost=40\nnet.core.somaxconn=16384\n" +
			"net.ipv4.ip_local_port_range=1024 60000\n" +
			"net.ipv4.neigh.default.gc_thresh1=4096\nnet.ipv4.neigh.default.gc_thresh2=8192\nnet.ipv4.neigh.default.gc_thresh3=16384\n" +
			"net.ipv4.tcp_max_syn_backlog=16384\nnet.ipv4.tcp_retries2=8\nnet.ipv4.tcp_tw_reuse=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nb := testNode(t)
			nb.Sysctls = tc.sysctls
			data, err := nb.CustomData()
			if err != nil {
				t.Fatal(err)
			}
			vars, err := azure.ParseCustomData(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := base64.StdEncoding.DecodeString(vars["SYSCTL_CONTENT"])
			if err != nil {
				t.Fatalf("SYSCTL_CONTENT is not base64: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("SYSCTL_CONTENT =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestEncryptionAtHostUnregistered: on a subscription without the
// EncryptionAtHost feature ARM refuses the create, and the launch fails with
// ARM's code and message rather than launching an unencrypted VM.
func TestEncryptionAtHostUnregistered(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{EncryptionAtHostUnregistered: true})
	l := newLauncher(t, emu, "c")
	req := request("eah-unregistered")
	req.EncryptionAtHost = true
	_, err := l.Create(ctx(t), req)
	if err == nil || !strings.Contains(err.Error(), "InvalidParameter") ||
		!strings.Contains(err.Error(), "'Microsoft.Compute/EncryptionAtHost' feature is not enabled") {
		t.Fatalf("Create error = %v; want ARM's InvalidParameter naming the EncryptionAtHost feature", err)
	}
	for _, vm := range emu.VMs() {
		t.Errorf("VM %s exists after the refused create", *vm.Name)
	}
	plain := request("plain")
	if _, err := l.Create(ctx(t), plain); err != nil {
		t.Fatalf("a VM without encryption at host on the same subscription: %v", err)
	}
}
