package localenv

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/entra"
	"github.com/karpfunc/karpfunc/pkg/kubeauth"
	"github.com/karpfunc/karpfunc/relay/chart"
)

// The local run installs the cluster chart as a release of this name in this
// namespace, as `helm install karpfunc relay/chart -n karpfunc` would.
const (
	ReleaseName = "karpfunc"
	Namespace   = "karpfunc"
)

// The handler's local managed identity: a user-assigned identity whose
// principal ID is the Kubernetes user the chart binds, as in AKS.
const (
	FunctionsClientID    = "0000c0de-0000-4000-8000-00000000f0c1"
	FunctionsPrincipalID = "0000c0de-0000-4000-8000-00000000f0b1"
)

// startEntra starts the local Entra stand-in and returns the kube-apiserver
// flag that trusts its tokens.
func (e *Env) startEntra() ([]string, error) {
	idp, err := entra.Start(entra.Options{Identities: []entra.Identity{{ClientID: FunctionsClientID, PrincipalID: FunctionsPrincipalID}}})
	if err != nil {
		return nil, err
	}
	e.Entra = idp
	e.stops = append(e.stops, idp.Close)
	path := filepath.Join(e.Dir, "authentication-config.yaml")
	if err := os.WriteFile(path, idp.AuthenticationConfig(kubeauth.AKSServerAppID), 0o600); err != nil {
		return nil, err
	}
	return []string{"--authentication-config=" + path}, nil
}

// handlerEnv is the environment of the handler: the process's own, without
// anything that would point it at another cluster or identity, plus the app
// settings it has in Azure (API server URL and CA, user-assigned identity)
// and the managed identity endpoint Functions provides.
func (e *Env) handlerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case kubeauth.EnvKubeconfig, kubeauth.EnvAPIServerURL, kubeauth.EnvAPIServerCA, kubeauth.EnvClientID,
			"IDENTITY_ENDPOINT", "IDENTITY_HEADER", "IDENTITY_SERVER_THUMBPRINT", "MSI_ENDPOINT", "MSI_SECRET", "IMDS_ENDPOINT",
			"KARPFUNC_NAMESPACE", "KARPFUNC_NODE_PROVISIONING_MODE", "KARPFUNC_SNAPSHOT_CHECK_SHARED":
			continue
		}
		env = append(env, kv)
	}
	cfg := e.ControlPlane.RESTConfig()
	env = append(env,
		kubeauth.EnvAPIServerURL+"="+cfg.Host,
		kubeauth.EnvAPIServerCA+"="+base64.StdEncoding.EncodeToString(cfg.CAData),
		kubeauth.EnvClientID+"="+FunctionsClientID,
		"KARPFUNC_NAMESPACE="+Namespace,
		// The local cluster has no node auto provisioning.
		"KARPFUNC_NODE_PROVISIONING_MODE=Manual",
		// Every pass proves it wrote nothing its snapshot shares with the
		// warm cache; the tests fail on snapshot.SharedWriteMessage.
		"KARPFUNC_SNAPSHOT_CHECK_SHARED=true",
	)
	return append(env, e.Entra.Env()...)
}

// installChart applies the cluster chart's RBAC and ServiceAccount (the
// relay runs as a local process, not as the chart's Deployment) and returns
// a kubeconfig for the relay's ServiceAccount, so the relay runs with
// exactly the rights the chart gives it.
func (e *Env) installChart(ctx context.Context, busURL string) (relayKubeconfig string, err error) {
	objs, err := chart.Render(ReleaseName, Namespace, map[string]any{
		"clusterName": e.Options.ClusterName,
		"localBusURL": busURL,
		"functions":   map[string]any{"principalId": FunctionsPrincipalID},
	})
	if err != nil {
		return "", err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := e.Kube.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	var relaySA string
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Deployment":
			continue
		case "ServiceAccount":
			relaySA = obj.GetName()
		}
		if err := e.Kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("karpfunc-local"), client.ForceOwnership); err != nil {
			return "", fmt.Errorf("chart: applying %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if relaySA == "" {
		return "", fmt.Errorf("chart: rendered no ServiceAccount for the relay")
	}
	cs, err := kubernetes.NewForConfig(e.ControlPlane.RESTConfig())
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, relaySA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", Namespace, relaySA, err)
	}
	cfg := e.ControlPlane.RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["relay"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "relay"}
	kc.CurrentContext = "local"
	path := filepath.Join(e.Dir, "relay.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", err
	}
	return path, nil
}
