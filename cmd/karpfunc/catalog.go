package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// DefaultPricesURL is the Azure Retail Prices API.
const DefaultPricesURL = "https://prices.azure.com/api/retail/prices"

// maxPricePages bounds how many NextPageLink hops a refresh follows (a
// region's VM meters are a few thousand items, 100 to 1,000 per page).
const maxPricePages = 2000

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
	var o refreshOptions
	fs.StringVar(&o.Region, "region", "", "ARM region to build the catalog for, e.g. eastus (required)")
	fs.StringVar(&o.Subscription, "subscription", os.Getenv(azure.EnvSubscriptionID), "subscription whose Resource SKUs (sizes, zones, restrictions) are read (default $"+azure.EnvSubscriptionID+")")
	fs.StringVar(&o.PricesURL, "prices-url", DefaultPricesURL, "Azure Retail Prices API endpoint")
	fs.StringVar(&o.ARMEndpoint, "arm-endpoint", os.Getenv(azure.EnvEndpoint), "ARM endpoint (default $"+azure.EnvEndpoint+", else "+azure.DefaultEndpoint+")")
	caFile := fs.String("arm-ca-file", os.Getenv(azure.EnvCAFile), "extra CA certificate (PEM) to trust for the ARM endpoint (default $"+azure.EnvCAFile+")")
	fs.StringVar(&o.ARMToken, "arm-token", os.Getenv(azure.EnvToken), "static ARM bearer token (default $"+azure.EnvToken+"; empty uses azidentity)")
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
		o.ARMCACertPEM = pem
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	raw, report, err := refreshCatalog(ctx, o)
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
	fmt.Fprintf(os.Stderr, "catalog refresh: %s: %d instance types; dropped %v\n", o.Region, report.Kept, report.Dropped)
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

// refreshCatalog fetches prices and SKUs and builds the catalog file.
func refreshCatalog(ctx context.Context, o refreshOptions) ([]byte, catalog.RefreshReport, error) {
	var none catalog.RefreshReport
	if o.Region == "" {
		return nil, none, errors.New("catalog refresh: --region is required, e.g. --region eastus")
	}
	if o.Subscription == "" {
		return nil, none, fmt.Errorf("catalog refresh: --subscription (or $%s) is required to read the Resource SKUs API", azure.EnvSubscriptionID)
	}
	items, err := fetchRetailPrices(ctx, o)
	if err != nil {
		return nil, none, err
	}
	prices := catalog.LinuxPrices(o.Region, items)
	if len(prices) == 0 {
		return nil, none, fmt.Errorf("catalog refresh: the Retail Prices API returned %d items and no Linux consumption price for %s; check the region name", len(items), o.Region)
	}
	l, err := azure.NewLauncher(azure.Options{
		SubscriptionID: o.Subscription, Location: o.Region,
		// Listing SKUs touches neither; the launcher requires them.
		ResourceGroup: "unused-by-catalog-refresh", ClusterName: "catalog-refresh",
		Endpoint: o.ARMEndpoint, CACertPEM: o.ARMCACertPEM, Token: o.ARMToken,
	})
	if err != nil {
		return nil, none, fmt.Errorf("catalog refresh: %w", err)
	}
	skus, err := l.ListSKUs(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("catalog refresh: listing resource SKUs in %s: %w", o.Region, err)
	}
	var facts []catalog.SKUFacts
	for _, s := range skus {
		if f, ok := skuFacts(s, o.Region); ok {
			facts = append(facts, f)
		}
	}
	return catalog.BuildFile(o.Region, facts, prices)
}

// fetchRetailPrices reads every page of the region's VM consumption meters.
func fetchRetailPrices(ctx context.Context, o refreshOptions) ([]catalog.RetailPriceItem, error) {
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	u, err := url.Parse(o.PricesURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("catalog refresh: --prices-url %q is not an http(s) URL", o.PricesURL)
	}
	q := u.Query()
	q.Set("$filter", catalog.RetailPricesFilter(o.Region))
	u.RawQuery = q.Encode()
	next := u.String()
	var items []catalog.RetailPriceItem
	for page := 1; next != ""; page++ {
		if page > maxPricePages {
			return nil, fmt.Errorf("catalog refresh: the Retail Prices API still had a NextPageLink after %d pages; giving up", maxPricePages)
		}
		p, err := fetchPricePage(ctx, client, next)
		if err != nil {
			return nil, fmt.Errorf("catalog refresh: retail prices page %d (%s): %w", page, next, err)
		}
		items = append(items, p.Items...)
		next = ""
		if p.NextPageLink != nil {
			next = *p.NextPageLink
		}
	}
	return items, nil
}

func fetchPricePage(ctx context.Context, client *http.Client, link string) (*catalog.RetailPricesPage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 300 {
			snippet = snippet[:300] + "…"
		}
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet)
	}
	var p catalog.RetailPricesPage
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("not a Retail Prices page: %w", err)
	}
	if p.BillingCurrency != "" && p.BillingCurrency != "USD" {
		return nil, fmt.Errorf("prices are in %s; karpfunc's catalog is in USD (drop currencyCode from --prices-url)", p.BillingCurrency)
	}
	return &p, nil
}

// skuFacts reads a Resource SKU record; ok is false for anything but a VM
// size offered in region.
func skuFacts(s *armcompute.ResourceSKU, region string) (catalog.SKUFacts, bool) {
	if s == nil || s.Name == nil || s.ResourceType == nil || *s.ResourceType != "virtualMachines" {
		return catalog.SKUFacts{}, false
	}
	f := catalog.SKUFacts{Name: *s.Name, Tier: "Standard", Architecture: "x64"}
	if s.Tier != nil {
		f.Tier = *s.Tier
	}
	for _, c := range s.Capabilities {
		if c == nil || c.Name == nil || c.Value == nil {
			continue
		}
		v := *c.Value
		switch *c.Name {
		case "vCPUs":
			f.VCPUs, _ = strconv.ParseInt(v, 10, 64)
		case "MemoryGB":
			f.MemoryGiB, _ = strconv.ParseFloat(v, 64)
		case "GPUs":
			f.GPUs, _ = strconv.ParseInt(v, 10, 64)
		case "CpuArchitectureType":
			f.Architecture = v
		case "HyperVGenerations":
			f.HyperVGenerations = strings.Split(v, ",")
		case "PremiumIO":
			b := strings.EqualFold(v, "true")
			f.PremiumIO = &b
		case "AcceleratedNetworkingEnabled":
			b := strings.EqualFold(v, "true")
			f.AcceleratedNetworking = &b
		}
	}
	found := false
	restrictedZones := map[string]bool{}
	for _, r := range s.Restrictions {
		if r == nil || r.Type == nil {
			continue
		}
		reason := ""
		if r.ReasonCode != nil {
			reason = string(*r.ReasonCode)
		}
		switch *r.Type {
		case armcompute.ResourceSKURestrictionsTypeLocation:
			if r.RestrictionInfo != nil && containsFold(r.RestrictionInfo.Locations, region) {
				f.Restricted = reason
			}
		case armcompute.ResourceSKURestrictionsTypeZone:
			if r.RestrictionInfo != nil {
				for _, z := range r.RestrictionInfo.Zones {
					if z != nil {
						restrictedZones[*z] = true
					}
				}
			}
		}
	}
	for _, li := range s.LocationInfo {
		if li == nil || li.Location == nil || !strings.EqualFold(*li.Location, region) {
			continue
		}
		found = true
		for _, z := range li.Zones {
			if z != nil && !restrictedZones[*z] {
				f.Zones = append(f.Zones, *z)
			}
		}
	}
	if !found && !containsFold(s.Locations, region) {
		return catalog.SKUFacts{}, false
	}
	return f, true
}

func containsFold(list []*string, s string) bool {
	for _, v := range list {
		if v != nil && strings.EqualFold(*v, s) {
			return true
		}
	}
	return false
}
