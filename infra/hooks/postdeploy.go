package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/karpfunc/karpfunc/internal/relayimage"
)

// Outputs of infra/main.bicep (azd writes them into the environment) and
// optional settings the postdeploy hook reads.
const (
	envServiceBus          = "AZURE_SERVICEBUS_NAMESPACE"
	envRelayClientID       = "KARPFUNC_RELAY_CLIENT_ID"
	envFunctionsPrincipal  = "KARPFUNC_FUNCTIONS_PRINCIPAL_ID"
	envNamespace           = "KARPFUNC_NAMESPACE"
	envRelayServiceAccount = "KARPFUNC_RELAY_SERVICE_ACCOUNT"
	// envRelayImage overrides the relay image postdeploy builds and pushes
	// (repository:tag), for an image you publish yourself.
	envRelayImage = "KARPFUNC_RELAY_IMAGE"
	// envRegistry is the login server of the container registry main.bicep
	// provisions; postdeploy pushes the relay image there.
	envRegistry = "AZURE_CONTAINER_REGISTRY_ENDPOINT"
	// envAppInsights is the Application Insights connection string the
	// relay exports its metrics to (as its own identity, Entra ID only).
	envAppInsights = "APPLICATIONINSIGHTS_CONNECTION_STRING"
	// envOTLPEndpoint is where the relay exports traces and metrics (an
	// OpenTelemetry Collector), as the Functions do; empty: nowhere.
	envOTLPEndpoint = "KARPFUNC_OTLP_ENDPOINT"
)

const (
	releaseName = "karpfunc"
	chartPath   = "relay/chart"
	// relayPackage and relayRepository: what postdeploy builds and where in
	// the registry it goes (the tag is the chart's appVersion).
	relayPackage    = "./relay"
	relayRepository = "karpfunc/relay"
	// aksServerScope is the Entra ID application of AKS-managed Entra ID
	// integration: tokens for it sign in to any such cluster's API server.
	aksServerScope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"
)

// postdeployOutputs lists the values postdeploy needs from the environment.
var postdeployOutputs = []string{envSubscription, envClusterName, envClusterGroup, envServiceBus,
	envRelayClientID, envFunctionsPrincipal, envNamespace, envRelayServiceAccount, envRegistry, envAppInsights}

// chartValues builds the chart's values from the provisioned outputs.
func chartValues(env map[string]string, image string) (map[string]any, error) {
	values := map[string]any{
		"clusterName": env[envClusterName],
		"serviceBus": map[string]any{
			"namespace": env[envServiceBus],
			"clientId":  env[envRelayClientID],
		},
		"serviceAccount":      map[string]any{"name": env[envRelayServiceAccount]},
		"functions":           map[string]any{"principalId": env[envFunctionsPrincipal]},
		"applicationInsights": map[string]any{"connectionString": env[envAppInsights]},
	}
	if image = strings.TrimSpace(image); image != "" {
		repo, tag, err := splitImage(image)
		if err != nil {
			return nil, err
		}
		values["image"] = map[string]any{"repository": repo, "tag": tag}
	}
	return values, nil
}

// splitImage splits repository:tag[@digest]; a registry port is not a tag,
// and a digest stays with the tag (the chart renders repository:tag).
func splitImage(ref string) (string, string, error) {
	digest := ""
	if at := strings.Index(ref, "@"); at >= 0 {
		digest = ref[at:]
		ref = ref[:at]
	}
	colon := strings.LastIndex(ref, ":")
	if colon < 0 || strings.Contains(ref[colon:], "/") || colon == len(ref)-1 {
		return "", "", fmt.Errorf("%s=%q: want <registry>/<repository>:<tag>", envRelayImage, ref)
	}
	return ref[:colon], ref[colon+1:] + digest, nil
}

func postdeploy(ctx context.Context, getenv func(string) string) error {
	env, err := required(getenv, postdeployOutputs...)
	if err != nil {
		return fmt.Errorf("%w\n(these are outputs of infra/main.bicep: run azd provision first)", err)
	}
	chrt, err := loader.Load(chartPath)
	if err != nil {
		return fmt.Errorf("loading the chart (run azd from the repository root): %w", err)
	}
	arm, err := newARM()
	if err != nil {
		return err
	}
	image := strings.TrimSpace(getenv(envRelayImage))
	if image == "" {
		if image, err = publishRelay(ctx, arm, env[envRegistry]+"/"+relayRepository+":"+chrt.Metadata.AppVersion); err != nil {
			return err
		}
	}
	values, err := chartValues(env, image)
	if ep := strings.TrimSpace(getenv(envOTLPEndpoint)); err == nil && ep != "" {
		values["otlpEndpoint"] = ep
	}
	if err != nil {
		return err
	}
	getter, cleanup, err := clusterAccess(ctx, arm, env)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg := new(action.Configuration)
	logf := func(format string, v ...any) { fmt.Fprintf(os.Stderr, "helm: "+format+"\n", v...) }
	if err := cfg.Init(getter, env[envNamespace], "secret", logf); err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	if _, err := action.NewHistory(cfg).Run(releaseName); errors.Is(err, driver.ErrReleaseNotFound) {
		in := action.NewInstall(cfg)
		in.ReleaseName = releaseName
		in.Namespace = env[envNamespace]
		in.CreateNamespace = true
		in.Wait = true
		in.Timeout = 5 * time.Minute
		_, err = in.RunWithContext(ctx, chrt, values)
		if err != nil {
			return fmt.Errorf("helm install %s: %w", releaseName, err)
		}
	} else if err != nil {
		return fmt.Errorf("helm history %s: %w", releaseName, err)
	} else {
		up := action.NewUpgrade(cfg)
		up.Namespace = env[envNamespace]
		up.Wait = true
		up.Timeout = 5 * time.Minute
		if _, err := up.RunWithContext(ctx, releaseName, chrt, values); err != nil {
			return fmt.Errorf("helm upgrade %s: %w", releaseName, err)
		}
	}
	fmt.Fprintf(os.Stderr, "karpfunc: relay installed in namespace %s of cluster %s\n", env[envNamespace], env[envClusterName])
	return nil
}

// publishRelay builds the relay image (as make image does, no Docker) and
// pushes it to karpfunc's registry as the person running azd; the kubelet
// identity pulls it with AcrPull (main.bicep). It returns the reference
// pinned by digest, so nodes run exactly what was built.
func publishRelay(ctx context.Context, arm *armClient, ref string) (string, error) {
	fmt.Fprintf(os.Stderr, "karpfunc: building the relay image for %s\n", ref)
	idx, err := relayimage.Build(relayPackage)
	if err != nil {
		return "", fmt.Errorf("building the relay image: %w", err)
	}
	pinned, err := pushImage(ctx, idx, pushOptions{Ref: ref,
		EntraToken: func(ctx context.Context) (string, error) { return arm.token(ctx, armScope) }})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "karpfunc: pushed %s\n", pinned)
	return pinned, nil
}

// clusterAccess signs in to the cluster's API server as the person running
// azd: the server address and CA come from the cluster user kubeconfig, the
// bearer token from Entra ID (no kubelogin needed). Installing CRDs and RBAC
// needs cluster-admin rights in the cluster.
func clusterAccess(ctx context.Context, arm *armClient, env map[string]string) (genericclioptions.RESTClientGetter, func(), error) {
	cluster, err := userKubeconfigCluster(ctx, arm, env[envSubscription], env[envClusterGroup], env[envClusterName])
	if err != nil {
		return nil, nil, err
	}
	tok, err := arm.token(ctx, aksServerScope)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "karpfunc-hook-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, cluster.CertificateAuthorityData, 0o600); err != nil {
		cleanup()
		return nil, nil, err
	}
	flags := genericclioptions.NewConfigFlags(false)
	empty := filepath.Join(dir, "kubeconfig") // ignore the user's own kubeconfig
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		cleanup()
		return nil, nil, err
	}
	ns := env[envNamespace]
	flags.KubeConfig = &empty
	flags.APIServer = &cluster.Server
	flags.CAFile = &caFile
	flags.BearerToken = &tok
	flags.Namespace = &ns
	return flags, cleanup, nil
}

// userKubeconfigCluster reads the cluster user kubeconfig through ARM and
// returns its cluster entry: the API server URL and CA.
func userKubeconfigCluster(ctx context.Context, arm *armClient, sub, group, name string) (*clientcmdapi.Cluster, error) {
	path := "/subscriptions/" + sub + "/resourceGroups/" + group +
		"/providers/Microsoft.ContainerService/managedClusters/" + name +
		"/listClusterUserCredential?api-version=" + aksAPIVersion
	body, status, err := arm.do(ctx, http.MethodPost, path)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("listing the cluster user credential of %s: HTTP %d: %s", name, status, body)
	}
	return kubeconfigCluster(body, name)
}

// kubeconfigCluster decodes a listClusterUserCredential response and returns
// the current context's cluster.
func kubeconfigCluster(body []byte, name string) (*clientcmdapi.Cluster, error) {
	var creds struct {
		Kubeconfigs []struct {
			Value []byte `json:"value"`
		} `json:"kubeconfigs"`
	}
	if err := json.Unmarshal(body, &creds); err != nil || len(creds.Kubeconfigs) == 0 {
		return nil, fmt.Errorf("the cluster user credential of %s holds no kubeconfig (%w)", name, err)
	}
	kc, err := clientcmd.Load(creds.Kubeconfigs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("decoding the cluster user kubeconfig of %s: %w", name, err)
	}
	kctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("the cluster user kubeconfig of %s has no current context", name)
	}
	cluster, ok := kc.Clusters[kctx.Cluster]
	if !ok || cluster.Server == "" || len(cluster.CertificateAuthorityData) == 0 {
		return nil, fmt.Errorf("the cluster user kubeconfig of %s has no server and CA for cluster %q", name, kctx.Cluster)
	}
	return cluster, nil
}
