package armemulator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KwokNodeAnnotation marks a Node as simulated; kwok is started with
// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake and then
// keeps it Ready and runs its pods.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// nodeWorker applies Node creations and deletions in the order the emulator
// decided them, off the request path, retrying while the API server is
// unavailable.
type nodeWorker struct {
	client kubernetes.Interface
	log    *slog.Logger

	mu     sync.Mutex
	queue  []nodeJob
	wanted map[string]bool // node name -> should exist
	signal chan struct{}

	onDone func(created bool)
}

type nodeJob struct {
	node     *corev1.Node // create when set
	name     string
	attempts int
}

const maxNodeAttempts = 100

func newNodeWorker(cfg *rest.Config, log *slog.Logger) (*nodeWorker, error) {
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &nodeWorker{client: client, log: log, wanted: map[string]bool{}, signal: make(chan struct{}, 1)}, nil
}

func (nw *nodeWorker) create(node *corev1.Node) {
	nw.mu.Lock()
	nw.wanted[node.Name] = true
	nw.queue = append(nw.queue, nodeJob{node: node, name: node.Name})
	nw.mu.Unlock()
	nw.kick()
}

func (nw *nodeWorker) delete(name string) {
	nw.mu.Lock()
	delete(nw.wanted, name)
	nw.queue = append(nw.queue, nodeJob{name: name})
	nw.mu.Unlock()
	nw.kick()
}

func (nw *nodeWorker) kick() {
	select {
	case nw.signal <- struct{}{}:
	default:
	}
}

func (nw *nodeWorker) run(ctx context.Context) {
	for {
		nw.mu.Lock()
		var job nodeJob
		have := len(nw.queue) > 0
		if have {
			job, nw.queue = nw.queue[0], nw.queue[1:]
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
		if err := nw.apply(ctx, job); err != nil {
			if ctx.Err() != nil {
				return
			}
			job.attempts++
			if job.attempts >= maxNodeAttempts {
				nw.log.Error("giving up on node", "node", job.name, "create", job.node != nil, "error", err)
				continue
			}
			nw.log.Warn("node operation failed, will retry", "node", job.name, "create", job.node != nil, "error", err)
			nw.mu.Lock()
			nw.queue = append(nw.queue, job)
			nw.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

func (nw *nodeWorker) apply(ctx context.Context, job nodeJob) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if job.node == nil {
		err := nw.client.CoreV1().Nodes().Delete(ctx, job.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil {
			nw.log.Info("node deleted", "node", job.name)
			if nw.onDone != nil {
				nw.onDone(false)
			}
		}
		return nil
	}
	nw.mu.Lock()
	wanted := nw.wanted[job.name]
	nw.mu.Unlock()
	if !wanted {
		return nil // its VM went away before it could join
	}
	_, err := nw.client.CoreV1().Nodes().Create(ctx, job.node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	nw.log.Info("node registered", "node", job.name, "providerID", job.node.Spec.ProviderID)
	if nw.onDone != nil {
		nw.onDone(true)
	}
	return nil
}
