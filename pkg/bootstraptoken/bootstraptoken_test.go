package bootstraptoken_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/bootstraptoken"
)

// TestManager runs against a real API server with bootstrap-token
// authentication on, so a token the Manager hands out is checked by the
// authenticator itself.
func TestManager(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := t.Context()

	var logs bytes.Buffer
	clk := clocktesting.NewFakePassiveClock(time.Now())
	m, err := bootstraptoken.New(bootstraptoken.Options{Kube: kube, TTL: 2 * time.Hour, MinValidity: time.Hour, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}

	// A token someone else made (AKS, kubeadm) is never touched, even expired.
	foreign := tokenSecret("abcdef", "0123456789abcdef", clk.Now().Add(-time.Minute), nil)
	if err := kube.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}

	first, err := m.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bootstraptoken.Valid(first) {
		t.Fatalf("token %q is not of the form [a-z0-9]{6}.[a-z0-9]{16}", first)
	}
	id := bootstraptoken.ID(first)

	t.Run("the Secret is a bootstrap token as the authenticator reads it", func(t *testing.T) {
		s := &corev1.Secret{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + id}, s); err != nil {
			t.Fatal(err)
		}
		exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"]))
		if err != nil {
			t.Fatalf("expiration %q: %v", s.Data["expiration"], err)
		}
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"type", s.Type, corev1.SecretTypeBootstrapToken},
			{"token-id", string(s.Data["token-id"]), id},
			{"token-secret", string(s.Data["token-secret"]), strings.SplitN(first, ".", 2)[1]},
			{"usage-bootstrap-authentication", string(s.Data["usage-bootstrap-authentication"]), "true"},
			{"auth-extra-groups", string(s.Data["auth-extra-groups"]), controlplane.AKSBootstrapTokenGroups},
			{"managed-by label", s.Labels[bootstraptoken.LabelManagedBy], bootstraptoken.ManagedByValue},
			{"expiration about TTL from now", exp.Sub(clk.Now()).Round(time.Minute), 2 * time.Hour},
		} {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
			}
		}
	})

	t.Run("the API server authenticates it as a bootstrapper", func(t *testing.T) {
		cfg := &rest.Config{Host: cp.RESTConfig().Host, BearerToken: first, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertPEM()}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The API server's bootstrap token authenticator reads Secrets
		// through its informer's lister (kubernetes
		// plugin/pkg/auth/authenticator/token/bootstrap), so a token just
		// created is Unauthorized until the informer has it; a kubelet
		// retries the same way.
		var review *authenticationv1.SelfSubjectReview
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			review, err = cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if !apierrors.IsUnauthorized(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		u := review.Status.UserInfo
		if u.Username != "system:bootstrap:"+id {
			t.Errorf("username = %q, want system:bootstrap:%s", u.Username, id)
		}
		for _, g := range []string{"system:bootstrappers", controlplane.AKSBootstrapTokenGroups} {
			if !contains(u.Groups, g) {
				t.Errorf("groups %v lack %s", u.Groups, g)
			}
		}
	})

	t.Run("a valid token is reused, also by a fresh Manager", func(t *testing.T) {
		again, err := m.Token(ctx)
		if err != nil || again != first {
			t.Fatalf("second Token() = %q, %v; want the first token", again, err)
		}
		fresh, err := bootstraptoken.New(bootstraptoken.Options{Kube: kube, TTL: 2 * time.Hour, MinValidity: time.Hour, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := fresh.Token(ctx); err != nil || got != first {
			t.Fatalf("fresh Manager Token() = %q, %v; want the stored token", got, err)
		}
		if n := len(ours(t, kube)); n != 1 {
			t.Errorf("%d karpfunc token Secrets, want 1", n)
		}
	})

	var second string
	t.Run("a token closer than MinValidity to expiry is rotated", func(t *testing.T) {
		clk.SetTime(clk.Now().Add(61 * time.Minute))
		second, err = m.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if second == first {
			t.Fatal("token not rotated with 59 minutes of validity left (MinValidity 1h)")
		}
		if n := len(ours(t, kube)); n != 2 {
			t.Errorf("%d karpfunc token Secrets, want 2 (the old one is still valid for VMs launched with it)", n)
		}
	})

	t.Run("an expired token's slot is reused, others' tokens are not touched", func(t *testing.T) {
		clk.SetTime(clk.Now().Add(61 * time.Minute)) // first expired; second has 59m left
		third, err := m.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if third == second || third == first {
			t.Fatal("token not rotated")
		}
		if bootstraptoken.ID(third) != id {
			t.Errorf("the new token is %s, want the expired token's slot %s", bootstraptoken.ID(third), id)
		}
		if n := len(ours(t, kube)); n != 2 {
			t.Errorf("%d karpfunc token Secrets, want 2 (the slots)", n)
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(foreign), &corev1.Secret{}); err != nil {
			t.Errorf("foreign token Secret: %v, want it left alone", err)
		}
	})

	t.Run("a revoked (deleted) token is replaced", func(t *testing.T) {
		before, err := m.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-" + bootstraptoken.ID(before)}}
		if err := kube.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		after, err := m.Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after == before {
			t.Error("the Manager handed out a token whose Secret is gone")
		}
	})

	t.Run("no token secret in the logs", func(t *testing.T) {
		for _, tok := range []string{first, second} {
			if secret := strings.SplitN(tok, ".", 2)[1]; strings.Contains(logs.String(), secret) {
				t.Errorf("logs contain a token secret:\n%s", logs.String())
			}
		}
		if !strings.Contains(logs.String(), "tokenID="+id) {
			t.Errorf("logs do not name the created token by ID %s:\n%s", id, logs.String())
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	kube := client.WithFieldOwner(nil, "x") // never called
	for _, tc := range []struct {
		name string
		opts bootstraptoken.Options
		want string
	}{
		{"no client", bootstraptoken.Options{}, "Options.Kube is required"},
		{"TTL under twice MinValidity", bootstraptoken.Options{Kube: kube, TTL: 90 * time.Minute, MinValidity: time.Hour}, "at least twice MinValidity"},
		{"group outside system:bootstrappers", bootstraptoken.Options{Kube: kube, Group: "system:masters"}, `group "system:masters"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bootstraptoken.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestTokenForm(t *testing.T) {
	for _, tc := range []struct {
		token, id string
	}{
		{"abcdef.0123456789abcdef", "abcdef"},
		{"ABCDEF.0123456789abcdef", ""},
		{"abcde.0123456789abcdef", ""},
		{"abcdef.0123456789abcde", ""},
		{"abcdef0123456789abcdef", ""},
		{"", ""},
	} {
		if got := bootstraptoken.ID(tc.token); got != tc.id {
			t.Errorf("ID(%q) = %q, want %q", tc.token, got, tc.id)
		}
		if got := bootstraptoken.Valid(tc.token); got != (tc.id != "") {
			t.Errorf("Valid(%q) = %v", tc.token, got)
		}
	}
}

func tokenSecret(id, secret string, expires time.Time, labels map[string]string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system", Labels: labels},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{"token-id": id, "token-secret": secret, "expiration": expires.UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true"},
	}
}

func ours(t *testing.T, kube client.Client) []corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := kube.List(t.Context(), &list, client.InNamespace("kube-system"),
		client.MatchingLabels{bootstraptoken.LabelManagedBy: bootstraptoken.ManagedByValue}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestTokensCarryTheBoundGroups: a new token carries the groups the
// cluster's ClusterRoleBindings bind to CSR creation and approval, read
// from the cluster, not a group karpfunc assumes; with no such binding the
// Manager refuses rather than guess.
func TestTokensCarryTheBoundGroups(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := t.Context()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	newToken := func() (string, error) {
		m, err := bootstraptoken.New(bootstraptoken.Options{Kube: kube, TTL: 2 * time.Hour, MinValidity: time.Hour, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return m.Token(ctx)
	}
	groupsOf := func(token string) string {
		s := &corev1.Secret{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-" + bootstraptoken.ID(token)}, s); err != nil {
			t.Fatal(err)
		}
		return string(s.Data["auth-extra-groups"])
	}
	clearTokens := func() {
		if err := kube.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace("kube-system"),
			client.MatchingLabels{bootstraptoken.LabelManagedBy: bootstraptoken.ManagedByValue}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(name, role, group string) {
		if err := kube.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}}}); err != nil {
			t.Fatal(err)
		}
	}

	// The local control plane binds TLS bootstrapping as kubeadm and AKS do.
	token, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	if got := groupsOf(token); got != controlplane.AKSBootstrapTokenGroups {
		t.Errorf("token groups = %q, want the bound %q", got, controlplane.AKSBootstrapTokenGroups)
	}

	// CSR creation open to every bootstrapper, approval to one more group
	// (first by name): only that group is needed.
	clearTokens()
	bind("all-create", bootstraptoken.RoleCreateCSR, "system:bootstrappers")
	bind("a-approve", bootstraptoken.RoleApproveCSR, "system:bootstrappers:a-nodes")
	bind("users-approve", bootstraptoken.RoleApproveCSR, "system:authenticated") // not a bootstrapper group
	if token, err = newToken(); err != nil {
		t.Fatal(err)
	}
	if got := groupsOf(token); got != "system:bootstrappers:a-nodes" {
		t.Errorf("token groups = %q, want system:bootstrappers:a-nodes", got)
	}

	// No bootstrapper may have its CSR approved: refuse.
	clearTokens()
	for _, name := range []string{"a-approve", "kubeadm:node-autoapprove-bootstrap"} {
		if err := kube.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newToken(); err == nil || !strings.Contains(err.Error(), "no ClusterRoleBinding binds ClusterRole "+bootstraptoken.RoleApproveCSR) {
		t.Errorf("Token() with no approval binding = %v, want a refusal naming the role", err)
	}
}

// TestSlotNotOurs: a Secret in a slot that karpfunc did not make is left
// alone and named in the error.
func TestSlotNotOurs(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := t.Context()
	other := tokenSecret(bootstraptoken.Slots[0], "0123456789abcdef", time.Now().Add(-time.Hour), nil)
	if err := kube.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	m, err := bootstraptoken.New(bootstraptoken.Options{Kube: kube})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Token(ctx); err == nil || !strings.Contains(err.Error(), "was not made by karpfunc") {
		t.Fatalf("Token() = %v, want a refusal naming the Secret it does not own", err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}); err != nil {
		t.Errorf("the Secret karpfunc did not make: %v, want it left alone", err)
	}
}
