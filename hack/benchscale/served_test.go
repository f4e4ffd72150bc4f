package main

import "testing"

func TestPodListLine(t *testing.T) {
	for _, tc := range []struct {
		line, storage string
		count         int64
		ok            bool
	}{
		{line: `apiserver_storage_list_total{group="",index="",resource="pods",storage="etcd"} 183`, storage: "etcd", count: 183, ok: true},
		{line: `apiserver_storage_list_total{group="",index="",resource="pods",storage="watchcache"} 3e+02`, storage: "watchcache", count: 300, ok: true},
		{line: `apiserver_storage_list_total{group="",index="",resource="nodes",storage="etcd"} 9`},
		{line: `apiserver_storage_list_total{group="karpenter.sh",index="",resource="pods",storage="etcd"} 9`},
		{line: `apiserver_storage_list_returned_objects_total{group="",resource="pods"} 5`},
		{line: `apiserver_storage_list_fetched_objects_total{group="",index="",resource="pods",storage="watchcache"} 168000`},
		{line: `# TYPE apiserver_storage_list_total counter`},
	} {
		storage, count, ok := podListLine(tc.line)
		if storage != tc.storage || count != tc.count || ok != tc.ok {
			t.Errorf("podListLine(%q) = %q, %d, %v; want %q, %d, %v", tc.line, storage, count, ok, tc.storage, tc.count, tc.ok)
		}
	}
}
