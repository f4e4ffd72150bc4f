package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/karpfunc/karpfunc/internal/logwriter"
)

// Start runs the control plane described by opts and returns once every part
// is healthy (and, with ControllerManager, the default ServiceAccount exists).
// ctx bounds the start only: the processes run until Stop. If any process
// exits during the start, the error carries its last lines of output; on any
// error everything started so far is stopped and removed.
//
// The start goes by phase: check the binaries, prepare the directory,
// certificates and identities, run etcd, run kube-apiserver, run the
// optional parts and wait for their health, then install what the cluster
// needs before anyone uses it.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	bins, err := binaries(opts)
	if err != nil {
		return nil, err
	}
	opts = withDefaults(opts)
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	dir, err := os.MkdirTemp("", "karpfunc-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("controlplane: creating temp dir: %w", err)
	}
	cp := &ControlPlane{dir: dir, grace: opts.StopGracePeriod, fqdn: opts.APIServerFQDN}
	defer func() {
		if err != nil {
			if stopErr := cp.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and cleaning up: %w)", err, stopErr)
			}
		}
	}()
	run := &startup{
		cp:        cp,
		opts:      opts,
		bins:      bins,
		log:       logwriter.NewSynced(opts.Log),
		plainHTTP: &http.Client{Timeout: 5 * time.Second},
	}
	phases := []func(context.Context) error{
		run.prepare,
		run.startEtcd,
		run.startAPIServer,
		run.startControllerManager,
		run.startScheduler,
		run.startKwok,
		run.waitHealthy,
		run.finish,
	}
	for _, phase := range phases {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// binaries checks that the programs opts needs are executable files in
// opts.BinDir and returns their paths by name.
func binaries(opts Options) (map[string]string, error) {
	if opts.BinDir == "" {
		return nil, errors.New("controlplane: Options.BinDir is required (see tools.EnsureBinaries)")
	}
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
	bins := map[string]string{}
	for _, name := range need {
		path := filepath.Join(opts.BinDir, name)
		if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("controlplane: %s is not an executable file (run hack/tools.sh or tools.EnsureBinaries)", path)
		}
		bins[name] = path
	}
	return bins, nil
}

// withDefaults fills the options left zero.
func withDefaults(opts Options) Options {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.StopGracePeriod <= 0 {
		opts.StopGracePeriod = 10 * time.Second
	}
	if opts.APIServerFQDN == "" {
		opts.APIServerFQDN = DefaultAPIServerFQDN
	}
	return opts
}

// startup is one Start in progress: what each phase leaves for the next.
type startup struct {
	cp   *ControlPlane
	opts Options
	bins map[string]string
	log  *logwriter.Synced

	ports     listenPorts
	pki       *pki
	ids       map[string]*identity
	tokenFile string
	server    string // the API server's URL
	etcdURL   string

	plainHTTP *http.Client
	// insecureHTTP probes /healthz of kube-controller-manager and
	// kube-scheduler; see startControllerManager.
	insecureHTTP *http.Client
	checks       []healthCheck // waited for together after every part started
}

// listenPorts are the loopback ports the parts listen on.
type listenPorts struct {
	etcdClient, etcdPeer, apiServer, controllerManager, scheduler, kwok int
}

// healthCheck is one part's readiness probe.
type healthCheck struct {
	what  string
	check func(context.Context) error
}

// prepare picks the ports and writes the certificates, the identities'
// kubeconfigs and the API server's token file.
func (s *startup) prepare(context.Context) error {
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	s.ports = listenPorts{
		etcdClient:        ports[0],
		etcdPeer:          ports[1],
		apiServer:         ports[2],
		controllerManager: ports[3],
		scheduler:         ports[4],
		kwok:              ports[5],
	}
	_, serviceNet, err := net.ParseCIDR(ServiceCIDR)
	if err != nil {
		return fmt.Errorf("controlplane: parsing service CIDR: %w", err)
	}
	firstServiceIP := append(net.IP(nil), serviceNet.IP.To4()...)
	firstServiceIP[3]++
	if s.pki, err = writePKI(s.cp.dir, firstServiceIP, s.opts.APIServerFQDN); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	s.cp.caPEM = s.pki.caPEM
	s.server = "https://127.0.0.1:" + strconv.Itoa(s.ports.apiServer)
	if err := s.writeIdentities(); err != nil {
		return err
	}
	admin := s.ids["admin"]
	s.cp.kubeconfig = admin.kubeconfig
	s.cp.config = &rest.Config{
		Host:            s.server,
		BearerToken:     admin.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.pki.caPEM},
		QPS:             50,
		Burst:           100,
	}
	return nil
}

// writeIdentities gives each client of the API server a token and a
// kubeconfig, and writes the token file that authenticates them. The
// bootstrap RBAC policy already grants system:kube-controller-manager and
// system:kube-scheduler what they need, delegated authn/authz included;
// admin and kwok are cluster admins.
func (s *startup) writeIdentities() error {
	s.ids = map[string]*identity{
		"admin":                   {user: "karpfunc-admin", group: "system:masters"},
		"kube-controller-manager": {user: "system:kube-controller-manager"},
		"kube-scheduler":          {user: "system:kube-scheduler"},
		"kwok":                    {user: "kwok", group: "system:masters"},
	}
	var tokens strings.Builder
	for name, id := range s.ids {
		var err error
		if id.token, err = newToken(); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
		id.kubeconfig = filepath.Join(s.cp.dir, name+".kubeconfig")
		if err := writeKubeconfig(id.kubeconfig, s.server, s.pki.caPEM, id.user, id.token); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
		fmt.Fprintf(&tokens, "%s,%s,%s", id.token, id.user, id.user)
		if id.group != "" {
			fmt.Fprintf(&tokens, ",%q", id.group)
		}
		tokens.WriteString("\n")
	}
	s.tokenFile = filepath.Join(s.cp.dir, "tokens.csv")
	if err := os.WriteFile(s.tokenFile, []byte(tokens.String()), 0o600); err != nil {
		return fmt.Errorf("controlplane: writing token file: %w", err)
	}
	return nil
}

// startEtcd runs etcd and waits until it is healthy. Data durability is
// worthless for a throwaway cluster; skipping fsync makes it much faster on
// shared disks.
func (s *startup) startEtcd(ctx context.Context) error {
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(s.ports.etcdClient)
	s.cp.etcdURL = s.etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(s.ports.etcdPeer)
	if err := s.cp.start("etcd", s.bins["etcd"], s.log, nil,
		"--name=default",
		"--data-dir="+filepath.Join(s.cp.dir, "etcd"),
		"--listen-client-urls="+s.etcdURL, "--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	); err != nil {
		return err
	}
	return s.cp.waitFor(ctx, "etcd to be healthy", httpOK(s.plainHTTP, s.etcdURL+"/health", ""))
}

// startAPIServer runs kube-apiserver, waits until it is ready and creates
// the node bootstrap bindings.
func (s *startup) startAPIServer(ctx context.Context) error {
	apiFlags := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.ports.apiServer),
		"--cert-dir=" + filepath.Join(s.cp.dir, "kube-apiserver"),
		"--tls-cert-file=" + s.pki.servingCert, "--tls-private-key-file=" + s.pki.servingKey,
		"--client-ca-file=" + s.pki.caCert,
		"--token-auth-file=" + s.tokenFile,
		// As on AKS: kubelets join with bootstrap tokens (Secrets in
		// kube-system), then act as system:node:<name>, limited by the Node
		// authorizer and the NodeRestriction admission plugin.
		"--enable-bootstrap-token-auth=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.pki.saKey,
		"--service-account-signing-key-file=" + s.pki.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// Endpoints for the kubernetes Service may not be loopback addresses,
		// and nothing here runs in-cluster clients that would use them.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if err := s.cp.start("kube-apiserver", s.bins["kube-apiserver"], s.log, nil, append(apiFlags, s.opts.ExtraAPIServerFlags...)...); err != nil {
		return err
	}
	apiTLS, err := rest.TLSConfigFor(s.cp.config)
	if err != nil {
		return fmt.Errorf("controlplane: building TLS config: %w", err)
	}
	apiHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: apiTLS}}
	if err := s.cp.waitFor(ctx, "kube-apiserver /readyz", httpOK(apiHTTP, s.server+"/readyz", s.ids["admin"].token)); err != nil {
		return err
	}
	if err := s.cp.createNodeBootstrapBindings(ctx); err != nil {
		return err
	}
	// kube-controller-manager and kube-scheduler serve /healthz over HTTPS
	// with a certificate they generate into --cert-dir; /healthz is always
	// allowed, and the check is on loopback to a process we just started, so
	// it skips verification rather than plumbing that CA back.
	s.insecureHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe, see above
	}}
	return nil
}

// startControllerManager runs kube-controller-manager when opts ask for it.
func (s *startup) startControllerManager(context.Context) error {
	if !s.opts.ControllerManager {
		return nil
	}
	kubeconfig := s.ids["kube-controller-manager"].kubeconfig
	if err := s.cp.start("kube-controller-manager", s.bins["kube-controller-manager"], s.log, nil,
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.ports.controllerManager),
		"--cert-dir="+filepath.Join(s.cp.dir, "kube-controller-manager"),
		"--leader-elect=false",
		// Every default controller: the garbage collector and the
		// disruption controller (PDB status, which the eviction API
		// enforces) among them, csrapproving and csrsigning (kubelet
		// client certificates), plus the two bootstrap-token controllers
		// that are off by default. No cloud provider: node IPAM and
		// routes stay off.
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+s.pki.saKey,
		"--root-ca-file="+s.pki.caCert,
		"--cluster-signing-cert-file="+s.pki.caCert, "--cluster-signing-key-file="+s.pki.caKey,
		"--cluster-name=karpfunc-local",
	); err != nil {
		return err
	}
	s.checks = append(s.checks, healthCheck{"kube-controller-manager /healthz",
		httpOK(s.insecureHTTP, "https://127.0.0.1:"+strconv.Itoa(s.ports.controllerManager)+"/healthz", "")})
	return nil
}

// startScheduler runs kube-scheduler when opts ask for it.
func (s *startup) startScheduler(context.Context) error {
	if !s.opts.Scheduler {
		return nil
	}
	kubeconfig := s.ids["kube-scheduler"].kubeconfig
	if err := s.cp.start("kube-scheduler", s.bins["kube-scheduler"], s.log, nil,
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.ports.scheduler),
		"--cert-dir="+filepath.Join(s.cp.dir, "kube-scheduler"),
		"--leader-elect=false",
	); err != nil {
		return err
	}
	s.checks = append(s.checks, healthCheck{"kube-scheduler /healthz",
		httpOK(s.insecureHTTP, "https://127.0.0.1:"+strconv.Itoa(s.ports.scheduler)+"/healthz", "")})
	return nil
}

// startKwok runs kwok when opts ask for it.
//
// kwok loads ~/.kwok/kwok.yaml (any stages in it replace its built-in
// ones) unless KWOK_WORKDIR points elsewhere: point it into our temp dir so
// a developer's kwok setup cannot change the simulation. With no stages
// configured kwok uses the ones embedded in its binary
// (kustomize/stage/node/fast, a node heartbeat, while kwok renews node
// Leases; kustomize/stage/pod/fast): nodes become Ready, pods Running, and
// deleted pods go away. The server address serves /healthz.
func (s *startup) startKwok(context.Context) error {
	if !s.opts.Kwok {
		return nil
	}
	kwokURL := "127.0.0.1:" + strconv.Itoa(s.ports.kwok)
	if err := s.cp.start("kwok", s.bins["kwok"], s.log, []string{"KWOK_WORKDIR=" + filepath.Join(s.cp.dir, "kwok")},
		"--kubeconfig="+s.ids["kwok"].kubeconfig,
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
		return err
	}
	s.checks = append(s.checks, healthCheck{"kwok /healthz", httpOK(s.plainHTTP, "http://"+kwokURL+"/healthz", "")})
	return nil
}

// waitHealthy waits for the optional parts' health checks, in start order.
func (s *startup) waitHealthy(ctx context.Context) error {
	for _, health := range s.checks {
		if err := s.cp.waitFor(ctx, health.what, health.check); err != nil {
			return err
		}
	}
	return nil
}

// finish installs the CRDs and waits for the default ServiceAccount, when
// opts ask for them: the ServiceAccount admission plugin rejects pods in a
// namespace whose default ServiceAccount does not exist yet.
func (s *startup) finish(ctx context.Context) error {
	if s.opts.InstallCRDs {
		if err := s.cp.installCRDs(ctx); err != nil {
			return err
		}
	}
	if !s.opts.ControllerManager {
		return nil
	}
	clientset, err := kubernetes.NewForConfig(s.cp.config)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return s.cp.waitFor(ctx, "the default ServiceAccount in namespace default", func(ctx context.Context) error {
		_, err := clientset.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}
