package armemulator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// KwokNodeAnnotation marks a Node as simulated; kwok is started with
// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake and then
// keeps it Ready and runs its pods. The emulated kubelet registers its Node
// with it: from registration on, kwok plays the kubelet.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// nodeWorker is the kubelets of the booted VMs and the cloud node manager.
//
// Each booted VM's kubelet joins on its own, with nothing but what its
// customData gave it: it authenticates with the TLS bootstrap token, submits
// a CSR for system:node:<name>, waits for kube-controller-manager to approve
// and sign it, and registers its Node with that certificate, under the Node
// authorizer and NodeRestriction. It retries until it joins or its VM goes.
//
// Deleting the Node of a VM that is gone is the cloud node manager's job in
// AKS; admin (Options.Kube) does it here, in the order the emulator decided.
type nodeWorker struct {
	ctx   context.Context
	admin kubernetes.Interface
	dns   map[string]string
	log   *slog.Logger

	mu      sync.Mutex
	wanted  map[string]bool   // node name -> its VM exists
	joinErr map[string]string // node name -> why its kubelet has not joined (yet)
	// gpuProblem: node name -> why it does not advertise its GPUs (gpu.go)
	gpuProblem map[string]string
	queue      []string // Nodes to delete, in order
	signal     chan struct{}
	wg         sync.WaitGroup

	onDone func(created bool)
}

// joinRetry is how long a kubelet waits between attempts to join.
const joinRetry = time.Second

const maxNodeAttempts = 100

func newNodeWorker(ctx context.Context, cfg *rest.Config, dns map[string]string, log *slog.Logger) (*nodeWorker, error) {
	admin, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &nodeWorker{ctx: ctx, admin: admin, dns: dns, log: log, wanted: map[string]bool{}, joinErr: map[string]string{}, gpuProblem: map[string]string{},
		signal: make(chan struct{}, 1)}, nil
}

// kubelet is one VM's kubelet: its node template and provisioning, and
// its size's NVIDIA GPUs with what provisioning made of them (gpu.go).
type kubelet struct {
	node *corev1.Node
	prov *provisioning
	gpus resource.Quantity
	gpu  gpuState
}

// start boots k's kubelet: it joins in the background.
func (nw *nodeWorker) start(k kubelet) {
	ctx := nw.ctx
	name := k.node.Name
	nw.mu.Lock()
	nw.wanted[name] = true
	delete(nw.joinErr, name)
	nw.mu.Unlock()
	nw.wg.Add(1)
	go func() {
		defer nw.wg.Done()
		for attempt := 1; ; attempt++ {
			if !nw.isWanted(name) {
				return
			}
			err := nw.join(ctx, k)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				return
			}
			nw.mu.Lock()
			nw.joinErr[name] = err.Error()
			nw.mu.Unlock()
			if attempt == 1 || attempt%30 == 0 {
				nw.log.Warn("kubelet has not joined, will retry", "node", name, "attempt", attempt, "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(joinRetry):
			}
		}
	}()
}

func (nw *nodeWorker) isWanted(name string) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.wanted[name]
}

// joinError is why the kubelet of node name has not joined ("" if it did
// or is not running).
func (nw *nodeWorker) joinError(name string) string {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.joinErr[name]
}

// join is one attempt of TLS bootstrapping and registration.
func (nw *nodeWorker) join(ctx context.Context, k kubelet) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	name := k.node.Name
	prov := k.prov
	addr, ok := nw.dns[prov.apiServer]
	if !ok {
		return fmt.Errorf("cannot reach the API server: no such host %s", prov.apiServer)
	}
	server := rest.Config{Host: "https://" + addr, Timeout: 10 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{CAData: prov.caPEM, ServerName: prov.apiServer}}

	// TLS bootstrap: a client certificate for system:node:<name>.
	bootstrap := server
	bootstrap.BearerToken = prov.token
	bootClient, err := kubernetes.NewForConfig(&bootstrap)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	csrPEM, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		return err
	}
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, bootClient, csrPEM, "", certificatesv1.KubeAPIServerClientKubeletSignerName,
		nil, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		return fmt.Errorf("TLS bootstrap: submitting the node client CSR with the bootstrap token: %w", err)
	}
	certPEM, err := csr.WaitForCertificate(ctx, bootClient, reqName, reqUID)
	if err != nil {
		return fmt.Errorf("TLS bootstrap: waiting for CSR %s to be approved and signed: %w", reqName, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}

	// Registration as system:node:<name>.
	kubeletCfg := server
	kubeletCfg.CertData = certPEM
	kubeletCfg.KeyData = keyPEM
	client, err := kubernetes.NewForConfig(&kubeletCfg)
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Nodes().Create(ctx, k.node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil // registered by an earlier attempt
	} else if err != nil {
		return fmt.Errorf("registering node %s as system:node:%s: %w", name, name, err)
	} else {
		nw.log.Info("node registered", "node", name, "providerID", k.node.Spec.ProviderID, "csr", reqName)
		if nw.onDone != nil {
			nw.onDone(true)
		}
	}
	nw.mu.Lock()
	delete(nw.joinErr, name)
	gone := !nw.wanted[name]
	nw.mu.Unlock()
	if gone { // its VM went away while it joined
		nw.delete(name)
		return nil
	}
	if k.gpus.Sign() > 0 {
		nw.startDevicePlugin(k, client)
	}
	return nil
}

// startDevicePlugin runs the device plugin manager of k's kubelet, with
// the kubelet's own credentials, until its GPUs are advertised or its VM
// goes.
func (nw *nodeWorker) startDevicePlugin(k kubelet, client kubernetes.Interface) {
	name := k.node.Name
	dp := &devicePlugin{node: name, gpus: k.gpus, state: k.gpu, client: client, problem: nw.setGPUProblem}
	nw.wg.Add(1)
	go func() {
		defer nw.wg.Done()
		dp.run(nw.ctx, func() bool { return nw.isWanted(name) && nw.ctx.Err() == nil })
	}()
}

func (nw *nodeWorker) setGPUProblem(node, why string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if why == "" {
		delete(nw.gpuProblem, node)
	} else {
		nw.gpuProblem[node] = why
	}
}

// gpuProblemOf says why node does not advertise its NVIDIA GPUs ("" when
// it does, or has none).
func (nw *nodeWorker) gpuProblemOf(node string) string {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.gpuProblem[node]
}

// delete removes the Node of a VM that is gone (and stops its kubelet).
func (nw *nodeWorker) delete(name string) {
	nw.mu.Lock()
	delete(nw.wanted, name)
	delete(nw.joinErr, name)
	nw.queue = append(nw.queue, name)
	nw.mu.Unlock()
	select {
	case nw.signal <- struct{}{}:
	default:
	}
}

// run applies Node deletions in order, retrying while the API server is
// unavailable, until ctx ends; then it waits for the kubelets to stop.
func (nw *nodeWorker) run(ctx context.Context) {
	defer nw.wg.Wait()
	attempts := map[string]int{}
	for {
		nw.mu.Lock()
		var name string
		have := len(nw.queue) > 0
		if have {
			name = nw.queue[0]
			nw.queue = nw.queue[1:]
		}
		nw.mu.Unlock()
		if !have {
			select {
			case <-ctx.Done():
				return
			case <-nw.signal:
			}
			continue
		}
		if nw.isWanted(name) {
			continue // a VM of the same name booted again
		}
		if err := nw.deleteNode(ctx, name); err != nil {
			if ctx.Err() != nil {
				return
			}
			attempts[name]++
			if attempts[name] >= maxNodeAttempts {
				nw.log.Error("giving up deleting node", "node", name, "error", err)
				delete(attempts, name)
				continue
			}
			nw.log.Warn("deleting node failed, will retry", "node", name, "error", err)
			nw.mu.Lock()
			nw.queue = append(nw.queue, name)
			nw.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		delete(attempts, name)
	}
}

func (nw *nodeWorker) deleteNode(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := nw.admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	nw.log.Info("node deleted", "node", name)
	if nw.onDone != nil {
		nw.onDone(false)
	}
	return nil
}
