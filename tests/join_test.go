package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/bootstraptoken"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// TestNodeJoin launches VMs through the real launcher and lets the ARM
// emulator boot them like the AKS node image: each kubelet has only its
// customData. The API server's audit log shows who created each Node.
func TestNodeJoin(t *testing.T) {
	dir := t.TempDir()
	auditLog, policy := filepath.Join(dir, "audit.log"), filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create"]
  resources: [{group: "", resources: ["nodes"]}]
- level: None
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := testenv.ControlPlane(t, controlplane.Options{ControllerManager: true, Kwok: true,
		ExtraAPIServerFlags: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog}})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := t.Context()

	cat, err := catalog.Default(testenv.Location)
	if err != nil {
		t.Fatal(err)
	}
	arm, err := armemulator.Start(ctx, armemulator.Options{SubscriptionIDs: []string{testenv.SubscriptionID},
		OpDelay: 10 * time.Millisecond, Kube: cp.RESTConfig(), Logger: slog.New(slog.DiscardHandler), Network: testenv.Network(),
		DNS: map[string]string{cp.APIServerFQDN(): cp.APIServerAddr()},
		NodeResources: func(sku string, maxPods int32) (corev1.ResourceList, string, bool) {
			it, ok := cat.Get(sku)
			if !ok {
				return nil, "", false
			}
			return it.WithMaxPods(maxPods).Capacity.DeepCopy(), it.Architecture, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = arm.Close() })
	disco, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	v, err := disco.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := azure.ClusterBootstrapFromEnv(func(k string) string {
		return map[string]string{azure.EnvClusterEndpoint: "https://" + cp.APIServerFQDN() + ":443"}[k]
	}, cp.CACertPEM(), v.GitVersion)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := bootstraptoken.New(bootstraptoken.Options{Kube: kube, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	launcher := func(tokens azure.TokenSource) *azure.Launcher {
		sshKey, err := azure.GenerateSSHPublicKey("join-test")
		if err != nil {
			t.Fatal(err)
		}
		l, err := azure.NewLauncher(azure.Options{SubscriptionID: testenv.SubscriptionID, ResourceGroup: testenv.ResourceGroup,
			Location: testenv.Location, ClusterName: testenv.ClusterName, SubnetID: testenv.SubnetID(), SSHPublicKey: sshKey,
			Endpoint: arm.URL(), CACertPEM: arm.CACertPEM(), Token: arm.Token(), PollFrequency: time.Second,
			Bootstrap: &cluster, BootstrapTokens: tokens})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	d2, _ := cat.Get("Standard_D2s_v5")
	reservations, err := d2.WithMaxPods(30).Reservations()
	if err != nil {
		t.Fatal(err)
	}
	request := func(name string) azure.LaunchRequest {
		return azure.LaunchRequest{Name: name, NodePool: "default", InstanceType: "Standard_D2s_v5", Zone: "eastus-1", MaxPods: 30,
			Reservations: &reservations,
			Labels: map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: "on-demand",
				"team.example.com/owner": "a", "example.kubernetes.io/restricted": "x"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}}
	}

	// A good VM, one with a token the API server never issued, one with an
	// expired token.
	if _, err := launcher(tokens).Create(ctx, request("join-good")); err != nil {
		t.Fatal(err)
	}
	if _, err := launcher(azure.StaticToken("zzzzzz.zzzzzzzzzzzzzzzz")).Create(ctx, request("join-badtoken")); err != nil {
		t.Fatal(err)
	}
	expired := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-exp000", Namespace: "kube-system"},
		Type: corev1.SecretTypeBootstrapToken, StringData: map[string]string{"token-id": "exp000", "token-secret": "0000000000000000",
			"expiration": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), "usage-bootstrap-authentication": "true",
			"auth-extra-groups": controlplane.AKSBootstrapTokenGroups}}
	if err := kube.Create(ctx, expired); err != nil {
		t.Fatal(err)
	}
	if _, err := launcher(azure.StaticToken("exp000.0000000000000000")).Create(ctx, request("join-expired")); err != nil {
		t.Fatal(err)
	}
	// A valid token in a group the cluster does not bind to TLS
	// bootstrapping: it authenticates, but gets no node certificate.
	unbound := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-grp000", Namespace: "kube-system"},
		Type: corev1.SecretTypeBootstrapToken, StringData: map[string]string{"token-id": "grp000", "token-secret": "0000000000000000",
			"expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "usage-bootstrap-authentication": "true",
			"auth-extra-groups": "system:bootstrappers:not-the-clusters"}}
	if err := kube.Create(ctx, unbound); err != nil {
		t.Fatal(err)
	}
	if _, err := launcher(azure.StaticToken("grp000.0000000000000000")).Create(ctx, request("join-unbound")); err != nil {
		t.Fatal(err)
	}

	node := &corev1.Node{}
	eventually(t, time.Minute, "join-good registered and Ready (kwok)", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKey{Name: "join-good"}, node); err != nil {
			return false, fmt.Sprintf("%v; boot: %s", err, arm.BootError("join-good"))
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, "node not Ready"
	})

	t.Run("the Node was created by system:node:join-good and nobody else created a Node", func(t *testing.T) {
		var creators []string
		eventually(t, 10*time.Second, "the node create in the audit log", func() (bool, string) {
			creators = nodeCreators(t, auditLog)
			return len(creators) > 0, "no successful node create audited yet"
		})
		if len(creators) != 1 || creators[0] != "system:node:join-good" {
			t.Errorf("successful Node creates by %v, want only system:node:join-good", creators)
		}
	})

	t.Run("the Node carries its kubelet flags' labels and taints; NodeRestriction's reserved labels are left to registration", func(t *testing.T) {
		for k, want := range map[string]string{karpv1.NodePoolLabelKey: "default", "team.example.com/owner": "a",
			"node.kubernetes.io/instance-type": "Standard_D2s_v5", "topology.kubernetes.io/zone": "eastus-1",
			azure.LabelAKSRole: "agent", karpv1.NodeDoNotSyncTaintsLabelKey: "true"} {
			if got := node.Labels[k]; got != want {
				t.Errorf("label %s = %q, want %q", k, got, want)
			}
		}
		if _, ok := node.Labels["example.kubernetes.io/restricted"]; ok {
			t.Error("the kubelet set a kubernetes.io label off NodeRestriction's allowlist")
		}
		var keys []string
		for _, tn := range node.Spec.Taints {
			if !strings.HasPrefix(tn.Key, "node.kubernetes.io/") { // the node lifecycle controller's
				keys = append(keys, tn.ToString())
			}
		}
		if strings.Join(keys, ",") != "dedicated=x:NoSchedule,karpenter.sh/unregistered:NoExecute" {
			t.Errorf("taints = %v", keys)
		}
		if pods := node.Status.Capacity[corev1.ResourcePods]; pods.Value() != 30 {
			t.Errorf("pod capacity %s, want --max-pods=30", pods.String())
		}
	})

	t.Run("NodeRestriction limits a node to its own Node and allowed labels", func(t *testing.T) {
		cfg := cp.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:join-good", Groups: []string{"system:nodes", "system:authenticated"}}
		asNode := testenv.Client(t, cfg)
		other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}}
		if err := asNode.Create(ctx, other); !apierrors.IsForbidden(err) {
			t.Errorf("system:node:join-good creating Node someone-else: %v, want Forbidden", err)
		}
		own := &corev1.Node{}
		if err := asNode.Get(ctx, client.ObjectKey{Name: "join-good"}, own); err != nil {
			t.Fatal(err)
		}
		own.Labels["example.kubernetes.io/restricted"] = "x"
		if err := asNode.Update(ctx, own); !apierrors.IsForbidden(err) {
			t.Errorf("system:node:join-good setting a kubernetes.io label off the allowlist: %v, want Forbidden", err)
		}
	})

	t.Run("its CSR was requested with the bootstrap token, approved and issued", func(t *testing.T) {
		token, err := tokens.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var csrs certificatesv1.CertificateSigningRequestList
		if err := kube.List(ctx, &csrs); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range csrs.Items {
			if c.Spec.Username != "system:bootstrap:"+bootstraptoken.ID(token) {
				continue
			}
			found = true
			approved := false
			for _, cond := range c.Status.Conditions {
				approved = approved || (cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue)
			}
			if !approved || len(c.Status.Certificate) == 0 || c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
				t.Errorf("CSR %s: approved %v, certificate %d bytes, signer %s", c.Name, approved, len(c.Status.Certificate), c.Spec.SignerName)
			}
		}
		if !found {
			t.Errorf("no CSR by system:bootstrap:%s among %d", bootstraptoken.ID(token), len(csrs.Items))
		}
		s := &corev1.Secret{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + bootstraptoken.ID(token)}, s); err != nil {
			t.Fatal(err)
		}
		if exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"])); err != nil || time.Until(exp) < time.Hour {
			t.Errorf("token Secret expiration %q (%v), want over an hour ahead", s.Data["expiration"], err)
		}
	})

	t.Run("VMs with a bad or an expired token never join", func(t *testing.T) {
		for _, vm := range []string{"join-badtoken", "join-expired"} {
			eventually(t, 30*time.Second, vm+" refused", func() (bool, string) {
				msg := arm.BootError(vm)
				return strings.Contains(msg, "Unauthorized"), "boot error: " + msg
			})
			err := kube.Get(ctx, client.ObjectKey{Name: vm}, &corev1.Node{})
			if client.IgnoreNotFound(err) != nil || err == nil {
				t.Errorf("node %s: Get = %v, want NotFound", vm, err)
			}
		}
	})

	t.Run("a VM whose token's group the cluster does not bind never joins", func(t *testing.T) {
		eventually(t, 30*time.Second, "join-unbound refused", func() (bool, string) {
			msg := arm.BootError("join-unbound")
			return strings.Contains(msg, "forbidden"), "boot error: " + msg
		})
		err := kube.Get(ctx, client.ObjectKey{Name: "join-unbound"}, &corev1.Node{})
		if client.IgnoreNotFound(err) != nil || err == nil {
			t.Errorf("node join-unbound: Get = %v, want NotFound", err)
		}
	})

	t.Run("the Node goes with its VM", func(t *testing.T) {
		if err := launcher(tokens).Delete(ctx, "join-good"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "node join-good deleted", func() (bool, string) {
			err := kube.Get(context.Background(), client.ObjectKey{Name: "join-good"}, &corev1.Node{})
			return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprintf("Get: %v", err)
		})
	})
}

// nodeCreators are the users of the successful Node creates in the audit log.
func nodeCreators(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var users []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string                    `json:"stage"`
			Verb      string                    `json:"verb"`
			User      struct{ Username string } `json:"user"`
			ObjectRef struct{ Resource string } `json:"objectRef"`
			Status    struct{ Code int }        `json:"responseStatus"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Stage == "ResponseComplete" && ev.Verb == "create" && ev.ObjectRef.Resource == "nodes" && ev.Status.Code == 201 {
			users = append(users, ev.User.Username)
		}
	}
	return users
}
