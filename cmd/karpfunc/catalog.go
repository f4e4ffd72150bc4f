package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// runCatalog is `karpfunc catalog refresh ...`.
func runCatalog(args []string) error {
	if len(args) == 0 || args[0] != "refresh" {
		fmt.Fprintln(os.Stderr, "usage: karpfunc catalog refresh --region REGION --subscription ID -o FILE [flags]")
		if len(args) == 0 {
			return errors.New("catalog: missing subcommand; the only one is refresh")
		}
		return fmt.Errorf("catalog: unknown subcommand %q; the only one is refresh", args[0])
	}
	fs := flag.NewFlagSet("catalog refresh", flag.ContinueOnError)
	var opts refreshOptions
	fs.StringVar(&opts.Region, "region", "", "ARM region to build the catalog for, e.g. eastus (required)")
	fs.StringVar(&opts.Subscription, "subscription", os.Getenv(azure.EnvSubscriptionID), "subscription whose Resource SKUs (sizes, zones, restrictions) are read (default $"+azure.EnvSubscriptionID+")")
	fs.StringVar(&opts.PricesURL, "prices-url", catalog.DefaultPricesURL, "Azure Retail Prices API endpoint")
	fs.StringVar(&opts.ARMEndpoint, "arm-endpoint", os.Getenv(azure.EnvEndpoint), "ARM endpoint (default $"+azure.EnvEndpoint+", else "+azure.DefaultEndpoint+")")
	caFile := fs.String("arm-ca-file", os.Getenv(azure.EnvCAFile), "extra CA certificate (PEM) to trust for the ARM endpoint (default $"+azure.EnvCAFile+")")
	fs.StringVar(&opts.ARMToken, "arm-token", os.Getenv(azure.EnvToken), "static ARM bearer token (default $"+azure.EnvToken+"; empty uses azidentity)")
	out := fs.String("o", "", "catalog file to write; - for stdout (required)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("catalog refresh: unexpected argument %q", fs.Arg(0))
	}
	if *out == "" {
		return errors.New("catalog refresh: -o FILE is required (- for stdout)")
	}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return fmt.Errorf("catalog refresh: reading --arm-ca-file: %w", err)
		}
		opts.ARMCACertPEM = pem
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	raw, report, err := refreshCatalog(ctx, opts)
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err = os.Stdout.Write(raw)
	} else {
		err = os.WriteFile(*out, raw, 0o644)
	}
	if err != nil {
		return fmt.Errorf("catalog refresh: writing %s: %w", *out, err)
	}
	fmt.Fprintf(os.Stderr, "catalog refresh: %s: %d instance types; dropped %v\n", opts.Region, report.Kept, report.Dropped)
	return nil
}

type refreshOptions struct {
	Region, Subscription string
	PricesURL            string
	ARMEndpoint          string
	ARMCACertPEM         []byte
	ARMToken             string
	// HTTPClient fetches prices; nil means a client with a 60 s timeout.
	HTTPClient *http.Client
}

// refreshCatalog checks the flags, makes the ARM client that lists the
// Resource SKUs and builds the catalog file (catalog.Refresh).
func refreshCatalog(ctx context.Context, o refreshOptions) ([]byte, catalog.RefreshReport, error) {
	var none catalog.RefreshReport
	if o.Region == "" {
		return nil, none, errors.New("catalog refresh: --region is required, e.g. --region eastus")
	}
	if o.Subscription == "" {
		return nil, none, fmt.Errorf("catalog refresh: --subscription (or $%s) is required to read the Resource SKUs API", azure.EnvSubscriptionID)
	}
	launcher, err := azure.NewLauncher(azure.Options{
		SubscriptionID: o.Subscription, Location: o.Region,
		// Listing SKUs touches neither; the launcher requires them.
		ResourceGroup: "unused-by-catalog-refresh", ClusterName: "catalog-refresh",
		Endpoint: o.ARMEndpoint, CACertPEM: o.ARMCACertPEM, Token: o.ARMToken,
	})
	if err != nil {
		return nil, none, fmt.Errorf("catalog refresh: %w", err)
	}
	return catalog.Refresh(ctx, catalog.RefreshSource{Region: o.Region, PricesURL: o.PricesURL, HTTPClient: o.HTTPClient, ListSKUs: launcher.ListSKUs})
}
