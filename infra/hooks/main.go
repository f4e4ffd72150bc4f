// Command hooks is karpfunc's azd hooks (azure.yaml):
//
//	preprovision: check the AKS cluster the azd parameters name and write what
//	              the template needs from it into the azd environment;
//	postdeploy:   install the relay chart (CRDs, RBAC, relay) into the cluster
//	              with values from the provisioned outputs;
//	predown:      uninstall the chart, refusing while NodeClaims (VMs) exist.
//
// Both read the azd environment from their own environment, as azd runs hooks.
// Every failure says what to change; nothing is skipped silently.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./infra/hooks preprovision|postdeploy|predown")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "preprovision":
		err = preprovision(ctx, os.Getenv)
	case "postdeploy":
		err = postdeploy(ctx, os.Getenv)
	case "predown":
		err = predown(ctx, os.Getenv)
	default:
		err = fmt.Errorf("unknown hook %q: want preprovision, postdeploy or predown", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "karpfunc:", err)
		os.Exit(1)
	}
}

// required reads azd environment values, naming every missing one with the
// command that sets it.
func required(getenv func(string) string, names ...string) (map[string]string, error) {
	out := map[string]string{}
	var missing []string
	for _, name := range names {
		value := strings.TrimSpace(getenv(name))
		if value == "" {
			missing = append(missing, "azd env set "+name+" <value>")
			continue
		}
		out[name] = value
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the azd environment lacks required values; set them:\n  %s", strings.Join(missing, "\n  "))
	}
	return out, nil
}
