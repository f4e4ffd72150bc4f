// Package kubeauth connects the handler to the cluster's API server.
//
// In Azure the handler has no kubeconfig: it authenticates with its managed
// identity. It asks Microsoft Entra ID for a token whose audience is AKS's
// server application (AKSServerAppID, scope AKSScope) and sends it as a
// bearer token; AKS maps the identity to a Kubernetes user (its object ID)
// that the chart's ClusterRoleBinding grants karpfunc's roles. The API server
// URL and its CA come from app settings (EnvAPIServerURL, EnvAPIServerCA).
// KUBECONFIG stays for local use and for clusters that want it.
//
// Invariants:
//   - exactly one way in: KUBECONFIG, or the API server settings; both, or
//     neither, is an error that names the settings to change;
//   - a token is reused until RefreshBefore its expiry (or the time Entra
//     suggests refreshing it), then replaced before a request is sent with
//     it; concurrent requests share one refresh;
//   - a 401 from the API server drops the cached token, so the next request
//     fetches a fresh one rather than repeating a revoked one;
//   - tokens are never logged or put into errors.
package kubeauth
