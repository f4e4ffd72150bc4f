package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// deployerActions are the ARM actions `azd up` performs as the person
// running it, each with the reason, checked before anything is created.
// Contributor grants the first ones, Role Based Access Control
// Administrator the role assignments (infra/README.md, "Deployer rights").
var deployerActions = []struct{ action, why string }{
	{"Microsoft.Resources/subscriptions/resourceGroups/write", "create karpfunc's resource group"},
	{"Microsoft.Resources/deployments/write", "deploy infra/main.bicep"},
	{"Microsoft.EventGrid/systemTopics/write", "create or update the HealthResources system topic"},
	{"Microsoft.ContainerRegistry/registries/write", "create the relay image's registry"},
	{"Microsoft.ManagedIdentity/userAssignedIdentities/write", "create karpfunc's identities"},
	{"Microsoft.Authorization/roleAssignments/write", "assign karpfunc's identities their built-in roles"},
}

// permission is one entry of ARM's Microsoft.Authorization/permissions list:
// what one role assignment lets the caller do at the scope.
type permission struct {
	Actions    []string `json:"actions"`
	NotActions []string `json:"notActions"`
}

// RightsError names the actions the person running azd lacks on the
// subscription.
type RightsError struct{ error }

func (e RightsError) Unwrap() error { return e.error }

// missingActions returns the deployer actions no permission entry allows:
// an entry allows an action when one of its actions matches it (ARM's "*"
// wildcard, case-insensitive) and none of its notActions does.
func missingActions(perms []permission) []string {
	var missing []string
	for _, need := range deployerActions {
		allowed := false
		for _, perm := range perms {
			if anyMatch(perm.Actions, need.action) && !anyMatch(perm.NotActions, need.action) {
				allowed = true
				break
			}
		}
		if !allowed {
			missing = append(missing, need.action+" (to "+need.why+")")
		}
	}
	return missing
}

func anyMatch(patterns []string, action string) bool {
	for _, pattern := range patterns {
		re := "(?i)^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
		if regexp.MustCompile(re).MatchString(action) {
			return true
		}
	}
	return false
}

// checkDeployerRights reads what the caller may do on the subscription
// (GET .../providers/Microsoft.Authorization/permissions) and names every
// missing action before anything is created.
func checkDeployerRights(ctx context.Context, arm *armClient, sub string) error {
	path := "/subscriptions/" + sub + "/providers/Microsoft.Authorization/permissions?api-version=2022-04-01"
	var perms []permission
	for path != "" {
		body, status, err := arm.do(ctx, http.MethodGet, path)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("reading your permissions on subscription %s: HTTP %d: %s", sub, status, body)
		}
		var page struct {
			Value    []permission `json:"value"`
			NextLink string       `json:"nextLink"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("decoding your permissions on subscription %s: %w", sub, err)
		}
		perms = append(perms, page.Value...)
		if path, err = armPath(page.NextLink); err != nil {
			return err
		}
	}
	if missing := missingActions(perms); len(missing) > 0 {
		return RightsError{fmt.Errorf("you lack rights on subscription %s that azd up needs; ask for Contributor and Role Based Access Control Administrator there (or Owner). Missing:\n  - %s",
			sub, strings.Join(missing, "\n  - "))}
	}
	return nil
}
