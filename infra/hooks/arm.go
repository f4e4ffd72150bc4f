package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// armClient calls ARM as the person running azd: azd's own sign-in first,
// then the Azure CLI's.
type armClient struct {
	cred azcore.TokenCredential
	http *http.Client
}

func newARM() (*armClient, error) {
	azd, err := azidentity.NewAzureDeveloperCLICredential(nil)
	if err != nil {
		return nil, err
	}
	cli, err := azidentity.NewAzureCLICredential(nil)
	if err != nil {
		return nil, err
	}
	cred, err := azidentity.NewChainedTokenCredential([]azcore.TokenCredential{azd, cli}, nil)
	if err != nil {
		return nil, err
	}
	return &armClient{cred: cred, http: &http.Client{Timeout: time.Minute}}, nil
}

func (c *armClient) token(ctx context.Context, scope string) (string, error) {
	tok, err := c.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return "", fmt.Errorf("signing in for %s (run azd auth login): %w", scope, err)
	}
	return tok.Token, nil
}

// do sends one ARM request and returns the body and status.
func (c *armClient) do(ctx context.Context, method, path string) ([]byte, int, error) {
	tok, err := c.token(ctx, "https://management.azure.com/.default")
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://management.azure.com"+path, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return body, resp.StatusCode, err
}
