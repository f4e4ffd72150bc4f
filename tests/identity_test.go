package tests

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/kubeauth"
)

// checkIdentities asks the API server who the handler and the relay are,
// through the very credentials they use (the handler's managed identity
// token, the relay's ServiceAccount kubeconfig), and what they may do.
func checkIdentities(t *testing.T, ctx context.Context, env *localenv.Env) {
	t.Helper()
	// The handler's app settings, as localenv gives them to it.
	for _, kv := range env.Entra.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	admin := env.ControlPlane.RESTConfig()
	settings := map[string]string{
		kubeauth.EnvAPIServerURL: admin.Host,
		kubeauth.EnvAPIServerCA:  base64.StdEncoding.EncodeToString(admin.CAData),
		kubeauth.EnvClientID:     localenv.FunctionsClientID,
	}
	handlerCfg, err := kubeauth.RESTConfig(func(k string) string { return settings[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	relayCfg, err := clientcmd.BuildConfigFromFlags("", env.RelayKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []struct {
		name      string
		cfg       *rest.Config
		user      string
		allowed   []authorizationv1.ResourceAttributes
		forbidden []authorizationv1.ResourceAttributes
	}{
		{
			name: "handler", cfg: handlerCfg, user: localenv.FunctionsPrincipalID,
			allowed: []authorizationv1.ResourceAttributes{
				{Verb: "create", Group: "karpenter.sh", Resource: "nodeclaims"},
				{Verb: "patch", Group: "karpenter.sh", Resource: "nodeclaims", Subresource: "status"},
				{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "default"},
				{Verb: "update", Resource: "configmaps", Namespace: localenv.Namespace, Name: "karpfunc-unavailable-offerings"},
				{Verb: "create", Resource: "secrets", Namespace: "kube-system"},
				{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: localenv.Namespace},
			},
			forbidden: []authorizationv1.ResourceAttributes{
				{Verb: "update", Resource: "configmaps", Namespace: localenv.Namespace, Name: "other"},
				{Verb: "get", Resource: "secrets", Namespace: "default"},
				{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"},
				{Verb: "create", Resource: "nodes"},
				{Verb: "update", Group: "karpenter.sh", Resource: "nodepools"},
				{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
			},
		},
		{
			name: "relay", cfg: relayCfg, user: "system:serviceaccount:" + localenv.Namespace + ":",
			allowed: []authorizationv1.ResourceAttributes{
				{Verb: "watch", Resource: "pods"},
				{Verb: "list", Group: "karpenter.sh", Resource: "nodeclaims"},
			},
			forbidden: []authorizationv1.ResourceAttributes{
				{Verb: "patch", Resource: "nodes"},
				{Verb: "delete", Group: "karpenter.sh", Resource: "nodeclaims"},
				{Verb: "get", Resource: "secrets", Namespace: "kube-system"},
			},
		},
	} {
		cs, err := kubernetes.NewForConfig(id.cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: who am I: %v", id.name, err)
		}
		u := review.Status.UserInfo
		if !strings.HasPrefix(u.Username, id.user) || slices.Contains(u.Groups, "system:masters") {
			t.Errorf("%s authenticates as %q in %v; want %s…, never system:masters", id.name, u.Username, u.Groups, id.user)
		}
		for _, want := range []bool{true, false} {
			attrs := id.allowed
			if !want {
				attrs = id.forbidden
			}
			for _, a := range attrs {
				r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
					Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Status.Allowed != want {
					t.Errorf("%s may %s %s/%s %s in %q: %t; want %t", id.name, a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, r.Status.Allowed, want)
				}
			}
		}
	}
}
