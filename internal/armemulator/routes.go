package armemulator

import (
	"net/http"
	"strings"
)

// ServeHTTP routes ARM requests. ARM path keywords are case-insensitive, so
// routing compares them with EqualFold.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-ms-request-id", newUUID())
	apiVersion, ok := authenticate(w, r)
	if !ok {
		return
	}
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if !segIs(seg, 0, "subscriptions") || len(seg) < 2 || seg[1] == "" {
		s.unsupported(w, r)
		return
	}
	if !s.admit(w, seg, apiVersion) {
		return
	}
	if !s.route(w, r, seg) {
		s.unsupported(w, r)
	}
}

// authenticate checks the headers and query every ARM request needs: a
// bearer token and an api-version. It returns the api-version, or answers
// the request and returns false.
func authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") || strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")) == "" {
		writeError(w, http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing or is not a bearer token.")
		return "", false
	}
	apiVersion := r.URL.Query().Get("api-version")
	if apiVersion == "" {
		writeError(w, http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
		return "", false
	}
	return apiVersion, true
}

// admit checks the subscription seg[1] is served and the api-version is one
// the addressed resource type knows; otherwise it answers the request and
// returns false.
func (s *Server) admit(w http.ResponseWriter, seg []string, apiVersion string) bool {
	sub := seg[1]
	if !s.subscriptionAllowed(sub) {
		writeError(w, http.StatusForbidden, "AuthorizationFailed",
			"The client does not have authorization to perform action over scope '/subscriptions/"+sub+"' or the scope is invalid.")
		return false
	}
	if typ := resourceType(seg); typ != "" {
		if ref := checkAPIVersion(typ, apiVersion, s.location()); !ref.ok() {
			writeRefusal(w, ref)
			return false
		}
	}
	return true
}

// route serves a request under /subscriptions/{sub}; false means the
// emulator does not serve that method on that path.
func (s *Server) route(w http.ResponseWriter, r *http.Request, seg []string) bool {
	sub := seg[1]
	switch {
	// /subscriptions/{sub}/providers/Microsoft.Compute/skus
	case isSKUList(seg) && r.Method == http.MethodGet:
		s.listSKUs(w, r, sub)
	// /subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/usages
	case isUsages(seg) && r.Method == http.MethodGet:
		s.listUsages(w, r, sub, seg[5])
	// /subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/communityGalleries/{gallery}/images/{definition}/versions
	case isGalleryVersions(seg) && r.Method == http.MethodGet:
		s.listGalleryVersions(w, r, sub, seg[5], seg[7], seg[9])
	// /subscriptions/{sub}/providers/{ns}/locations/{loc}/operations|operationResults/{id}
	case isOperation(seg) && r.Method == http.MethodGet:
		s.getOperation(w, r, sub, seg[7], segIs(seg, 6, "operationResults"))
	// /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{c}/maintenanceConfigurations[/{name}]
	case isMaintenanceConfig(seg):
		return s.routeMaintenanceConfig(w, r, seg)
	default:
		return s.routeResourceGroup(w, r, seg)
	}
	return true
}

// resourceGroupRoute is one resource type served under
// /subscriptions/{sub}/resourceGroups/{rg}/providers/{namespace}/{typ}[/{name}].
// A nil put or del means that method is not served.
type resourceGroupRoute struct {
	namespace, typ string
	list           func(s *Server, w http.ResponseWriter, r *http.Request, sub, rg string)
	get, put, del  func(s *Server, w http.ResponseWriter, r *http.Request, sub, rg, name string)
}

// resourceGroupRoutes are the resource group resource types the emulator
// serves. Disks are made by VM creates only; a disk PUT is not served. Load
// balancers and network security groups are read-only.
var resourceGroupRoutes = []resourceGroupRoute{
	{namespace: "Microsoft.Compute", typ: "virtualMachines",
		list: (*Server).listVMs, get: (*Server).getVM, put: (*Server).putVM, del: (*Server).deleteVM},
	{namespace: "Microsoft.Network", typ: "networkInterfaces",
		list: (*Server).listNICs, get: (*Server).getNIC, put: (*Server).putNIC, del: (*Server).deleteNIC},
	{namespace: "Microsoft.Network", typ: "loadBalancers",
		list: (*Server).listLoadBalancers, get: (*Server).getLoadBalancer},
	{namespace: "Microsoft.Network", typ: "networkSecurityGroups",
		list: (*Server).listSecurityGroups, get: (*Server).getSecurityGroup},
	{namespace: "Microsoft.Compute", typ: "disks",
		list: (*Server).listDisks, get: (*Server).getDisk, del: (*Server).deleteDisk},
}

// findResourceGroupRoute is the route for a resource group resource path,
// nil for other paths.
func findResourceGroupRoute(seg []string) *resourceGroupRoute {
	if (len(seg) != 7 && len(seg) != 8) || !segIs(seg, 2, "resourceGroups") || !segIs(seg, 4, "providers") {
		return nil
	}
	for i := range resourceGroupRoutes {
		route := &resourceGroupRoutes[i]
		if segIs(seg, 5, route.namespace) && segIs(seg, 6, route.typ) {
			return route
		}
	}
	return nil
}

// routeResourceGroup serves a resource group resource: list without a name,
// get, put or delete with one.
func (s *Server) routeResourceGroup(w http.ResponseWriter, r *http.Request, seg []string) bool {
	route := findResourceGroupRoute(seg)
	if route == nil {
		return false
	}
	sub := seg[1]
	rg := seg[3]
	name := ""
	if len(seg) == 8 {
		name = seg[7]
	}
	switch {
	case name == "" && r.Method == http.MethodGet:
		route.list(s, w, r, sub, rg)
	case name != "" && r.Method == http.MethodGet:
		route.get(s, w, r, sub, rg, name)
	case name != "" && r.Method == http.MethodPut && route.put != nil:
		route.put(s, w, r, sub, rg, name)
	case name != "" && r.Method == http.MethodDelete && route.del != nil:
		route.del(s, w, r, sub, rg, name)
	default:
		return false
	}
	return true
}

// resourceType is the ARM resource type a path addresses, "" for paths
// the emulator does not serve.
func resourceType(seg []string) string {
	switch {
	case isSKUList(seg):
		return "skus"
	case isUsages(seg):
		return "usages"
	case isOperation(seg):
		return "operations"
	case isGalleryVersions(seg):
		return "communityGalleryImageVersions"
	case isMaintenanceConfig(seg):
		return "maintenanceConfigurations"
	}
	if route := findResourceGroupRoute(seg); route != nil {
		return route.typ
	}
	return ""
}

// location is the region the emulator's SKU list serves ("" without one).
func (s *Server) location() string {
	for _, rs := range s.opts.SKUs {
		if rs != nil && len(rs.Locations) > 0 {
			return deref(rs.Locations[0])
		}
	}
	return ""
}

// unsupported answers routes the emulator does not serve. It is a 400, not
// a 404, so a client bug can never look like "resource already gone".
func (s *Server) unsupported(w http.ResponseWriter, r *http.Request) {
	s.log.Warn("unsupported ARM request", "method", r.Method, "path", r.URL.Path)
	writeError(w, http.StatusBadRequest, "InvalidResourceType",
		"The ARM emulator does not serve "+r.Method+" "+r.URL.Path+".")
}

func (s *Server) subscriptionAllowed(sub string) bool {
	if len(s.opts.SubscriptionIDs) == 0 {
		return true
	}
	for _, id := range s.opts.SubscriptionIDs {
		if strings.EqualFold(id, sub) {
			return true
		}
	}
	return false
}

// inject counts the request and applies any fault. It returns the fault (for
// async failures the handler applies) and whether the request was already
// answered.
func (s *Server) inject(w http.ResponseWriter, r *http.Request, req Request) (*Fault, bool) {
	s.mu.Lock()
	s.counters.Requests[req.Operation]++
	s.mu.Unlock()

	var fault *Fault
	s.mu.Lock()
	inj := s.opts.Injector
	s.mu.Unlock()
	if inj != nil {
		fault = inj.Inject(req)
	}
	if fault == nil {
		fault = s.faults.Inject(req)
	}
	if fault == nil {
		return nil, false
	}
	if fault.Delay > 0 {
		select {
		case <-r.Context().Done():
			return nil, true
		case <-s.afterReal(fault.Delay):
		}
	}
	if !fault.fails() {
		return nil, false
	}
	if fault.Drop {
		s.log.Info("injecting fault: dropping the connection", "operation", req.Operation, "name", req.Name)
		panic(http.ErrAbortHandler)
	}
	asyncOK := req.Operation == OpPutVM || req.Operation == OpDeleteVM || req.Operation == OpPutNIC || req.Operation == OpDeleteNIC
	if fault.Async && asyncOK {
		return fault, false
	}
	s.log.Info("injecting fault", "operation", req.Operation, "name", req.Name, "code", fault.Code, "status", fault.status())
	writeFault(w, fault)
	return nil, true
}

// segIs: path segment i exists and is the keyword want (ARM keywords are
// case-insensitive).
func segIs(seg []string, i int, want string) bool {
	return i < len(seg) && strings.EqualFold(seg[i], want)
}

// isSKUList: seg addresses /subscriptions/{sub}/providers/Microsoft.Compute/skus.
func isSKUList(seg []string) bool {
	return len(seg) == 5 && segIs(seg, 2, "providers") && segIs(seg, 3, "Microsoft.Compute") && segIs(seg, 4, "skus")
}

// isOperation: seg addresses an async operation's status or result,
// /subscriptions/{sub}/providers/{ns}/locations/{loc}/operations|operationResults/{id}.
func isOperation(seg []string) bool {
	return len(seg) == 8 && segIs(seg, 2, "providers") && segIs(seg, 4, "locations") &&
		(segIs(seg, 6, "operations") || segIs(seg, 6, "operationResults"))
}

// isGalleryVersions: seg addresses a community gallery image's versions.
func isGalleryVersions(seg []string) bool {
	return len(seg) == 11 && segIs(seg, 2, "providers") && segIs(seg, 3, "Microsoft.Compute") && segIs(seg, 4, "locations") &&
		segIs(seg, 6, "communityGalleries") && segIs(seg, 8, "images") && segIs(seg, 10, "versions")
}
