package kubeauth

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// App settings read by RESTConfig.
const (
	// EnvKubeconfig is a kubeconfig file (local runs, clusters without
	// Entra ID integration).
	EnvKubeconfig = "KUBECONFIG"
	// EnvAPIServerURL is the cluster's API server, https://<fqdn>:443 (the
	// managed cluster's properties.fqdn, or privateFQDN for a private cluster).
	EnvAPIServerURL = "KARPFUNC_API_SERVER_URL"
	// EnvAPIServerCA is the cluster's CA certificate, base64-encoded PEM:
	// the certificate-authority-data of the cluster's kubeconfig.
	EnvAPIServerCA = "KARPFUNC_API_SERVER_CA"
	// EnvClientID selects a user-assigned managed identity by client ID;
	// unset means the system-assigned identity.
	EnvClientID = "AZURE_CLIENT_ID"
)

// SettingError is an app setting that is missing, conflicting or malformed.
// Its message names the setting and what to set it to.
type SettingError struct {
	Setting string
	error
}

func (e *SettingError) Unwrap() error { return e.error }

func settingErr(name, format string, args ...any) error {
	return &SettingError{Setting: name, error: fmt.Errorf("app setting "+name+": "+format, args...)}
}

// Credential builds the credential for the managed identity; clientID is
// "" for the system-assigned identity. NewManagedIdentityCredential is the
// one used in Azure.
type Credential func(clientID string) (azcore.TokenCredential, error)

// NewManagedIdentityCredential is azidentity's managed identity credential:
// in Azure Functions it reads IDENTITY_ENDPOINT and IDENTITY_HEADER, which
// the platform sets.
func NewManagedIdentityCredential(clientID string) (azcore.TokenCredential, error) {
	opts := &azidentity.ManagedIdentityCredentialOptions{}
	if clientID != "" {
		opts.ID = azidentity.ClientID(clientID)
	}
	return azidentity.NewManagedIdentityCredential(opts)
}

var guid = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// RESTConfig returns the client config for the cluster described by the
// app settings getenv reads: a kubeconfig, or the API server URL and CA with
// a token from the managed identity (cred; nil means
// NewManagedIdentityCredential). The error names the setting to fix.
func RESTConfig(getenv func(string) string, cred Credential) (*rest.Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	kubeconfig := get(EnvKubeconfig)
	server := get(EnvAPIServerURL)
	ca := get(EnvAPIServerCA)
	if err := checkClusterSettings(kubeconfig, server, ca); err != nil {
		return nil, err
	}
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, settingErr(EnvKubeconfig, "loading kubeconfig %s: %v", kubeconfig, err)
		}
		return cfg, nil
	}
	return managedIdentityConfig(server, ca, get(EnvClientID), cred)
}

// checkClusterSettings refuses a kubeconfig set together with the API
// server settings, and an API server URL or CA set without the other.
func checkClusterSettings(kubeconfig, server, ca string) error {
	switch {
	case kubeconfig != "" && (server != "" || ca != ""):
		return settingErr(EnvKubeconfig, "is set together with %s/%s; set only one: KUBECONFIG for a kubeconfig file, or %s and %s to reach AKS with the managed identity",
			EnvAPIServerURL, EnvAPIServerCA, EnvAPIServerURL, EnvAPIServerCA)
	case kubeconfig != "":
		return nil
	case server == "" && ca == "":
		return settingErr(EnvAPIServerURL, "not set: the handler cannot reach the cluster. Set %s to the API server (https://<cluster fqdn>:443) and %s to its CA (the kubeconfig's certificate-authority-data), or set %s to a kubeconfig file",
			EnvAPIServerURL, EnvAPIServerCA, EnvKubeconfig)
	case server == "":
		return settingErr(EnvAPIServerURL, "not set, but %s is: set it to the API server, https://<cluster fqdn>:443", EnvAPIServerCA)
	case ca == "":
		return settingErr(EnvAPIServerCA, "not set, but %s is: set it to the cluster's CA certificate, base64 PEM (the kubeconfig's certificate-authority-data); AKS API servers present a certificate from the cluster's own CA", EnvAPIServerURL)
	}
	return nil
}

// managedIdentityConfig reaches server, trusting ca, with a token from the
// managed identity clientID names (the system-assigned one when empty).
func managedIdentityConfig(server, ca, clientID string, cred Credential) (*rest.Config, error) {
	if err := checkServerURL(server); err != nil {
		return nil, err
	}
	caPEM, err := decodeCA(ca)
	if err != nil {
		return nil, err
	}
	if clientID != "" && !guid.MatchString(clientID) {
		return nil, settingErr(EnvClientID, "%q is not a client ID (a GUID such as 00000000-0000-0000-0000-000000000000): set it to the client ID of the Functions' user-assigned managed identity, or unset it for the system-assigned one", clientID)
	}
	if cred == nil {
		cred = NewManagedIdentityCredential
	}
	tokenCred, err := cred(clientID)
	if err != nil {
		return nil, fmt.Errorf("creating the managed identity credential (%s=%q): %w", EnvClientID, clientID, err)
	}
	src := NewTokenSource(tokenCred, AKSScope, nil)
	return &rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return src.Transport(rt) },
	}, nil
}

func checkServerURL(server string) error {
	parsed, err := url.Parse(server)
	if err != nil {
		return settingErr(EnvAPIServerURL, "%q is not a URL (%v): set it to https://<cluster fqdn>:443", server, err)
	}
	if parsed.Scheme != "https" || parsed.Host == "" {
		return settingErr(EnvAPIServerURL, "%q must be an https:// URL with a host (https://<cluster fqdn>:443): a bearer token is never sent in clear text", server)
	}
	if (parsed.Path != "" && parsed.Path != "/") || parsed.RawQuery != "" || parsed.User != nil {
		return settingErr(EnvAPIServerURL, "%q must be only scheme, host and port (https://<cluster fqdn>:443)", server)
	}
	return nil
}

// decodeCA accepts base64 of PEM (the kubeconfig's certificate-authority-data).
func decodeCA(v string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		if strings.Contains(v, "-----BEGIN") {
			return nil, settingErr(EnvAPIServerCA, "holds PEM text; it must be base64 of the PEM (as certificate-authority-data in a kubeconfig): base64 -w0 ca.pem")
		}
		return nil, settingErr(EnvAPIServerCA, "is not base64 (%v): set it to the kubeconfig's certificate-authority-data", err)
	}
	rest := data
	certs := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, settingErr(EnvAPIServerCA, "certificate %d does not parse: %v", certs+1, err)
		}
		certs++
	}
	if certs == 0 {
		return nil, settingErr(EnvAPIServerCA, "decodes to no PEM CERTIFICATE block: set it to base64 of the cluster CA's PEM (the kubeconfig's certificate-authority-data)")
	}
	return data, nil
}

// IsSettingError reports whether err is, or wraps, a SettingError.
func IsSettingError(err error) bool {
	var setting *SettingError
	return errors.As(err, &setting)
}
