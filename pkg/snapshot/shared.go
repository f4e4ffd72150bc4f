package snapshot

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SharedWriteMessage starts the log line and the error of a pass that wrote
// to an object a snapshot shared with the cache: the end-to-end tests fail
// on it (they run the handler with CacheOptions.CheckShared).
const SharedWriteMessage = "snapshot: a pass wrote to a shared object"

// SharedWriteError names the object a pass wrote to in place, and how.
type SharedWriteError struct {
	Kind, Key string
	// Diff is the object as handed out against the object now.
	Diff string
}

func (e *SharedWriteError) Error() string {
	return fmt.Sprintf("%s: %s %s (copy it before writing it):\n%s", SharedWriteMessage, e.Kind, e.Key, e.Diff)
}

// handedOut is a shared object as a snapshot handed it out.
type handedOut struct {
	kind string
	obj  client.Object
	was  client.Object
}

// recordShared keeps a copy of every shared object of a snapshot: the next
// checkShared compares them.
func (c *Cache) recordShared(kind *kindCache, objs []client.Object) {
	for _, o := range objs {
		c.handed = append(c.handed, handedOut{kind: kind.spec.name, obj: o, was: o.DeepCopyObject().(client.Object)})
	}
}

// checkShared reports the first object of the last snapshot that is no
// longer as it was handed out, and forgets them.
func (c *Cache) checkShared() error {
	handed := c.handed
	c.handed = nil
	for _, h := range handed {
		if !equality.Semantic.DeepEqual(h.obj, h.was) {
			err := &SharedWriteError{Kind: h.kind, Key: key(h.obj), Diff: diff.Diff(h.was, h.obj)}
			c.log.Error(SharedWriteMessage, "kind", h.kind, "object", key(h.obj), "diff", err.Diff)
			return err
		}
	}
	return nil
}

// CheckShared reports (SharedWriteError) whether a pass wrote to an object
// the last snapshot shared with the cache; without CacheOptions.CheckShared
// it reports nothing. Cluster checks too, before the next snapshot.
func (c *Cache) CheckShared() error {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	return c.checkShared()
}
