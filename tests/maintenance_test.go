package tests

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/testfixtures"
)

// TestDriftWaitsForMaintenanceWindow: with a node-OS maintenance window
// set on the cluster (through ARM, as `az aks maintenanceconfiguration
// add` does), a drifted node is kept, Drifted=True and explained with the
// window's start, until the window opens; then it is replaced inside the
// window, by the pass the hold scheduled for the window's start.
func TestDriftWaitsForMaintenanceWindow(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "maintenance", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	app := deployment("steady", 1, "500m", "512Mi")
	app.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "general"}
	if err := kube.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "steady running", func() (bool, string) { return allRunning(ctx, kube, "steady", 1) })
	before := claimOfPod(t, ctx, kube, onlyPod(t, ctx, kube, "steady"))

	// A daily window that first opens at the next minute boundary at least
	// 75 s away: the hold is decided well before it, and the window then
	// opens on its own (startTime has minute precision).
	opens := time.Now().UTC().Add(75 * time.Second).Truncate(time.Minute).Add(time.Minute)
	setMaintenanceWindow(t, ctx, env, "aksManagedNodeOSUpgradeSchedule", armcontainerservice.MaintenanceWindow{
		Schedule:      &armcontainerservice.Schedule{Daily: &armcontainerservice.DailySchedule{IntervalDays: to.Ptr[int32](1)}},
		DurationHours: to.Ptr[int32](4), UTCOffset: to.Ptr("+00:00"), StartTime: to.Ptr(opens.Format("15:04")),
		StartDate: to.Ptr(time.Date(opens.Year(), opens.Month(), opens.Day(), 0, 0, 0, 0, time.UTC))})

	// A NodePool change: NodePool drift, governed by the node-OS window.
	patchPool(t, ctx, kube, "general", `{"spec":{"template":{"metadata":{"labels":{"maintenance":"window"}}}}}`)
	held := "drifted (NodePoolDrifted) but outside the maintenance window aksManagedNodeOSUpgradeSchedule: the next one opens at " + opens.Format(time.RFC3339)
	eventually(t, 2*time.Minute, "the drifted node held with the window's start in its explanation", func() (bool, string) {
		n, err := testfixtures.CountEvents(ctx, kube, testfixtures.EventFilter{Kind: "NodeClaim", Name: before.Name, Reason: "DisruptionBlocked", MessageContains: held})
		if err != nil {
			return false, err.Error()
		}
		return n > 0, "no DisruptionBlocked event saying " + held
	})
	// The pass that explained the hold also wrote the condition: the node
	// is still there, drifted.
	var nc karpv1.NodeClaim
	if err := kube.Get(ctx, client.ObjectKey{Name: before.Name}, &nc); err != nil {
		t.Fatalf("the held NodeClaim: %v", err)
	}
	if nc.DeletionTimestamp != nil {
		t.Fatalf("NodeClaim %s is being deleted although its drift is held", nc.Name)
	}
	if cond := nc.StatusConditions().Get(karpv1.ConditionTypeDrifted); cond == nil || !cond.IsTrue() || cond.Reason != "NodePoolDrifted" {
		t.Fatalf("NodeClaim %s: Drifted %+v, want True (NodePoolDrifted)", nc.Name, cond)
	}

	eventually(t, 4*time.Minute, "the held node replaced once the window opened", func() (bool, string) {
		pod, ok := soleLivePod(ctx, kube, "steady")
		if !ok || pod.Spec.NodeName == "" {
			return false, "the steady pod is being replaced"
		}
		now := claimOfPod(t, ctx, kube, pod)
		if now.Name == before.Name {
			return false, "still on " + now.Name
		}
		return true, ""
	})
	for _, replacement := range poolClaims(t, ctx, kube, "general") {
		if replacement.CreationTimestamp.Time.Before(opens) {
			t.Errorf("replacement %s was created at %s, before the window opened at %s", replacement.Name,
				replacement.CreationTimestamp.UTC().Format(time.RFC3339), opens.Format(time.RFC3339))
		}
	}
	if n := eventCount(t, ctx, kube, "DisruptionTerminating", "Disrupting NodeClaim: Drifted"); n == 0 {
		t.Error("no DisruptionTerminating event for the drifted NodeClaim")
	}
}

// setMaintenanceWindow puts a maintenance configuration on the local
// cluster through the real SDK client, as a user would.
func setMaintenanceWindow(t *testing.T, ctx context.Context, env *localenv.Env, name string, window armcontainerservice.MaintenanceWindow) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.ARM.CACertPEM()) {
		t.Fatal("the ARM emulator's CA is not PEM")
	}
	cfg := cloud.AzurePublic
	cfg.Services = map[cloud.ServiceName]cloud.ServiceConfiguration{
		cloud.ResourceManager: {Audience: "https://management.core.windows.net/", Endpoint: env.ARM.URL()},
	}
	opts := &arm.ClientOptions{DisableRPRegistration: true, ClientOptions: policy.ClientOptions{Cloud: cfg,
		Transport: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}}
	configs, err := armcontainerservice.NewMaintenanceConfigurationsClient(localenv.SubscriptionID, bearer(env.ARM.Token()), opts)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(env.ClusterID(), "/")
	if _, err := configs.CreateOrUpdate(ctx, localenv.ClusterResourceGroup, parts[len(parts)-1], name,
		armcontainerservice.MaintenanceConfiguration{Properties: &armcontainerservice.MaintenanceConfigurationProperties{MaintenanceWindow: &window}}, nil); err != nil {
		t.Fatalf("setting maintenance configuration %s: %v", name, err)
	}
	t.Logf("maintenance configuration %s: daily at %s UTC for %d h", name, *window.StartTime, *window.DurationHours)
}

type bearer string

func (b bearer) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(b), ExpiresOn: time.Now().Add(time.Hour)}, nil
}
