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
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

	mu    sync.Mutex
	procs []*process // in start order

	stopOnce sync.Once
	stopErr  error
}

// identity is one client of the API server, authenticated by bearer token.
type identity struct {
	user, group, token, kubeconfig string
}

// Start runs the control plane described by opts and returns once every part
// is healthy (and, with ControllerManager, the default ServiceAccount exists).
// ctx bounds the start only: the processes run until Stop. If any process
// exits during the start, the error carries its last lines of output; on any
// error everything started so far is stopped and removed.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.BinDir == "" {
		return nil, errors.New("controlplane: Options.BinDir is required (see tools.EnsureBinaries)")
	}
	bins := map[string]string{}
	need := []string{"etcd", "kube-apiserver"}
	if opts.ControllerManager {
		need = append(need, "kube-controller-manager")
	}
	if opts.Scheduler {
		need = append(need, "kube-scheduler")
	}
	if opts.Kwok {
		need = append(need, "kwok")
	}
	for _, name := range need {
		path := filepath.Join(opts.BinDir, name)
		if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("controlplane: %s is not an executable file (run hack/tools.sh or tools.EnsureBinaries)", path)
		}
		bins[name] = path
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.StopGracePeriod <= 0 {
		opts.StopGracePeriod = 10 * time.Second
	}
	if opts.APIServerFQDN == "" {
		opts.APIServerFQDN = DefaultAPIServerFQDN
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	dir, err := os.MkdirTemp("", "karpfunc-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("controlplane: creating temp dir: %w", err)
	}
	c := &ControlPlane{dir: dir, grace: opts.StopGracePeriod, fqdn: opts.APIServerFQDN}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, stopErr)
			}
		}
	}()
	logOut := opts.Log
	if logOut == nil {
		logOut = io.Discard
	}
	log := logwriter.NewSynced(logOut)

	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]

	_, serviceNet, err := net.ParseCIDR(ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("controlplane: parsing service CIDR: %w", err)
	}
	firstServiceIP := append(net.IP(nil), serviceNet.IP.To4()...)
	firstServiceIP[3]++
	pki, err := writePKI(dir, firstServiceIP, opts.APIServerFQDN)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	c.caPEM = pki.caPEM
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)

	// The bootstrap RBAC policy already grants system:kube-controller-manager
	// and system:kube-scheduler what they need, delegated authn/authz
	// included; admin and kwok are cluster admins.
	ids := map[string]*identity{
		"admin":                   {user: "karpfunc-admin", group: "system:masters"},
		"kube-controller-manager": {user: "system:kube-controller-manager"},
		"kube-scheduler":          {user: "system:kube-scheduler"},
		"kwok":                    {user: "kwok", group: "system:masters"},
	}
	var tokens strings.Builder
	for name, id := range ids {
		if id.token, err = newToken(); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		id.kubeconfig = filepath.Join(dir, name+".kubeconfig")
		if err := writeKubeconfig(id.kubeconfig, server, pki.caPEM, id.user, id.token); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		fmt.Fprintf(&tokens, "%s,%s,%s", id.token, id.user, id.user)
		if id.group != "" {
			fmt.Fprintf(&tokens, ",%q", id.group)
		}
		tokens.WriteString("\n")
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens.String()), 0o600); err != nil {
		return nil, fmt.Errorf("controlplane: writing token file: %w", err)
	}
	c.kubeconfig = ids["admin"].kubeconfig
	c.config = &rest.Config{
		Host:            server,
		BearerToken:     ids["admin"].token,
		TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM},
		QPS:             50,
		Burst:           100,
	}

	// etcd. Data durability is worthless for a throwaway cluster; skipping
	// fsync makes it much faster on shared disks.
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := c.start("etcd", bins["etcd"], log, nil,
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	); err != nil {
		return nil, err
	}
	plainHTTP := &http.Client{Timeout: 5 * time.Second}
	if err := c.waitFor(ctx, "etcd to be healthy", httpOK(plainHTTP, etcdURL+"/health", "")); err != nil {
		return nil, err
	}

	// kube-apiserver.
	apiFlags := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "kube-apiserver"),
		"--tls-cert-file=" + pki.servingCert, "--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--token-auth-file=" + tokenFile,
		// As on AKS: kubelets join with bootstrap tokens (Secrets in
		// kube-system), then act as system:node:<name>, limited by the Node
		// authorizer and the NodeRestriction admission plugin.
		"--enable-bootstrap-token-auth=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saKey,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// Endpoints for the kubernetes Service may not be loopback addresses,
		// and nothing here runs in-cluster clients that would use them.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if err := c.start("kube-apiserver", bins["kube-apiserver"], log, nil, append(apiFlags, opts.ExtraAPIServerFlags...)...); err != nil {
		return nil, err
	}
	apiTLS, err := rest.TLSConfigFor(c.config)
	if err != nil {
		return nil, fmt.Errorf("controlplane: building TLS config: %w", err)
	}
	apiHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: apiTLS}}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", httpOK(apiHTTP, server+"/readyz", ids["admin"].token)); err != nil {
		return nil, err
	}
	if err := c.createNodeBootstrapBindings(ctx); err != nil {
		return nil, err
	}

	// kube-controller-manager and kube-scheduler serve /healthz over HTTPS
	// with a certificate they generate into --cert-dir; /healthz is always
	// allowed, and the check is on loopback to a process we just started, so
	// it skips verification rather than plumbing that CA back.
	insecureHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe, see above
	}}
	var checks []struct {
		what  string
		check func(context.Context) error
	}
	if opts.ControllerManager {
		kc := ids["kube-controller-manager"].kubeconfig
		if err := c.start("kube-controller-manager", bins["kube-controller-manager"], log, nil,
			"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
			"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
			"--cert-dir="+filepath.Join(dir, "kube-controller-manager"),
			"--leader-elect=false",
			// Every default controller: the garbage collector and the
			// disruption controller (PDB status, which the eviction API
			// enforces) among them, csrapproving and csrsigning (kubelet
			// client certificates), plus the two bootstrap-token controllers
			// that are off by default. No cloud provider: node IPAM and
			// routes stay off.
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--use-service-account-credentials=true",
			"--service-account-private-key-file="+pki.saKey,
			"--root-ca-file="+pki.caCert,
			"--cluster-signing-cert-file="+pki.caCert, "--cluster-signing-key-file="+pki.caKey,
			"--cluster-name=karpfunc-local",
		); err != nil {
			return nil, err
		}
		checks = append(checks, struct {
			what  string
			check func(context.Context) error
		}{"kube-controller-manager /healthz", httpOK(insecureHTTP, "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz", "")})
	}
	if opts.Scheduler {
		kc := ids["kube-scheduler"].kubeconfig
		if err := c.start("kube-scheduler", bins["kube-scheduler"], log, nil,
			"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
			"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort),
			"--cert-dir="+filepath.Join(dir, "kube-scheduler"),
			"--leader-elect=false",
		); err != nil {
			return nil, err
		}
		checks = append(checks, struct {
			what  string
			check func(context.Context) error
		}{"kube-scheduler /healthz", httpOK(insecureHTTP, "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", "")})
	}
	if opts.Kwok {
		// kwok loads ~/.kwok/kwok.yaml (any stages in it replace its built-in
		// ones) unless KWOK_WORKDIR points elsewhere: point it into our temp
		// dir so a developer's kwok setup cannot change the simulation. With
		// no stages configured kwok uses the ones embedded in its binary
		// (kustomize/stage/node/fast, a node heartbeat, while kwok renews node Leases;
		// kustomize/stage/pod/fast): nodes become Ready, pods Running, and
		// deleted pods go away. The server address serves /healthz.
		kwokURL := "127.0.0.1:" + strconv.Itoa(kwokPort)
		if err := c.start("kwok", bins["kwok"], log, []string{"KWOK_WORKDIR=" + filepath.Join(dir, "kwok")},
			"--kubeconfig="+ids["kwok"].kubeconfig,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"="+KwokNodeAnnotationValue,
			"--cidr="+PodCIDR,
			"--node-ip=10.240.0.1",
			// Renew each node's Lease every 10 s, as a kubelet does. Without
			// this flag kwok holds no Lease and only heartbeats node status
			// about once a minute, past kube-controller-manager's 50 s
			// node-monitor-grace-period: every node turns Unknown for a few
			// seconds each minute, the node lifecycle controller marks its
			// pods NotReady, and kwok never marks them Ready again — so PDBs
			// refuse every eviction for good.
			"--node-lease-duration-seconds=40",
			"--server-address="+kwokURL,
		); err != nil {
			return nil, err
		}
		checks = append(checks, struct {
			what  string
			check func(context.Context) error
		}{"kwok /healthz", httpOK(plainHTTP, "http://"+kwokURL+"/healthz", "")})
	}
	for _, ch := range checks {
		if err := c.waitFor(ctx, ch.what, ch.check); err != nil {
			return nil, err
		}
	}

	if opts.InstallCRDs {
		if err := c.installCRDs(ctx); err != nil {
			return nil, err
		}
	}
	if opts.ControllerManager {
		// The ServiceAccount admission plugin rejects pods in a namespace
		// whose default ServiceAccount does not exist yet.
		cs, err := kubernetes.NewForConfig(c.config)
		if err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		if err := c.waitFor(ctx, "the default ServiceAccount in namespace default", func(ctx context.Context) error {
			_, err := cs.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
			return err
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
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

// Dir is the temp dir holding data, keys and kubeconfigs; removed by Stop.
func (c *ControlPlane) Dir() string { return c.dir }

// Err reports a process that exited without Stop asking it to, with its last
// lines of output; nil while everything runs. Long tests can check it when
// something stops making progress.
func (c *ControlPlane) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, p := range c.procs {
		if err := p.unexpectedExit(); err != nil {
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
		for _, p := range procs {
			if p.name == "etcd" || p.name == "kube-apiserver" {
				core = append(core, p)
			} else {
				clients = append(clients, p)
			}
		}
		// Clients together (they do not depend on each other), then the
		// API server, then etcd.
		var wg sync.WaitGroup
		var emu sync.Mutex
		for _, p := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.stop(c.grace); err != nil {
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
	p, err := startProcess(name, bin, args, env, log)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
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
			return fmt.Errorf("controlplane: waiting for %s: %w (last check: %v)", what, ctx.Err(), lastErr)
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
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
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
