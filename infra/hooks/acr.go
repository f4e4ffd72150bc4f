package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// acrNullUser is the user name that tells Azure Container Registry the
// password is an ACR refresh token (Azure/acr docs/AAD-OAuth.md,
// "Authenticating docker with an ACR refresh token").
const acrNullUser = "00000000-0000-0000-0000-000000000000"

// armScope is the audience of the Entra ID access token ACR exchanges: the
// registry checks the caller's rights on the registry resource through ARM
// (Azure/acr docs/AAD-OAuth.md, "Getting credentials programmatically").
const armScope = "https://management.azure.com/.default"

// RegistryError is a failed step of signing in to or pushing to the
// container registry; it keeps its cause.
type RegistryError struct {
	Step string
	error
}

func (e RegistryError) Error() string { return e.Step + ": " + e.error.Error() }
func (e RegistryError) Unwrap() error { return e.error }

// pushOptions say where the relay image goes and as whom.
type pushOptions struct {
	// Ref is registry/repository:tag.
	Ref string
	// EntraToken returns an Entra ID access token for ARM of the person
	// running azd.
	EntraToken func(context.Context) (string, error)
	// Transport reaches the registry (nil: http.DefaultTransport).
	Transport http.RoundTripper
}

// pushImage pushes idx to opts.Ref as the signed-in user: it exchanges the
// Entra ID token for an ACR refresh token, which the registry's own OAuth2
// flow (POST /oauth2/token, grant_type=refresh_token) turns into access
// tokens per repository. It returns the pushed reference pinned by digest.
func pushImage(ctx context.Context, idx v1.ImageIndex, opts pushOptions) (string, error) {
	ref, err := name.ParseReference(opts.Ref, name.StrictValidation)
	if err != nil {
		return "", RegistryError{"the relay image reference " + opts.Ref, err}
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport
	}
	entra, err := opts.EntraToken(ctx)
	if err != nil {
		return "", RegistryError{"signing in to " + ref.Context().RegistryStr(), err}
	}
	refresh, err := acrRefreshToken(ctx, &http.Client{Transport: opts.Transport}, ref.Context().RegistryStr(), entra)
	if err != nil {
		return "", err
	}
	auth := authn.FromConfig(authn.AuthConfig{Username: acrNullUser, IdentityToken: refresh})
	if err := remote.WriteIndex(ref, idx, remote.WithAuth(auth), remote.WithContext(ctx), remote.WithTransport(opts.Transport)); err != nil {
		return "", RegistryError{"pushing " + ref.String() + " (you need AcrPush on the registry)", err}
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return ref.Context().Name() + ":" + ref.Identifier() + "@" + digest.String(), nil
}

// acrRefreshToken calls the registry's POST /oauth2/exchange with an Entra
// ID access token (grant_type=access_token) and returns the ACR refresh
// token from {"refresh_token": ...} (Azure/acr docs/AAD-OAuth.md, "Calling
// POST /oauth2/exchange to get an ACR refresh token").
func acrRefreshToken(ctx context.Context, client *http.Client, registry, entraToken string) (string, error) {
	form := url.Values{"grant_type": {"access_token"}, "service": {registry}, "access_token": {entraToken}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+registry+"/oauth2/exchange", strings.NewReader(form.Encode()))
	if err != nil {
		return "", RegistryError{"exchanging the Entra ID token at " + registry, err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return "", RegistryError{"exchanging the Entra ID token at " + registry, err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", RegistryError{"exchanging the Entra ID token at " + registry,
			fmt.Errorf("HTTP %d: %s (are you signed in to the registry's tenant, with AcrPush on it?)", resp.StatusCode, strings.TrimSpace(string(body)))}
	}
	var out struct {
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.RefreshToken == "" {
		return "", RegistryError{"exchanging the Entra ID token at " + registry, fmt.Errorf("the answer holds no refresh_token (%w)", err)}
	}
	return out.RefreshToken, nil
}
