// Package entra is a local stand-in for Microsoft Entra ID as karpfunc's
// handler meets it in Azure Functions: the App Service managed identity
// endpoint (IDENTITY_ENDPOINT + IDENTITY_HEADER, api-version 2019-08-01) that
// azidentity's ManagedIdentityCredential calls, and the OIDC issuer whose
// tokens the cluster's API server accepts.
//
// kube-apiserver trusts the issuer through structured authentication
// configuration (AuthenticationConfig), as AKS trusts Entra: audience
// AKS's server application, user name from the token's oid claim. The
// handler then reaches the local cluster through exactly the code path it
// uses in Azure.
//
// It is as strict as the real endpoint: a missing or wrong X-IDENTITY-HEADER,
// an unknown api-version, a missing resource or an unknown client_id are
// refused with 400, and tokens expire (TokenLifetime).
package entra

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/karpfunc/karpfunc/internal/testcert"
)

// AppServiceAPIVersion is the only api-version the App Service managed
// identity endpoint serves here (the one azidentity sends).
const AppServiceAPIVersion = "2019-08-01"

// Identity is one managed identity: what the token says about it.
type Identity struct {
	// ClientID is the application (client) ID; "" for the system-assigned
	// identity.
	ClientID string
	// PrincipalID is its object ID: the oid claim, and so the Kubernetes
	// user name.
	PrincipalID string
}

// Options configure Start.
type Options struct {
	// TenantID names the tenant in the issuer URL (default a fixed GUID).
	TenantID string
	// Identities are the managed identities assigned to the app. At least
	// one is required.
	Identities []Identity
	// TokenLifetime is how long minted tokens are valid (default 1h).
	TokenLifetime time.Duration
}

// Server is a running stand-in. Close it when done.
type Server struct {
	opts     Options
	key      *rsa.PrivateKey
	keyID    string
	caPEM    []byte
	header   string
	issuer   string
	oidc     *http.Server
	msi      *http.Server
	msiURL   string
	mu       sync.Mutex
	minted   int
	stopOnce sync.Once
}

// Start serves the issuer over HTTPS and the managed identity endpoint over
// HTTP (as App Service does, on loopback), both on free loopback ports.
func Start(opts Options) (*Server, error) {
	if len(opts.Identities) == 0 {
		return nil, errors.New("entra: Options.Identities is empty")
	}
	if opts.TenantID == "" {
		opts.TenantID = "00000000-0000-0000-0000-0000000e0a1d"
	}
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = time.Hour
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("entra: generating signing key: %w", err)
	}
	cert, caPEM, err := testcert.SelfSigned("karpfunc local Entra issuer")
	if err != nil {
		return nil, err
	}
	server := &Server{opts: opts, key: key, caPEM: caPEM, header: randHex(16)}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	server.keyID = hex.EncodeToString(sum[:8])

	oidcL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("entra: %w", err)
	}
	msiL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = oidcL.Close()
		return nil, fmt.Errorf("entra: %w", err)
	}
	server.issuer = "https://" + oidcL.Addr().String() + "/" + opts.TenantID + "/"
	server.msiURL = "http://" + msiL.Addr().String() + "/msi/token"

	oidcMux := http.NewServeMux()
	oidcMux.HandleFunc("GET /"+opts.TenantID+"/.well-known/openid-configuration", server.discovery)
	oidcMux.HandleFunc("GET /"+opts.TenantID+"/discovery/keys", server.keys)
	server.oidc = &http.Server{Handler: oidcMux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	msiMux := http.NewServeMux()
	msiMux.HandleFunc("/msi/token", server.token)
	server.msi = &http.Server{Handler: msiMux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.oidc.ServeTLS(oidcL, "", "") }()
	go func() { _ = server.msi.Serve(msiL) }()
	return server, nil
}

// Issuer is the tokens' iss claim and the OIDC discovery base URL.
func (s *Server) Issuer() string { return s.issuer }

// IssuerCAPEM is the CA of the issuer's HTTPS certificate.
func (s *Server) IssuerCAPEM() []byte { return s.caPEM }

// Env is the environment Azure Functions gives an app with a managed
// identity: IDENTITY_ENDPOINT and IDENTITY_HEADER.
func (s *Server) Env() []string {
	return []string{"IDENTITY_ENDPOINT=" + s.msiURL, "IDENTITY_HEADER=" + s.header}
}

// Minted is how many tokens the endpoint has issued.
func (s *Server) Minted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.minted
}

// AuthenticationConfig is a kube-apiserver AuthenticationConfiguration
// (--authentication-config) that accepts this issuer's tokens for audience,
// with the oid claim as the user name, as AKS does for Entra identities.
func (s *Server) AuthenticationConfig(audience string) []byte {
	var out strings.Builder
	out.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n")
	fmt.Fprintf(&out, "- issuer:\n    url: %q\n    audiences: [%q]\n    certificateAuthority: |\n", s.issuer, audience)
	for _, line := range strings.Split(strings.TrimSpace(string(s.caPEM)), "\n") {
		out.WriteString("      " + line + "\n")
	}
	out.WriteString("  claimMappings:\n    username:\n      claim: oid\n      prefix: \"\"\n")
	return []byte(out.String())
}

// Close stops both endpoints.
func (s *Server) Close() error {
	var err error
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(s.oidc.Shutdown(ctx), s.msi.Shutdown(ctx))
	})
	return err
}

func (s *Server) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                s.issuer,
		"jwks_uri":                              s.issuer + "discovery/keys",
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"response_types_supported":              []string{"code", "id_token"},
		"subject_types_supported":               []string{"pairwise"},
	})
}

func (s *Server) keys(w http.ResponseWriter, _ *http.Request) {
	pub := s.key.PublicKey
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": s.keyID,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

// token serves GET /msi/token as App Service's identity endpoint does.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		writeJSON(w, code, map[string]any{"statusCode": code, "message": msg})
	}
	if r.Method != http.MethodGet {
		fail(http.StatusMethodNotAllowed, "the identity endpoint serves GET only")
		return
	}
	if r.Header.Get("X-IDENTITY-HEADER") != s.header {
		fail(http.StatusBadRequest, "missing or invalid X-IDENTITY-HEADER")
		return
	}
	query := r.URL.Query()
	if apiVersion := query.Get("api-version"); apiVersion != AppServiceAPIVersion {
		fail(http.StatusBadRequest, fmt.Sprintf("api-version %q is not supported; use %s", apiVersion, AppServiceAPIVersion))
		return
	}
	resource := query.Get("resource")
	if resource == "" {
		fail(http.StatusBadRequest, "the resource parameter is required")
		return
	}
	if query.Get("mi_res_id") != "" || query.Get("principal_id") != "" || query.Get("object_id") != "" {
		fail(http.StatusBadRequest, "only client_id selects an identity here")
		return
	}
	clientID := query.Get("client_id")
	var id *Identity
	for i := range s.opts.Identities {
		if s.opts.Identities[i].ClientID == clientID {
			id = &s.opts.Identities[i]
		}
	}
	if id == nil {
		if clientID == "" {
			fail(http.StatusBadRequest, "no system-assigned identity is enabled for this app")
		} else {
			fail(http.StatusBadRequest, fmt.Sprintf("no user-assigned identity with client ID %s is assigned to this app", clientID))
		}
		return
	}
	now := time.Now()
	exp := now.Add(s.opts.TokenLifetime)
	tok, err := s.sign(map[string]any{
		"aud": resource, "iss": s.issuer, "iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": exp.Unix(),
		"oid": id.PrincipalID, "sub": id.PrincipalID, "tid": s.opts.TenantID, "appid": id.ClientID, "ver": "1.0",
	})
	if err != nil {
		fail(http.StatusInternalServerError, err.Error())
		return
	}
	s.mu.Lock()
	s.minted++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "expires_on": strconv.FormatInt(exp.Unix(), 10), "resource": resource,
		"token_type": "Bearer", "client_id": id.ClientID,
	})
}

func (s *Server) sign(claims map[string]any) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": s.keyID})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("entra: signing: %w", err)
	}
	return signing + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func randHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
