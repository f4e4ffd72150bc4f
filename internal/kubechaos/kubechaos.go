// Package kubechaos makes the real kube-apiserver answer some of karpfunc's
// writes with the failures a busy API server gives: 409 Conflict (another
// writer changed the object first) and 429 TooManyRequests (API Priority
// and Fairness shedding load, with a Retry-After). It is a validating
// admission webhook the API server calls, so the handler sees the API
// server's own responses through its ordinary client, under its own
// identity, with nothing in between.
//
// Which request fails is a function of the seed and the request's
// identity — resource, object name and the n-th write to that object —
// not of timing, so a seed replays the same schedule. failurePolicy is
// Ignore: a stopped injector never blocks the cluster.
package kubechaos

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/testcert"
)

// Rule fails a fraction Rate of the writes that match it.
type Rule struct {
	// Kind names the fault in Counts and the schedule.
	Kind string
	// Resource is "nodeclaims", "pods/eviction", "nodes", "configmaps",
	// "leases"... (Subresource after a slash).
	Resource string
	// Operation is CREATE, UPDATE or DELETE.
	Operation string
	Rate      float64
	// Code is 409 or 429.
	Code int32
	// RetryAfterSeconds is sent with a 429.
	RetryAfterSeconds int32
}

// Injection is one write the injector failed.
type Injection struct {
	Resource, Operation, Name string
	Attempt                   int
	Kind                      string
}

func (i Injection) String() string {
	return fmt.Sprintf("kube %s %s %s attempt %d: %s", i.Operation, i.Resource, i.Name, i.Attempt, i.Kind)
}

// Options configure Start.
type Options struct {
	Seed  int64
	Rules []Rule
	// Username, when set, limits faults to that user's requests (the
	// handler's identity); otherwise every matching write may fail.
	Username string
}

// Injector is a running fault webhook.
type Injector struct {
	opts     Options
	srv      *http.Server
	ln       net.Listener
	caPEM    []byte
	mu       sync.Mutex
	off      bool
	probed   bool
	attempts map[string]int
	schedule []Injection
	counts   map[string]int
}

// Start serves the webhook on loopback and registers it with the API server
// behind kube (a ValidatingWebhookConfiguration named "karpfunc-kubechaos").
func Start(ctx context.Context, kube client.Client, opts Options) (*Injector, error) {
	cert, caPEM, err := testcert.SelfSigned("karpfunc-kubechaos")
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	in := &Injector{opts: opts, ln: ln, caPEM: caPEM, attempts: map[string]int{}, counts: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", in.serve)
	in.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = in.srv.Serve(ln) }()
	if err := kube.Create(ctx, in.configuration()); err != nil {
		_ = in.srv.Close()
		return nil, fmt.Errorf("registering the fault webhook: %w", err)
	}
	// The API server loads webhook configurations from a watch: wait until
	// it calls this one (a dry-run create of the probe ConfigMap).
	for deadline := time.Now().Add(15 * time.Second); ; {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: metav1.NamespaceDefault}}
		_ = kube.Create(ctx, probe, client.DryRunAll)
		in.mu.Lock()
		ready := in.probed
		in.mu.Unlock()
		if ready {
			return in, nil
		}
		if time.Now().After(deadline) {
			_ = in.Close(context.WithoutCancel(ctx), kube)
			return nil, fmt.Errorf("the API server never called the fault webhook")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probeName is the ConfigMap whose dry-run create tells Start the webhook
// is in use; it is always allowed.
const probeName = "karpfunc-kubechaos-probe"

func (in *Injector) configuration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := "https://" + in.ln.Addr().String() + "/validate"
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	var rules []admissionregistrationv1.RuleWithOperations
	for _, rule := range in.opts.Rules {
		group := "karpenter.sh"
		switch rule.Resource {
		case "pods/eviction", "nodes", "configmaps", "pods", "events":
			group = ""
		case "leases":
			group = "coordination.k8s.io"
		}
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationType(rule.Operation)},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{rule.Resource}},
		})
	}
	var conditions []admissionregistrationv1.MatchCondition
	if in.opts.Username != "" {
		conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: "handler-only",
			Expression: fmt.Sprintf("request.userInfo.username == %q", in.opts.Username)})
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "karpfunc-kubechaos"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "kubechaos.karpfunc.local",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: in.caPEM},
			Rules:                   rules,
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         conditions,
		}, {
			// Start's readiness probe, whoever writes it.
			Name:         "probe.kubechaos.karpfunc.local",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: in.caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "probe-only",
				Expression: fmt.Sprintf("request.name == %q", probeName)}},
		}},
	}
}

func (in *Injector) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resource := req.Resource.Resource
	if req.SubResource != "" {
		resource += "/" + req.SubResource
	}
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Name == probeName {
		in.mu.Lock()
		in.probed = true
		in.mu.Unlock()
	} else if rule, attempt, ok := in.decide(resource, string(req.Operation), req.Namespace+"/"+req.Name); ok {
		resp.Allowed = false
		status := &metav1.Status{Status: metav1.StatusFailure, Code: rule.Code}
		switch rule.Code {
		case http.StatusConflict:
			status.Reason = metav1.StatusReasonConflict
			status.Message = fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again (injected, attempt %d)", resource, req.Name, attempt)
		case http.StatusTooManyRequests:
			status.Reason = metav1.StatusReasonTooManyRequests
			status.Message = "Too many requests, please try again later. (injected: API Priority and Fairness rejected the request)"
			status.Details = &metav1.StatusDetails{RetryAfterSeconds: rule.RetryAfterSeconds}
		}
		resp.Result = status
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// decide returns the rule that fails this write, if any.
func (in *Injector) decide(resource, operation, name string) (Rule, int, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.off {
		return Rule{}, 0, false
	}
	key := operation + " " + resource + " " + name
	in.attempts[key]++
	attempt := in.attempts[key]
	for i, rule := range in.opts.Rules {
		if rule.Resource != resource || rule.Operation != operation {
			continue
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "%d/%s/%d/%d", in.opts.Seed, key, attempt, i))
		if float64(binary.BigEndian.Uint64(sum[:8])>>11)/(1<<53) >= rule.Rate {
			continue
		}
		in.counts[rule.Kind]++
		in.schedule = append(in.schedule, Injection{Resource: resource, Operation: operation, Name: name, Attempt: attempt, Kind: rule.Kind})
		return rule, attempt, true
	}
	return Rule{}, 0, false
}

// Stop turns every fault off; the webhook keeps answering "allowed".
func (in *Injector) Stop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.off = true
}

// Close unregisters the webhook and stops its server.
func (in *Injector) Close(ctx context.Context, kube client.Client) error {
	in.Stop()
	err := kube.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "karpfunc-kubechaos"}})
	_ = in.srv.Close()
	return client.IgnoreNotFound(err)
}

// Counts returns how many writes each Kind failed.
func (in *Injector) Counts() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]int, len(in.counts))
	for key, count := range in.counts {
		out[key] = count
	}
	return out
}

// Schedule returns every failed write so far, in order.
func (in *Injector) Schedule() []Injection {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Injection(nil), in.schedule...)
}
