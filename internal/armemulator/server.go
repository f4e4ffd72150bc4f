// Package armemulator is an Azure Resource Manager emulator for development
// and tests: an HTTPS server on loopback that serves the ARM REST routes the
// karpfunc launcher uses (virtual machines, network interfaces, resource
// SKUs, async operations, and reads of the node resource group's load
// balancers and network security groups, the managed cluster's maintenance
// configurations), with the SDK's model types for its
// JSON, so the real armcompute/armnetwork clients and pollers run unmodified
// against it.
//
// A VM that finished creating "boots" after Options.BootDelay like an AKS
// node image: its customData is read as the image's provisioning scripts
// read it (what they would refuse fails the boot, see BootError), and its
// kubelet joins the cluster by TLS bootstrapping as system:node:<name>; kwok
// then plays the kubelet for the Node. Faults (throttling, capacity, quota, slow operations) are
// injected per operation through an Injector.
package armemulator

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/karpfunc/karpfunc/internal/testcert"
)

// Options configure the emulator.
type Options struct {
	// Addr is the listen address; default "127.0.0.1:0" (a free port).
	Addr string
	// SubscriptionIDs are the subscriptions served; empty accepts any.
	SubscriptionIDs []string
	// OpDelay is how long a PUT or DELETE takes (Creating -> Succeeded,
	// Deleting -> gone).
	OpDelay time.Duration
	// VMCreateDelay is how long a VM create takes (Creating -> Succeeded);
	// default OpDelay. Real creates take minutes: tests about launches set
	// tens of seconds here while NICs and deletes stay fast.
	VMCreateDelay time.Duration
	// VMDeleteDelay is how long a VM delete takes (Deleting -> gone);
	// default OpDelay. Real deletes take tens of seconds.
	VMDeleteDelay time.Duration
	// BootDelay is how long after a VM succeeded its Node appears.
	BootDelay time.Duration
	// Kube is the cluster booted VMs join (nil: VMs never become Nodes).
	// A VM's kubelet joins with nothing but its customData (TLS bootstrap
	// token, CSR, NodeRestriction); these admin credentials only delete the
	// Node of a VM that is gone, as AKS's cloud node manager does.
	Kube *rest.Config
	// DNS is the VNet's name resolution for the kubelets: host name ->
	// host:port their connections to <name>:443 reach (the API server's
	// FQDN -> its local address). A name not in it does not resolve.
	DNS map[string]string
	// NodeResources gives a booted node's capacity (what its kubelet
	// reports: cpu, memory as the guest sees it, pods, ephemeral-storage)
	// and architecture for its VM size. When nil, or when it answers !ok,
	// the SKU's vCPUs/MemoryGB capabilities from SKUs are used; with
	// neither, the VM never becomes a Node (like a VM whose kubelet fails
	// to join). Allocatable is always the kubelet's own: capacity less the
	// reservations in its flags (allocatable.go).
	NodeResources func(sku string, maxPods int32) (capacity corev1.ResourceList, arch string, ok bool)
	// SKUs are the resource SKUs served by the SKU API and used to validate
	// VM sizes and zones. Empty accepts any VM size.
	SKUs []*armcompute.ResourceSKU
	// EncryptionAtHostUnregistered is a subscription that has not
	// registered the Microsoft.Compute/EncryptionAtHost feature: a VM asking
	// for securityProfile.encryptionAtHost is refused.
	EncryptionAtHostUnregistered bool
	// Subnets are the subnet IDs that exist; a NIC on another subnet is
	// refused with InvalidResourceReference. nil accepts any well-formed
	// subnet ID.
	Subnets []string
	// Identities are the user-assigned identities of the subscription and
	// whether the caller may assign each (see Identity). nil accepts any
	// identity on a VM; otherwise a VM carrying one not listed, or one
	// the caller may not assign, is refused with LinkedAuthorizationFailed.
	Identities []Identity
	// CallerObjectID names the caller in LinkedAuthorizationFailed.
	CallerObjectID string
	// Cluster is the managed cluster's network profile the nodes must
	// fit (see ManagedCluster; the zero value is Azure CNI overlay).
	Cluster ManagedCluster
	// Network is the node resource group's load balancers and NSGs and
	// the subnets' outbound settings (see nodenetwork.go; AKSNetwork is
	// what AKS creates). The zero value has none: a NIC may reference no
	// backend pool or NSG, and every subnet has default outbound access.
	Network Network
	// Clock drives provisioning and boot times; default the real clock.
	Clock clock.PassiveClock
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Faults are installed as the initial Rules (see Server.Faults).
	Faults []Rule
	// Injector, when set, is consulted before the Rules.
	Injector Injector
	// OnEviction is called after a spot eviction removed a VM and its
	// Node, with the VM's resource ID.
	OnEviction func(vmResourceID string)
	// EvictionNotice is the time between a spot eviction's node condition
	// and the VM's removal (default DefaultEvictionNotice, 30 s; negative:
	// none).
	EvictionNotice time.Duration
	// EventGrid delivers VirtualMachinePreempted annotations (see
	// eviction.go); also settable with SetEventGrid.
	EventGrid EventGrid
	// GalleryVersions are the node image versions AKS's community
	// galleries hold (see gallery.go); nil: DefaultGalleryVersions. A VM
	// create naming another version is refused with GalleryImageNotFound.
	GalleryVersions []GalleryVersion
	// ManagedClusters are the AKS clusters' resource IDs whose maintenance
	// configurations are served (see maintenance.go); another cluster is
	// ResourceNotFound. Empty serves any cluster.
	ManagedClusters []string
	// Quota is the subscription's vCPU quota (see quota.go); the zero
	// value limits nothing. Also settable with SetQuota.
	Quota Quota
}

// Counters count what the emulator did, for tests.
type Counters struct {
	VMCreates, VMDeletes int
	// QuotaRefusals counts VM creates refused for quota (409
	// OperationNotAllowed).
	QuotaRefusals          int
	NICCreates, NICDeletes int
	// DiskDeletes counts managed disks deleted (with their VM, or alone).
	DiskDeletes  int
	NodesCreated int
	NodesDeleted int
	// Evictions counts spot evictions started (notices given); Preempted
	// the VMs still there when their notice ran out, which the platform
	// removed (karpfunc deletes an interrupted VM itself once drained).
	Evictions, Preempted int
	// Requests counts every request by operation, faulted ones included.
	Requests map[Operation]int
}

// Server is a running emulator.
type Server struct {
	opts   Options
	log    *slog.Logger
	clock  clock.PassiveClock
	faults *Rules

	listener net.Listener
	http     *http.Server
	url      string
	caPEM    []byte
	token    string

	mu       sync.Mutex
	vms      map[string]*vmState  // key: resourceKey
	nics     map[string]*nicState // key: resourceKey
	network  *networkState
	disks    map[string]*diskState // key: resourceKey
	ops      map[string]*operation
	counters Counters
	nextIP   int
	// neverJoins, when set, picks VMs whose kubelet never registers.
	neverJoins func(vmName string) bool
	// bootErrors says why a booted VM's node image could not start a
	// kubelet, by VM name.
	bootErrors map[string]string
	eventGrid  EventGrid
	gallery    []GalleryVersion
	// maintenance: maintenance configurations by cluster resourceKey,
	// then lower-case name (made on the first PUT).
	maintenance map[string]map[string]*armcontainerservice.MaintenanceConfiguration
	quota       Quota
	quotaNames  map[string]string // quota.Families' keys (lower case) as set

	nodes  *nodeWorker
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts an emulator; it serves until ctx is done or Close.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.applyDefaults(); err != nil {
		return nil, err
	}
	server := newServer(opts)

	cert, caPEM, err := testcert.SelfSigned("karpfunc ARM emulator")
	if err != nil {
		return nil, err
	}
	server.caPEM = caPEM
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("armemulator: listen on %s: %w", opts.Addr, err)
	}
	server.listener = ln
	server.url = "https://" + ln.Addr().String()

	ctx, cancel := context.WithCancel(ctx)
	server.cancel = cancel
	if opts.Kube != nil {
		if err := server.startNodeWorker(ctx); err != nil {
			cancel()
			_ = ln.Close()
			return nil, err
		}
	}

	server.http = &http.Server{
		Handler:           server,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(server.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	server.wg.Add(2)
	go server.serve(ln)
	go server.settleLoop(ctx)
	go func() { <-ctx.Done(); _ = server.http.Close() }()
	server.log.Info("ARM emulator listening", "url", server.url)
	return server, nil
}

// applyDefaults fills the options left zero and refuses invalid ones.
func (opts *Options) applyDefaults() error {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.OpDelay < 0 || opts.BootDelay < 0 || opts.VMCreateDelay < 0 || opts.VMDeleteDelay < 0 {
		return errors.New("armemulator: OpDelay, VMCreateDelay, VMDeleteDelay and BootDelay must not be negative")
	}
	if opts.VMDeleteDelay == 0 {
		opts.VMDeleteDelay = opts.OpDelay
	}
	if opts.VMCreateDelay == 0 {
		opts.VMCreateDelay = opts.OpDelay
	}
	if err := opts.Network.validate(); err != nil {
		return err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return nil
}

// newServer is an emulator with empty state for opts (defaults applied).
func newServer(opts Options) *Server {
	server := &Server{
		opts:       opts,
		log:        opts.Logger.With("component", "armemulator"),
		clock:      opts.Clock,
		faults:     NewRules(opts.Faults...),
		vms:        map[string]*vmState{},
		nics:       map[string]*nicState{},
		network:    newNetworkState(opts.Network),
		disks:      map[string]*diskState{},
		ops:        map[string]*operation{},
		bootErrors: map[string]string{},
		token:      "emulator-" + randHex(8),
		nextIP:     4, // Azure reserves .0-.3 of every subnet
		eventGrid:  opts.EventGrid,
		gallery:    opts.GalleryVersions,
	}
	if server.gallery == nil {
		server.gallery = DefaultGalleryVersions()
	}
	server.counters.Requests = map[Operation]int{}
	server.SetQuota(opts.Quota)
	return server
}

// startNodeWorker starts the worker that joins booted VMs to opts.Kube as
// nodes.
func (s *Server) startNodeWorker(ctx context.Context) error {
	nw, err := newNodeWorker(ctx, s.opts.Kube, s.opts.DNS, s.log)
	if err != nil {
		return err
	}
	nw.onDone = s.countNode
	s.nodes = nw
	s.wg.Add(1)
	go func() { defer s.wg.Done(); nw.run(ctx) }()
	return nil
}

// serve serves HTTPS on ln until the server is closed.
func (s *Server) serve(ln net.Listener) {
	defer s.wg.Done()
	if err := s.http.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("serve failed", "error", err)
	}
}

// settleLoop moves resources through their states as the clock advances
// even when nobody is asking (so VMs boot on their own), until ctx is done.
func (s *Server) settleLoop(ctx context.Context) {
	defer s.wg.Done()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			s.mu.Lock()
			s.settleLocked()
			s.mu.Unlock()
		}
	}
}

// URL is the ARM endpoint, e.g. https://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// CACertPEM is the server's self-signed certificate, for the client's trust
// pool.
func (s *Server) CACertPEM() []byte { return append([]byte(nil), s.caPEM...) }

// Token is a bearer token clients can use. Any bearer token is accepted; the
// Authorization header itself is required, as in ARM.
func (s *Server) Token() string { return s.token }

// Faults returns the rule list; add rules at any time.
func (s *Server) Faults() *Rules { return s.faults }

// SetInjector replaces the Injector consulted before the Rules (nil: none),
// so a test can switch a fault model on and off on a running emulator.
func (s *Server) SetInjector(inj Injector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Injector = inj
}

// SetVMDeleteDelay changes how long VM deletes sent from now on take.
func (s *Server) SetVMDeleteDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.VMDeleteDelay = max(d, 0)
}

// SetNeverJoins makes VMs for which f returns true boot without ever
// becoming a Node, like a VM whose bootstrap fails (nil: every VM joins).
func (s *Server) SetNeverJoins(f func(vmName string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.neverJoins = f
}

// GPUProblem says why the Node of VM vmName does not advertise its NVIDIA
// GPUs: no device plugin runs on it, provisioning installed no driver and
// no GPU Operator driver and container toolkit run on it, or the device
// plugin cannot reach the driver (gpu.go). "" when it advertises them, has none, or has not joined.
func (s *Server) GPUProblem(vmName string) string {
	s.mu.Lock()
	var node string
	for _, vmRecord := range s.vms {
		if strings.EqualFold(vmRecord.name(), vmName) {
			node = nodeName(vmRecord)
		}
	}
	s.mu.Unlock()
	if s.nodes == nil || node == "" {
		return ""
	}
	return s.nodes.gpuProblemOf(node)
}

// BootError says why VM vmName has not joined the cluster: its NIC has no
// outbound path (nodenetwork.go), its node image refused the customData, or
// its kubelet's last attempt to join failed
// (e.g. the API server refused the bootstrap token). "" when it joined, is
// still joining without an error, or is not booted.
func (s *Server) BootError(vmName string) string {
	s.mu.Lock()
	msg := s.bootErrors[strings.ToLower(vmName)]
	var node string
	for _, vmRecord := range s.vms {
		if strings.EqualFold(vmRecord.name(), vmName) {
			node = nodeName(vmRecord)
		}
	}
	s.mu.Unlock()
	if msg != "" || s.nodes == nil || node == "" {
		return msg
	}
	return s.nodes.joinError(node)
}

// Close stops the server and its background work.
func (s *Server) Close() error {
	s.cancel()
	err := s.http.Close()
	s.wg.Wait()
	return err
}

// Counters returns a copy of the counters.
func (s *Server) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	counters := s.counters
	counters.Requests = make(map[Operation]int, len(s.counters.Requests))
	for op, count := range s.counters.Requests {
		counters.Requests[op] = count
	}
	return counters
}

func (s *Server) countNode(created bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if created {
		s.counters.NodesCreated++
	} else {
		s.counters.NodesDeleted++
	}
}

func randHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

func newUUID() string {
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	buf[6] = (buf[6] & 0x0f) | 0x40
	buf[8] = (buf[8] & 0x3f) | 0x80
	digits := hex.EncodeToString(buf)
	return digits[0:8] + "-" + digits[8:12] + "-" + digits[12:16] + "-" + digits[16:20] + "-" + digits[20:]
}

// resourceKey identifies a resource case-insensitively, as ARM does.
func resourceKey(sub, rg, name string) string {
	return strings.ToLower(sub + "/" + rg + "/" + name)
}
