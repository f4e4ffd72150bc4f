package catalog

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/catalog/internal/datagen"
)

// TestEmbeddedCatalogIsFresh rebuilds data/catalog.json.gz from the facts it
// is generated from and fails when the committed file differs: a change to
// the generator, the exclusion rule or the facts must come with
// `go generate ./pkg/catalog`.
func TestEmbeddedCatalogIsFresh(t *testing.T) {
	src, err := datagen.DefaultSource()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("cannot check that data/catalog.json.gz is up to date: its sources are not at %s (on the CI machine they are at ../shared/data/azure-catalog relative to the repo root)", src)
	} else if err != nil {
		t.Fatal(err)
	}
	built, _, err := datagen.Build(src)
	if err != nil {
		t.Fatalf("building the catalog from %s: %v", src, err)
	}
	if why := staleness(built, embedded); why != "" {
		t.Errorf("data/catalog.json.gz is stale: %s; run go generate ./pkg/catalog and commit the file", why)
	}
}

// staleness says how a freshly built catalog differs from the committed one;
// "" when they are the same bytes. It tells content from compression apart,
// because a new Go release may compress the same JSON differently.
func staleness(built, committed []byte) string {
	if bytes.Equal(built, committed) {
		return ""
	}
	a, errA := gunzip(built)
	b, errB := gunzip(committed)
	switch {
	case errA != nil:
		return "the generator's output does not decompress: " + errA.Error()
	case errB != nil:
		return "the committed file does not decompress: " + errB.Error()
	case bytes.Equal(a, b):
		return "the catalog is the same but compresses to other bytes (a different Go release?)"
	}
	return "the generator now writes a different catalog"
}

func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func TestStaleness(t *testing.T) {
	gz := func(s string, level int) []byte {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, level)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := zw.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	catalogJSON := `{"skus":[{"n":"Standard_D4s_v5"}],"regions":{}}` + string(bytes.Repeat([]byte(" "), 200))
	for _, tc := range []struct {
		name             string
		built, committed []byte
		want             string
	}{
		{"same bytes", gz(catalogJSON, gzip.BestCompression), gz(catalogJSON, gzip.BestCompression), ""},
		{"other content", gz(catalogJSON, gzip.BestCompression), gz(`{"skus":[]}`, gzip.BestCompression), "the generator now writes a different catalog"},
		{"same content, other compression", gz(catalogJSON, gzip.BestCompression), gz(catalogJSON, gzip.NoCompression),
			"the catalog is the same but compresses to other bytes (a different Go release?)"},
		{"committed file is not gzip", gz(catalogJSON, gzip.BestCompression), []byte(`{"region":"eastus","instanceTypes":[]}`), "the committed file does not decompress: gzip: invalid header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := staleness(tc.built, tc.committed); got != tc.want {
				t.Errorf("staleness = %q, want %q", got, tc.want)
			}
		})
	}
}
