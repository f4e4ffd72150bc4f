package snapshot

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/apis"
)

// TestApplySkipsWhatThePartsHeld: after pods are read by namespace, each
// namespace's LIST whole at its own resourceVersion, the watch from the
// lowest replays changes some LISTs already held; those leave the object
// as listed, the rest apply, and past the highest every change applies.
func TestApplySkipsWhatThePartsHeld(t *testing.T) {
	pod := func(namespace, name, rv, version string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: rv, Labels: map[string]string{"version": version}}}
	}
	c := filled(pod("a", "p", "119", "listed"), pod("b", "q", "90", "listed"), pod("c", "r", "125", "listed"))
	pods := c.kind("pods")
	pods.gen, pods.rv = 1, 100
	pods.listed = listedAt{floor: 100, ceiling: 130, namespaces: map[string]uint64{"a": 120, "b": 100, "c": 130}}
	for _, step := range []struct {
		name        string
		change      watch.EventType
		pod         *corev1.Pod
		wantVersion string // of the pod's key after the event; "" gone
	}{
		{name: "a change a's LIST held", change: watch.Modified, pod: pod("a", "p", "110", "replayed"), wantVersion: "listed"},
		{name: "a change after b's LIST", change: watch.Modified, pod: pod("b", "q", "111", "new"), wantVersion: "new"},
		{name: "a namespace made after the namespaces' list", change: watch.Added, pod: pod("d", "s", "112", "new"), wantVersion: "new"},
		{name: "a deletion a's LIST held", change: watch.Deleted, pod: pod("a", "p", "118", "replayed"), wantVersion: "listed"},
		{name: "c's LIST held its own creation", change: watch.Added, pod: pod("c", "r", "125", "replayed"), wantVersion: "listed"},
		{name: "past every LIST", change: watch.Modified, pod: pod("a", "p", "131", "new"), wantVersion: "new"},
		{name: "past every LIST, a deletion", change: watch.Deleted, pod: pod("c", "r", "132", "new"), wantVersion: ""},
	} {
		if err := pods.apply(1, watch.Event{Type: step.change, Object: step.pod}); err != nil {
			t.Fatal(err)
		}
		got := ""
		if obj, ok := pods.objs[key(step.pod)]; ok {
			got = obj.GetLabels()["version"]
		}
		if got != step.wantVersion || fmt.Sprint(pods.rv) != step.pod.ResourceVersion {
			t.Errorf("%s: %s is at version %q, the kind at resourceVersion %d; want %q at %s", step.name, key(step.pod), got, pods.rv, step.wantVersion, step.pod.ResourceVersion)
		}
	}
	if pods.listed.namespaces != nil {
		t.Error("the parts' resourceVersions are still kept past the last one")
	}
}

// namespacedServer serves pods by namespace as the API server does: the
// namespaces' list at namespacesRV, and each namespace's LIST at its own
// resourceVersion; failing names a namespace whose LIST fails.
type namespacedServer struct {
	t            testing.TB
	namespacesRV string
	pods         map[string][]corev1.Pod
	rvs          map[string]string
	failing      string

	mu             sync.Mutex
	paths          []string
	inFlight, most int
}

func (s *namespacedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path)
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
	if r.URL.Path == "/api/v1/namespaces" {
		limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
		if err != nil || limit != maxNamespaceParts+1 {
			s.t.Errorf("namespaces listed with %s; want limit=%d, enough to tell too many", r.URL.RawQuery, maxNamespaceParts+1)
		}
		list := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: s.namespacesRV}}
		for _, name := range slices.Sorted(maps.Keys(s.pods)) {
			if len(list.Items) == limit {
				list.Continue = "more" // as the API server pages
				break
			}
			list.Items = append(list.Items, corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		_, _ = w.Write(encodeAs(s.t, runtime.ContentTypeProtobuf, list))
		return
	}
	namespace := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/pods")
	query := r.URL.Query()
	if query.Get("resourceVersion") != s.namespacesRV || query.Get("resourceVersionMatch") != "NotOlderThan" {
		s.t.Errorf("LIST of %s with %s; want resourceVersion=%s (the namespaces' list's), NotOlderThan", r.URL.Path, r.URL.RawQuery, s.namespacesRV)
	}
	if namespace == s.failing {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"pods is forbidden"}`))
		return
	}
	_, _ = w.Write(encodeAs(s.t, runtime.ContentTypeProtobuf, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: s.rvs[namespace]}, Items: s.pods[namespace]}))
}

// readerOf is a PageReader of handler, over TLS as every API server is.
func readerOf(t testing.TB, handler http.Handler) *PageReader {
	server := httptest.NewTLSServer(handler)
	t.Cleanup(server.Close)
	reader, err := NewPageReader(&rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return reader
}

// TestPageReaderReadsPodsByNamespace: pods are read one LIST per
// namespace, ListsAtOnce at a time, each at least as fresh as the
// namespaces' list; the last page says where each namespace's LIST was
// whole, and a LIST that fails names its namespace.
func TestPageReaderReadsPodsByNamespace(t *testing.T) {
	newServer := func() *namespacedServer {
		s := &namespacedServer{t: t, namespacesRV: "500", pods: map[string][]corev1.Pod{}, rvs: map[string]string{}}
		for i := range 8 {
			namespace := fmt.Sprintf("team-%d", i)
			for j := range 40 {
				pod := testPod(fmt.Sprintf("p-%d", j), "node-0")
				pod.Namespace = namespace
				s.pods[namespace] = append(s.pods[namespace], *pod)
			}
			s.rvs[namespace] = fmt.Sprint(500 + i)
		}
		return s
	}
	t.Run("whole", func(t *testing.T) {
		server := newServer()
		reader := readerOf(t, server)
		reader.ListsAtOnce = 3
		seen := map[string]bool{}
		var last page
		for read, err := range reader.pages(t.Context(), podsProto, 100, func(obj client.Object) { seen[key(obj)] = true }) {
			if err != nil {
				t.Fatal(err)
			}
			last = read
		}
		at, err := last.listed()
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != 8*40 || at.floor != 500 || at.ceiling != 507 || len(at.namespaces) != 8 || at.namespaces["team-3"] != 503 {
			t.Errorf("read %d pods, whole at %+v; want 320, floor 500, ceiling 507, team-3 at 503", len(seen), at)
		}
		server.mu.Lock()
		defer server.mu.Unlock()
		if len(server.paths) != 9 || server.most > 3 {
			t.Errorf("%d requests, at most %d at once; want 9 (the namespaces, then one LIST each), at most 3", len(server.paths), server.most)
		}
	})
	t.Run("a namespace's LIST fails", func(t *testing.T) {
		server := newServer()
		server.failing = "team-5"
		var sawErr error
		for _, err := range readerOf(t, server).pages(t.Context(), podsProto, 100, func(client.Object) {}) {
			if err != nil {
				sawErr = err
			}
		}
		if sawErr == nil || !strings.Contains(sawErr.Error(), "listing pods in namespace team-5") || !strings.Contains(sawErr.Error(), "forbidden") {
			t.Errorf("error %v; want one naming the pods of team-5 and the API server's refusal", sawErr)
		}
	})
	for _, tc := range []struct {
		name        string
		namespaces  int
		listsAtOnce int
	}{
		{name: "one LIST when asked for", namespaces: 8, listsAtOnce: 1},
		{name: "one LIST for more namespaces than parts", namespaces: maxNamespaceParts + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := newServer()
			for i := range tc.namespaces {
				server.pods[fmt.Sprintf("ns-%03d", i)] = nil
			}
			whole := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "600"}, Items: server.pods["team-0"]}
			var wholeListed []string
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/api/v1/pods" {
					wholeListed = append(wholeListed, r.URL.RawQuery)
					w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
					_, _ = w.Write(encodeAs(t, runtime.ContentTypeProtobuf, whole))
					return
				}
				server.ServeHTTP(w, r)
			})
			reader := readerOf(t, handler)
			reader.ListsAtOnce = tc.listsAtOnce
			var last page
			for read, err := range reader.pages(t.Context(), podsProto, 1000, func(client.Object) {}) {
				if err != nil {
					t.Fatal(err)
				}
				last = read
			}
			at, err := last.listed()
			if err != nil || len(wholeListed) != 1 || wholeListed[0] != "" || at.floor != 600 || at.namespaces != nil {
				t.Errorf("LISTs of all pods %q, whole at %+v (%v); want one consistent LIST, at 600", wholeListed, at, err)
			}
		})
	}
}

// TestCacheReadsPodsByNamespaceUnderChurn runs the cold start against a
// real API server while pods in several namespaces change, are deleted and
// made: pods are read one LIST per namespace, and once the changes stop,
// the next pass holds exactly the API server's pods, each at its current
// resourceVersion. (A watch started from the highest part's
// resourceVersion, not the lowest, loses the changes made between: this
// test then fails.)
func TestCacheReadsPodsByNamespaceUnderChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local control plane")
	}
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true})
	kube, err := client.NewWithWatch(cp.RESTConfig(), client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	namespaces := []string{"team-0", "team-1", "team-2"}
	for _, ns := range namespaces {
		mustCreate(t, kube, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	testenv.DefaultServiceAccounts(t, kube, namespaces...)
	newPod := func(ns string, i int) *corev1.Pod {
		pod := testPod(fmt.Sprintf("p-%d", i), "node-0")
		pod.Namespace = ns
		return pod
	}
	for _, ns := range namespaces {
		for i := range 20 {
			mustCreate(t, kube, newPod(ns, i))
		}
	}

	var partsMu sync.Mutex
	var parts []string
	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("resourceVersionMatch") == "NotOlderThan" && strings.HasSuffix(r.URL.Path, "/pods") {
				partsMu.Lock()
				parts = append(parts, r.URL.Path)
				partsMu.Unlock()
				if strings.Contains(r.URL.Path, "/team-2/") {
					// team-2's LIST is whole well after the others: the
					// watch must bring their changes in between.
					time.Sleep(300 * time.Millisecond)
				}
			}
			return rt.RoundTrip(r)
		})
	}
	cache := NewCache(kube, CacheOptions{RelistBelow: -1, Pages: mustPageReader(t, cfg), CheckShared: true})
	t.Cleanup(cache.Close)

	// The changes stop between requests, never mid-request: a request
	// cancelled in flight can still be committed after the test compares.
	var stopping atomic.Bool
	churned := make(chan int)
	go func() {
		changes := 0
		defer func() { churned <- changes }()
		for round := 1; !stopping.Load(); round++ {
			ns, i := namespaces[round%len(namespaces)], round%20
			var err error
			switch round % 5 {
			case 0:
				err = kube.Delete(t.Context(), newPod(ns, i))
			case 1:
				err = kube.Create(t.Context(), newPod(ns, i))
			default:
				err = relabel(t.Context(), kube, newPod(ns, i), round)
			}
			if err == nil {
				changes++
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // changes under way before the cold start
	mustCluster(t, cache)
	stopping.Store(true)
	if changes := <-churned; changes < 20 {
		t.Fatalf("only %d changes were made during the cold start; the test shows nothing", changes)
	}

	snap := mustCluster(t, cache)
	var want corev1.PodList
	if err := kube.List(t.Context(), &want); err != nil {
		t.Fatal(err)
	}
	wantRVs, gotRVs := map[string]string{}, map[string]string{}
	for i := range want.Items {
		wantRVs[key(&want.Items[i])] = want.Items[i].ResourceVersion
	}
	for _, pod := range snap.Pods {
		gotRVs[key(pod)] = pod.ResourceVersion
	}
	if !maps.Equal(gotRVs, wantRVs) {
		t.Errorf("the warm pass's pods differ from the API server's:\n got %v\nwant %v", gotRVs, wantRVs)
	}
	partsMu.Lock()
	defer partsMu.Unlock()
	for _, ns := range namespaces {
		if !slices.Contains(parts, "/api/v1/namespaces/"+ns+"/pods") {
			t.Errorf("pods were listed by %v; want one LIST of %s among them", parts, ns)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
