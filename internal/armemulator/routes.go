package armemulator

import (
	"net/http"
	"strings"
)

// ServeHTTP routes ARM requests. ARM path keywords are case-insensitive, so
// routing compares them with EqualFold.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-ms-request-id", newUUID())
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") || strings.TrimSpace(strings.TrimPrefix(auth, "Bearer ")) == "" {
		writeError(w, http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing or is not a bearer token.")
		return
	}
	apiVersion := r.URL.Query().Get("api-version")
	if apiVersion == "" {
		writeError(w, http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
		return
	}
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	is := func(i int, want string) bool { return i < len(seg) && strings.EqualFold(seg[i], want) }
	if !is(0, "subscriptions") || len(seg) < 2 || seg[1] == "" {
		s.unsupported(w, r)
		return
	}
	sub := seg[1]
	if !s.subscriptionAllowed(sub) {
		writeError(w, http.StatusForbidden, "AuthorizationFailed",
			"The client does not have authorization to perform action over scope '/subscriptions/"+sub+"' or the scope is invalid.")
		return
	}
	if typ := resourceType(seg); typ != "" {
		if ref := checkAPIVersion(typ, apiVersion, s.location()); !ref.ok() {
			writeRefusal(w, ref)
			return
		}
	}
	switch {
	// /subscriptions/{sub}/providers/Microsoft.Compute/skus
	case len(seg) == 5 && is(2, "providers") && is(3, "Microsoft.Compute") && is(4, "skus"):
		if r.Method == http.MethodGet {
			s.listSKUs(w, r, sub)
			return
		}
	// /subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/communityGalleries/{gallery}/images/{definition}/versions
	case isGalleryVersions(seg):
		if r.Method == http.MethodGet {
			s.listGalleryVersions(w, r, sub, seg[5], seg[7], seg[9])
			return
		}
	// /subscriptions/{sub}/providers/{ns}/locations/{loc}/operations|operationResults/{id}
	case len(seg) == 8 && is(2, "providers") && is(4, "locations") && (is(6, "operations") || is(6, "operationResults")):
		if r.Method == http.MethodGet {
			s.getOperation(w, r, sub, seg[7], is(6, "operationResults"))
			return
		}
	// /subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}[/{name}]
	case (len(seg) == 7 || len(seg) == 8) && is(2, "resourceGroups") && is(4, "providers"):
		rg := seg[3]
		name := ""
		if len(seg) == 8 {
			name = seg[7]
		}
		switch {
		case is(5, "Microsoft.Compute") && is(6, "virtualMachines"):
			if s.routeResource(w, r, name, func() { s.listVMs(w, r, sub, rg) }, func() { s.getVM(w, r, sub, rg, name) },
				func() { s.putVM(w, r, sub, rg, name) }, func() { s.deleteVM(w, r, sub, rg, name) }) {
				return
			}
		case is(5, "Microsoft.Compute") && is(6, "disks") && r.Method != http.MethodPut:
			// Disks are made by VM creates only; a disk PUT is not served.
			if s.routeResource(w, r, name, func() { s.listDisks(w, r, sub, rg) }, func() { s.getDisk(w, r, sub, rg, name) },
				nil, func() { s.deleteDisk(w, r, sub, rg, name) }) {
				return
			}
		case is(5, "Microsoft.Network") && is(6, "networkInterfaces"):
			if s.routeResource(w, r, name, func() { s.listNICs(w, r, sub, rg) }, func() { s.getNIC(w, r, sub, rg, name) },
				func() { s.putNIC(w, r, sub, rg, name) }, func() { s.deleteNIC(w, r, sub, rg, name) }) {
				return
			}
		case is(5, "Microsoft.Network") && is(6, "loadBalancers") && r.Method == http.MethodGet:
			s.routeRead(w, r, name, func() { s.listLoadBalancers(w, r, sub, rg) }, func() { s.getLoadBalancer(w, r, sub, rg, name) })
			return
		case is(5, "Microsoft.Network") && is(6, "networkSecurityGroups") && r.Method == http.MethodGet:
			s.routeRead(w, r, name, func() { s.listSecurityGroups(w, r, sub, rg) }, func() { s.getSecurityGroup(w, r, sub, rg, name) })
			return
		}
	}
	s.unsupported(w, r)
}

// resourceType is the ARM resource type a path addresses, "" for paths
// the emulator does not serve.
func resourceType(seg []string) string {
	is := func(i int, want string) bool { return i < len(seg) && strings.EqualFold(seg[i], want) }
	switch {
	case len(seg) == 5 && is(2, "providers") && is(3, "Microsoft.Compute") && is(4, "skus"):
		return "skus"
	case len(seg) == 8 && is(2, "providers") && is(4, "locations") && (is(6, "operations") || is(6, "operationResults")):
		return "operations"
	case isGalleryVersions(seg):
		return "communityGalleryImageVersions"
	case (len(seg) == 7 || len(seg) == 8) && is(2, "resourceGroups") && is(4, "providers") && is(5, "Microsoft.Compute") && is(6, "virtualMachines"):
		return "virtualMachines"
	case (len(seg) == 7 || len(seg) == 8) && is(2, "resourceGroups") && is(4, "providers") && is(5, "Microsoft.Network") && is(6, "networkInterfaces"):
		return "networkInterfaces"
	case (len(seg) == 7 || len(seg) == 8) && is(2, "resourceGroups") && is(4, "providers") && is(5, "Microsoft.Network") && is(6, "loadBalancers"):
		return "loadBalancers"
	case (len(seg) == 7 || len(seg) == 8) && is(2, "resourceGroups") && is(4, "providers") && is(5, "Microsoft.Network") && is(6, "networkSecurityGroups"):
		return "networkSecurityGroups"
	case (len(seg) == 7 || len(seg) == 8) && is(2, "resourceGroups") && is(4, "providers") && is(5, "Microsoft.Compute") && is(6, "disks"):
		return "disks"
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

func (s *Server) routeResource(w http.ResponseWriter, r *http.Request, name string, list, get, put, del func()) bool {
	switch {
	case name == "" && r.Method == http.MethodGet:
		list()
	case name != "" && r.Method == http.MethodGet:
		get()
	case name != "" && r.Method == http.MethodPut:
		put()
	case name != "" && r.Method == http.MethodDelete:
		del()
	default:
		return false
	}
	return true
}

// routeRead serves a read-only resource type: list without a name, get
// with one.
func (s *Server) routeRead(w http.ResponseWriter, r *http.Request, name string, list, get func()) {
	if name == "" {
		list()
		return
	}
	get()
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

	var f *Fault
	s.mu.Lock()
	inj := s.opts.Injector
	s.mu.Unlock()
	if inj != nil {
		f = inj.Inject(req)
	}
	if f == nil {
		f = s.faults.Inject(req)
	}
	if f == nil {
		return nil, false
	}
	if f.Delay > 0 {
		select {
		case <-r.Context().Done():
			return nil, true
		case <-s.afterReal(f.Delay):
		}
	}
	if !f.fails() {
		return nil, false
	}
	if f.Drop {
		s.log.Info("injecting fault: dropping the connection", "operation", req.Operation, "name", req.Name)
		panic(http.ErrAbortHandler)
	}
	asyncOK := req.Operation == OpPutVM || req.Operation == OpDeleteVM || req.Operation == OpPutNIC || req.Operation == OpDeleteNIC
	if f.Async && asyncOK {
		return f, false
	}
	s.log.Info("injecting fault", "operation", req.Operation, "name", req.Name, "code", f.Code, "status", f.status())
	writeFault(w, f)
	return nil, true
}

// isGalleryVersions: seg addresses a community gallery image's versions.
func isGalleryVersions(seg []string) bool {
	is := func(i int, want string) bool { return i < len(seg) && strings.EqualFold(seg[i], want) }
	return len(seg) == 11 && is(2, "providers") && is(3, "Microsoft.Compute") && is(4, "locations") &&
		is(6, "communityGalleries") && is(8, "images") && is(10, "versions")
}
