package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/karpfunc/karpfunc/internal/relayimage"
)

func TestImageIndexFromBinaries(t *testing.T) {
	bins := map[string][]byte{"amd64": []byte("amd64 relay"), "arm64": []byte("arm64 relay")}
	idx, err := relayimage.Index(bins)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "relay.tar")
	if err := writeOCIArchive(idx, "0.1.0", out); err != nil {
		t.Fatal(err)
	}
	// Unpack the archive and read it back as an OCI layout.
	dir := t.TempDir()
	untar(t, out, dir)
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil || len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "0.1.0" {
		t.Fatalf("layout index = %+v, %v; want one tagged 0.1.0 entry", topManifest, err)
	}
	relay, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := relay.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 {
		t.Fatalf("%d platform manifests, want 2", len(m.Manifests))
	}
	for _, d := range m.Manifests {
		arch := d.Platform.Architecture
		img, err := relay.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != "linux" || cfg.Architecture != arch || cfg.Config.User != relayimage.NonRoot || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/relay" {
			t.Errorf("%s config: os %s arch %s user %q entrypoint %v", arch, cfg.OS, cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, %v; want 1", arch, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		rc.Close()
		if h.Name != "relay" || h.Mode != 0o755 || !bytes.Equal(body, bins[arch]) {
			t.Errorf("%s layer: %s mode %o body %q", arch, h.Name, h.Mode, body)
		}
	}
	// Reproducible: the same binaries give the same digest.
	again, err := relayimage.Index(bins)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("digests differ between identical builds: %s, %s", d1, d2)
	}
	if _, err := relayimage.Index(map[string][]byte{"amd64": nil}); err == nil {
		t.Error("no error for a missing arm64 binary")
	}
}

func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
