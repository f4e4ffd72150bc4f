// Package controlplane starts a real local Kubernetes control plane for tests
// and the demo: etcd, kube-apiserver, and optionally kube-controller-manager,
// kube-scheduler and kwok (which plays the kubelet for nodes annotated
// kwok.x-k8s.io/node=fake). The binaries come from tools.EnsureBinaries.
//
// Nodes join it the way they join AKS: the API server authenticates
// bootstrap tokens and admits kubelet writes through NodeRestriction (with
// the Node authorizer); kube-controller-manager approves and signs kubelet
// client CSRs and runs the bootstrapsigner and tokencleaner controllers; and
// the RBAC bindings AKS and kubeadm create for TLS bootstrapping exist (see
// nodeBootstrapBindings). The API server's certificate also names
// Options.APIServerFQDN, the name nodes are told to reach it by.
//
// Everything listens on loopback on free ports and lives in one temp dir;
// Stop removes both. Children get a parent-death signal on Linux, so a test
// binary that crashes or is killed leaves no process behind.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/karpfunc/karpfunc/internal/logwriter"
	"github.com/karpfunc/karpfunc/pkg/apis"
)

// Kwok manages only nodes carrying this annotation, so tests can also create
// nodes nobody keeps Ready (to exercise NotReady handling).
const (
	KwokNodeAnnotation      = "kwok.x-k8s.io/node"
	KwokNodeAnnotationValue = "fake"
)

// Addresses of the simulated cluster's networks. Kwok assigns pod IPs from
// PodCIDR; ServiceCIDR is the API server's service range.
const (
	PodCIDR     = "10.244.0.0/16"
	ServiceCIDR = "10.96.0.0/12"
)

// DefaultAPIServerFQDN is the API server's DNS name when Options leave it empty.
const DefaultAPIServerFQDN = "karpfunc-local-dns.hcp.local.azmk8s.io"

// Options selects what Start runs. etcd and kube-apiserver always run.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kwok (see tools.EnsureBinaries). Required.
	BinDir string
	// Log receives every process's output, one prefixed line at a time. Nil
	// discards it; the last lines of each process are kept either way and
	// quoted in errors.
	Log io.Writer
	// Kwok starts kwok for nodes annotated kwok.x-k8s.io/node=fake.
	Kwok bool
	// ControllerManager starts kube-controller-manager with all default
	// controllers (ReplicaSets, garbage collector, disruption/PDB status,
	// node lifecycle, service accounts...). Without it nothing creates the
	// default ServiceAccount, so pods cannot be created either.
	ControllerManager bool
	// Scheduler starts kube-scheduler.
	Scheduler bool
	// InstallCRDs installs apis.CRDs() (NodePool, NodeClaim, AKSNodeClass) and
	// waits until they are Established.
	InstallCRDs bool
	// APIServerFQDN is the DNS name nodes reach the API server by (AKS's
	// <dns-prefix>.hcp.<region>.azmk8s.io); the serving certificate names
	// it. Default DefaultAPIServerFQDN.
	APIServerFQDN string
	// ExtraAPIServerFlags are appended to kube-apiserver's flags (a later
	// flag overrides an earlier one).
	ExtraAPIServerFlags []string
	// StartTimeout bounds Start unless ctx ends sooner. Default 3 minutes: the
	// first start on a loaded 2-core machine is slow.
	StartTimeout time.Duration
	// StopGracePeriod is how long Stop waits after SIGTERM before SIGKILL.
	// Default 10s.
	StopGracePeriod time.Duration
}

// ControlPlane is a running control plane. Stop it when done.
type ControlPlane struct {
	dir        string
	config     *rest.Config
	kubeconfig string
	grace      time.Duration
	fqdn       string
	caPEM      []byte
	etcdURL    string

	mu    sync.Mutex
	procs []*process // in start order

	stopOnce sync.Once
	stopErr  error
}

// identity is one client of the API server, authenticated by bearer token.
type identity struct {
	user, group, token, kubeconfig string
}

// APIServerFQDN is the DNS name the API server's certificate carries for
// nodes (Options.APIServerFQDN).
func (c *ControlPlane) APIServerFQDN() string { return c.fqdn }

// APIServerAddr is the host:port the API server listens on, where a node's
// traffic to APIServerFQDN:443 lands.
func (c *ControlPlane) APIServerAddr() string { return strings.TrimPrefix(c.config.Host, "https://") }

// CACertPEM is the cluster CA: it signs the API server's certificate and
// the kubelet client certificates kube-controller-manager issues.
func (c *ControlPlane) CACertPEM() []byte { return append([]byte(nil), c.caPEM...) }

// RESTConfig returns a copy of the admin (system:masters) client config.
func (c *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// KubeconfigPath is the admin kubeconfig file, for kubectl or other tools.
// It is removed by Stop.
func (c *ControlPlane) KubeconfigPath() string { return c.kubeconfig }

// EtcdURL is etcd's plain-HTTP client URL (its v3 JSON gateway serves
// /v3/kv/put, /v3/kv/txn and /v3/kv/compaction): for tests that compact
// history and benchmarks that load objects faster than the API server
// writes them.
func (c *ControlPlane) EtcdURL() string { return c.etcdURL }

// Dir is the temp dir holding data, keys and kubeconfigs; removed by Stop.
func (c *ControlPlane) Dir() string { return c.dir }

// Err reports a process that exited without Stop asking it to, with its last
// lines of output; nil while everything runs. Long tests can check it when
// something stops making progress.
func (c *ControlPlane) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, proc := range c.procs {
		if err := proc.unexpectedExit(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops every process, clients before the API server and the API
// server before etcd (SIGTERM, then SIGKILL after the grace period), and
// removes the temp dir. It is idempotent and safe to call concurrently; every
// call returns the first call's result.
func (c *ControlPlane) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		procs := append([]*process(nil), c.procs...)
		c.mu.Unlock()
		var errs []error
		var clients, core []*process
		for _, proc := range procs {
			if proc.name == "etcd" || proc.name == "kube-apiserver" {
				core = append(core, proc)
			} else {
				clients = append(clients, proc)
			}
		}
		// Clients together (they do not depend on each other), then the
		// API server, then etcd.
		var wg sync.WaitGroup
		var emu sync.Mutex
		for _, proc := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := proc.stop(c.grace); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
			}()
		}
		wg.Wait()
		for i := len(core) - 1; i >= 0; i-- {
			if err := core[i].stop(c.grace); err != nil {
				errs = append(errs, err)
			}
		}
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", c.dir, err))
		}
		if len(errs) > 0 {
			c.stopErr = fmt.Errorf("controlplane: stopping: %w", errors.Join(errs...))
		}
	})
	return c.stopErr
}

func (c *ControlPlane) start(name, bin string, log *logwriter.Synced, env []string, args ...string) error {
	proc, err := startProcess(name, bin, args, env, log)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, proc)
	c.mu.Unlock()
	return nil
}

// waitFor polls check until it succeeds. It fails at once if any started
// process exits, quoting that process's last output, and on ctx's end with
// check's last error.
func (c *ControlPlane) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	const interval = 200 * time.Millisecond
	for {
		if err := c.Err(); err != nil {
			return fmt.Errorf("controlplane: waiting for %s: %w", what, err)
		}
		lastErr := check(ctx)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: waiting for %s: %w (last check: %w)", what, ctx.Err(), lastErr)
		case <-time.After(interval):
		}
	}
}

func (c *ControlPlane) installCRDs(ctx context.Context) error {
	crds, err := apis.CRDs()
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	cs, err := apiextensionsclient.NewForConfig(c.config)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	for _, crd := range crds {
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("controlplane: creating CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := c.waitFor(ctx, "CRD "+crd.Name+" to be Established", func(ctx context.Context) error {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("CRD %s not Established yet", crd.Name)
		}); err != nil {
			return err
		}
	}
	return nil
}

// httpOK returns a check that GETs url (with a bearer token if given) and
// expects 200.
func httpOK(client *http.Client, url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// freePorts reserves n distinct loopback ports by listening on port 0 and
// releasing them together; a port could be taken again before its process
// binds it, which then shows as that process exiting during Start.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, listener := range ls {
			_ = listener.Close()
		}
	}()
	for range n {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: finding a free port: %w", err)
		}
		ls = append(ls, listener)
		ports = append(ports, listener.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
