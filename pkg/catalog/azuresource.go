package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// Reading a catalog's facts from Azure: every page of the Retail Prices
// API for a region, and the Resource SKUs ARM lists (fetched by the
// caller's ARM client, pkg/azure's Launcher.ListSKUs), turned into the
// catalog file by BuildFile (refresh.go).

// DefaultPricesURL is the Azure Retail Prices API.
const DefaultPricesURL = "https://prices.azure.com/api/retail/prices"

// maxPricePages bounds how many NextPageLink hops a refresh follows (a
// region's VM meters are a few thousand items, 100 to 1,000 per page).
const maxPricePages = 2000

// RefreshSource is where Refresh reads a region's facts.
type RefreshSource struct {
	// Region is the ARM region, e.g. eastus.
	Region string
	// PricesURL is the Retail Prices API endpoint (DefaultPricesURL).
	PricesURL string
	// HTTPClient fetches prices; nil means a client with a 60 s timeout.
	HTTPClient *http.Client
	// ListSKUs lists the Resource SKUs ARM offers in Region.
	ListSKUs func(context.Context) ([]*armcompute.ResourceSKU, error)
}

// Refresh fetches the region's Linux prices and its Resource SKUs and
// builds the catalog file. Errors start with "catalog refresh: ".
func Refresh(ctx context.Context, src RefreshSource) ([]byte, RefreshReport, error) {
	var none RefreshReport
	if src.Region == "" {
		return nil, none, errors.New("catalog refresh: a region is required, e.g. eastus")
	}
	if src.ListSKUs == nil {
		return nil, none, errors.New("catalog refresh: no Resource SKUs source (ListSKUs) given")
	}
	items, err := FetchRetailPrices(ctx, src.HTTPClient, src.PricesURL, src.Region)
	if err != nil {
		return nil, none, err
	}
	prices := LinuxPrices(src.Region, items)
	if len(prices) == 0 {
		return nil, none, fmt.Errorf("catalog refresh: the Retail Prices API returned %d items and no Linux consumption price for %s; check the region name", len(items), src.Region)
	}
	skus, err := src.ListSKUs(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("catalog refresh: listing resource SKUs in %s: %w", src.Region, err)
	}
	var facts []SKUFacts
	for _, sku := range skus {
		if fact, ok := SKUFactsFromARM(sku, src.Region); ok {
			facts = append(facts, fact)
		}
	}
	return BuildFile(src.Region, facts, prices)
}

// FetchRetailPrices reads every page of the region's VM consumption
// meters from the Retail Prices API at pricesURL (client nil: a client
// with a 60 s timeout).
func FetchRetailPrices(ctx context.Context, client *http.Client, pricesURL, region string) ([]RetailPriceItem, error) {
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	parsed, err := url.Parse(pricesURL)
	if err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
		return nil, fmt.Errorf("catalog refresh: --prices-url %q is not an http(s) URL", pricesURL)
	}
	query := parsed.Query()
	query.Set("$filter", RetailPricesFilter(region))
	parsed.RawQuery = query.Encode()
	next := parsed.String()
	var items []RetailPriceItem
	for page := 1; next != ""; page++ {
		if page > maxPricePages {
			return nil, fmt.Errorf("catalog refresh: the Retail Prices API still had a NextPageLink after %d pages; giving up", maxPricePages)
		}
		pricesPage, err := fetchPricePage(ctx, client, next)
		if err != nil {
			return nil, fmt.Errorf("catalog refresh: retail prices page %d (%s): %w", page, next, err)
		}
		items = append(items, pricesPage.Items...)
		next = ""
		if pricesPage.NextPageLink != nil {
			next = *pricesPage.NextPageLink
		}
	}
	return items, nil
}

func fetchPricePage(ctx context.Context, client *http.Client, link string) (*RetailPricesPage, error) {
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
	var page RetailPricesPage
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("not a Retail Prices page: %w", err)
	}
	if page.BillingCurrency != "" && page.BillingCurrency != "USD" {
		return nil, fmt.Errorf("prices are in %s; karpfunc's catalog is in USD (drop currencyCode from --prices-url)", page.BillingCurrency)
	}
	return &page, nil
}

// SKUFactsFromARM reads a Resource SKU record; ok is false for anything
// but a VM size offered in region.
func SKUFactsFromARM(sku *armcompute.ResourceSKU, region string) (SKUFacts, bool) {
	if sku == nil || sku.Name == nil || sku.ResourceType == nil || *sku.ResourceType != "virtualMachines" {
		return SKUFacts{}, false
	}
	facts := SKUFacts{Name: *sku.Name, Tier: "Standard", Architecture: "x64"}
	if sku.Tier != nil {
		facts.Tier = *sku.Tier
	}
	for _, capability := range sku.Capabilities {
		if capability != nil && capability.Name != nil && capability.Value != nil {
			facts.setCapability(*capability.Name, *capability.Value)
		}
	}
	restrictedZones := facts.readRestrictions(sku.Restrictions, region)
	zones, found := zonesIn(sku.LocationInfo, region, restrictedZones)
	if !found && !containsFold(sku.Locations, region) {
		return SKUFacts{}, false
	}
	facts.Zones = zones
	return facts, true
}

// setCapability records the Resource SKU capability name=value that the
// catalog reads; others are ignored.
func (f *SKUFacts) setCapability(name, value string) {
	switch name {
	case "vCPUs":
		f.VCPUs, _ = strconv.ParseInt(value, 10, 64)
	case "MemoryGB":
		f.MemoryGiB, _ = strconv.ParseFloat(value, 64)
	case "GPUs":
		f.GPUs, _ = strconv.ParseInt(value, 10, 64)
	case "CpuArchitectureType":
		f.Architecture = value
	case "HyperVGenerations":
		f.HyperVGenerations = strings.Split(value, ",")
	case "PremiumIO":
		premium := strings.EqualFold(value, "true")
		f.PremiumIO = &premium
	case "AcceleratedNetworkingEnabled":
		accelerated := strings.EqualFold(value, "true")
		f.AcceleratedNetworking = &accelerated
	case "EncryptionAtHostSupported":
		supported := strings.EqualFold(value, "true")
		f.EncryptionAtHostSupported = &supported
	default:
		f.setLocalDiskCapability(name, value)
	}
}

// readRestrictions records a restriction of the size in region (its
// reason code) and returns the zones restricted for the subscription.
func (f *SKUFacts) readRestrictions(restrictions []*armcompute.ResourceSKURestrictions, region string) map[string]bool {
	restrictedZones := map[string]bool{}
	for _, restriction := range restrictions {
		if restriction == nil || restriction.Type == nil || restriction.RestrictionInfo == nil {
			continue
		}
		switch *restriction.Type {
		case armcompute.ResourceSKURestrictionsTypeLocation:
			if containsFold(restriction.RestrictionInfo.Locations, region) {
				f.Restricted = reasonCode(restriction)
			}
		case armcompute.ResourceSKURestrictionsTypeZone:
			for _, zone := range restriction.RestrictionInfo.Zones {
				if zone != nil {
					restrictedZones[*zone] = true
				}
			}
		}
	}
	return restrictedZones
}

func reasonCode(restriction *armcompute.ResourceSKURestrictions) string {
	if restriction.ReasonCode == nil {
		return ""
	}
	return string(*restriction.ReasonCode)
}

// zonesIn are the zones the size is offered in within region, less the
// restricted ones; found is whether its location info names region.
func zonesIn(infos []*armcompute.ResourceSKULocationInfo, region string, restricted map[string]bool) (zones []string, found bool) {
	for _, info := range infos {
		if info == nil || info.Location == nil || !strings.EqualFold(*info.Location, region) {
			continue
		}
		found = true
		for _, zone := range info.Zones {
			if zone != nil && !restricted[*zone] {
				zones = append(zones, *zone)
			}
		}
	}
	return zones, found
}

func containsFold(list []*string, s string) bool {
	for _, value := range list {
		if value != nil && strings.EqualFold(*value, s) {
			return true
		}
	}
	return false
}
