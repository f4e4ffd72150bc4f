package armemulator

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
)

// An AKS cluster's planned maintenance configurations
// (Microsoft.ContainerService/managedClusters/{c}/maintenanceConfigurations,
// armcontainerservice v6.6.0, api-version 2025-02-01: GET, list, PUT,
// DELETE). Tests set them through the real SDK client, as a user would
// with `az aks maintenanceconfiguration add`.

// maintenanceConfigNames are the names AKS accepts; any other is refused
// with InvalidParameter and this message (Azure/ARO-HCP#3260 quotes the
// service's answer).
var maintenanceConfigNames = []string{"default", "aksManagedAutoUpgradeSchedule", "aksManagedNodeOSUpgradeSchedule"}

const maintenanceConfigType = "Microsoft.ContainerService/managedClusters/maintenanceConfigurations"

// isMaintenanceConfig: seg addresses
// /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{c}/maintenanceConfigurations[/{name}].
func isMaintenanceConfig(seg []string) bool {
	return (len(seg) == 9 || len(seg) == 10) && segIs(seg, 2, "resourceGroups") && segIs(seg, 4, "providers") &&
		segIs(seg, 5, "Microsoft.ContainerService") && segIs(seg, 6, "managedClusters") && segIs(seg, 8, "maintenanceConfigurations")
}

// routeMaintenanceConfig serves the maintenanceConfigurations paths; false
// for a method the emulator does not serve there.
func (s *Server) routeMaintenanceConfig(w http.ResponseWriter, r *http.Request, seg []string) bool {
	sub, rg, cluster := seg[1], seg[3], seg[7]
	if !s.clusterExists(sub, rg, cluster) {
		notFound(w, "Microsoft.ContainerService/managedClusters", cluster, rg)
		return true
	}
	key := resourceKey(sub, rg, cluster)
	if len(seg) == 9 {
		if r.Method != http.MethodGet {
			return false
		}
		if _, done := s.inject(w, r, Request{Operation: OpListMaintenanceConfigs, SubscriptionID: sub, ResourceGroup: rg, Name: cluster}); done {
			return true
		}
		s.mu.Lock()
		out := armcontainerservice.MaintenanceConfigurationListResult{Value: []*armcontainerservice.MaintenanceConfiguration{}}
		for _, cfg := range s.maintenance[key] {
			out.Value = append(out.Value, copyMaintenanceConfig(cfg))
		}
		s.mu.Unlock()
		sort.Slice(out.Value, func(i, j int) bool { return deref(out.Value[i].Name) < deref(out.Value[j].Name) })
		writeJSON(w, http.StatusOK, out)
		return true
	}
	name := seg[9]
	switch r.Method {
	case http.MethodGet:
		if _, done := s.inject(w, r, Request{Operation: OpGetMaintenanceConfig, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
			return true
		}
		s.mu.Lock()
		cfg, ok := s.maintenance[key][strings.ToLower(name)]
		if ok {
			cfg = copyMaintenanceConfig(cfg)
		}
		s.mu.Unlock()
		if !ok {
			// ARM's not-found shape for a child resource; the exact code
			// AKS returns for a missing configuration is not confirmed
			// (karpfunc lists, and a list holds only what exists).
			notFound(w, "Microsoft.ContainerService/managedClusters/"+cluster+"/maintenanceConfigurations", name, rg)
			return true
		}
		writeJSON(w, http.StatusOK, cfg)
	case http.MethodPut:
		s.putMaintenanceConfig(w, r, sub, rg, cluster, name)
	case http.MethodDelete:
		s.mu.Lock()
		_, existed := s.maintenance[key][strings.ToLower(name)]
		delete(s.maintenance[key], strings.ToLower(name))
		s.mu.Unlock()
		if !existed {
			w.WriteHeader(http.StatusNoContent) // ARM: deleting what is not there is 204
			return true
		}
		w.WriteHeader(http.StatusOK)
	default:
		return false
	}
	return true
}

func (s *Server) putMaintenanceConfig(w http.ResponseWriter, r *http.Request, sub, rg, cluster, name string) {
	if _, done := s.inject(w, r, Request{Operation: OpPutMaintenanceConfig, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
		return
	}
	canonical := ""
	for _, known := range maintenanceConfigNames {
		if strings.EqualFold(known, name) {
			canonical = known
		}
	}
	if canonical == "" {
		writeError(w, http.StatusBadRequest, "InvalidParameter",
			"Only 'default', 'aksManagedAutoUpgradeSchedule' and 'aksManagedNodeOSUpgradeSchedule' are allowed configNames for maintenance configuration.")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", "Reading the request body failed: "+err.Error())
		return
	}
	var cfg armcontainerservice.MaintenanceConfiguration
	if err := json.Unmarshal(body, &cfg); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: "+err.Error())
		return
	}
	// Read-only fields are the service's.
	cfg.ID = ptr("/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + cluster + "/maintenanceConfigurations/" + canonical)
	cfg.Name = ptr(canonical)
	cfg.Type = ptr(maintenanceConfigType)
	cfg.SystemData = nil
	// startDate defaults to "the current date at creation time" (Learn,
	// planned maintenance, property table).
	if mw := propsWindow(&cfg); mw != nil && mw.StartDate == nil {
		now := s.clock.Now().UTC()
		today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		mw.StartDate = &today
	}
	key := resourceKey(sub, rg, cluster)
	s.mu.Lock()
	if s.maintenance == nil {
		s.maintenance = map[string]map[string]*armcontainerservice.MaintenanceConfiguration{}
	}
	if s.maintenance[key] == nil {
		s.maintenance[key] = map[string]*armcontainerservice.MaintenanceConfiguration{}
	}
	s.maintenance[key][strings.ToLower(canonical)] = copyMaintenanceConfig(&cfg)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, &cfg)
}

func propsWindow(cfg *armcontainerservice.MaintenanceConfiguration) *armcontainerservice.MaintenanceWindow {
	if cfg.Properties == nil {
		return nil
	}
	return cfg.Properties.MaintenanceWindow
}

// clusterExists: the emulator serves the managed cluster (every cluster
// when Options.ManagedClusters is empty).
func (s *Server) clusterExists(sub, rg, cluster string) bool {
	if len(s.opts.ManagedClusters) == 0 {
		return true
	}
	id := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + cluster
	return slices.ContainsFunc(s.opts.ManagedClusters, func(known string) bool { return strings.EqualFold(known, id) })
}

// copyMaintenanceConfig is a deep copy (through the SDK's JSON).
func copyMaintenanceConfig(cfg *armcontainerservice.MaintenanceConfiguration) *armcontainerservice.MaintenanceConfiguration {
	raw, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // SDK models always marshal
	}
	var out armcontainerservice.MaintenanceConfiguration
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return &out
}
