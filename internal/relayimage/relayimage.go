// Package relayimage builds the relay's container image without a container
// engine and pushes it to a registry: the relay cross-compiled (static, CGO
// off) for linux/amd64 and linux/arm64, each on an empty base (the binary
// carries its own CA roots), as one multi-platform OCI image index.
//
// Invariants: the build is reproducible (same binaries, same digests: no
// timestamps), and every image runs /relay as the non-root user NonRoot.
// Both `make image` (hack/image) and the azd postdeploy hook build with it.
package relayimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platforms the image is built for: AKS node pools are amd64 or arm64.
var Platforms = []string{"amd64", "arm64"}

// NonRoot is the relay's user and group (the chart runs it as 65532 too).
const NonRoot = "65532:65532"

// Build cross-compiles pkg (a Go package path, e.g. ./relay) for every
// platform and assembles the image index.
func Build(pkg string) (v1.ImageIndex, error) {
	bins := map[string][]byte{}
	for _, arch := range Platforms {
		exe, err := compile(pkg, arch)
		if err != nil {
			return nil, err
		}
		bins[arch] = exe
	}
	return Index(bins)
}

// compile cross-compiles pkg for linux/arch and returns the binary.
func compile(pkg, arch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "karpfunc-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "relay")
	cmd := exec.Command(goTool(), "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s for linux/%s: %w", pkg, arch, err)
	}
	return os.ReadFile(bin)
}

func goTool() string {
	if path := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(path) {
		return path
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Index assembles one image per platform (binaries by GOARCH) into an OCI
// image index; a platform without a binary is an error.
func Index(bins map[string][]byte) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range Platforms {
		bin, ok := bins[arch]
		if !ok {
			return nil, fmt.Errorf("no binary for linux/%s", arch)
		}
		img, err := image(bin, arch)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, nil
}

// image is an empty base plus one layer holding /relay (mode 0755).
func image(bin []byte, arch string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "relay", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = arch
	cfg.Config.Entrypoint = []string{"/relay"}
	cfg.Config.User = NonRoot
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/karpfunc/karpfunc",
		"org.opencontainers.image.title": "karpfunc-relay"}
	return mutate.ConfigFile(img, cfg)
}
