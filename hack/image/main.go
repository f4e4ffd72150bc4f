// Command image builds the relay's container image without a container
// engine: the relay cross-compiled (static, CGO off) for linux/amd64 and
// linux/arm64, each on an empty base (the binary carries its own CA roots),
// as one multi-platform OCI image index. It writes the index as an OCI image
// layout tarball (oci-archive) and, with -push, also pushes it to a registry
// with the credentials of ~/.docker/config.json (e.g. after az acr login).
//
//	go run ./hack/image -out dist/relay-image.tar [-push myreg.azurecr.io/karpfunc/relay:0.1.0]
//
// The build is reproducible: same sources, same digests (no timestamps).
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platforms the image is built for: AKS node pools are amd64 or arm64.
var platforms = []string{"amd64", "arm64"}

// nonRoot is the relay's user and group (the chart runs it as 65532 too).
const nonRoot = "65532:65532"

func main() {
	out := flag.String("out", "dist/relay-image.tar", "OCI image layout tarball to write")
	tag := flag.String("tag", "0.1.0", "tag recorded in the layout (org.opencontainers.image.ref.name)")
	push := flag.String("push", "", "also push the image index to this reference (registry/repository:tag)")
	pkg := flag.String("pkg", "./relay", "Go package of the binary")
	flag.Parse()
	if err := run(*pkg, *out, *tag, *push); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(pkg, out, tag, push string) error {
	bins := map[string][]byte{}
	for _, arch := range platforms {
		b, err := build(pkg, arch)
		if err != nil {
			return err
		}
		bins[arch] = b
	}
	idx, err := imageIndex(bins)
	if err != nil {
		return err
	}
	if err := writeOCIArchive(idx, tag, out); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: relay image index %s (%s)\n", out, d, strings.Join(platforms, ", "))
	if push != "" {
		ref, err := name.ParseReference(push)
		if err != nil {
			return fmt.Errorf("-push %q: %w", push, err)
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		fmt.Printf("pushed %s@%s\n", ref, d)
	}
	return nil
}

// build cross-compiles pkg for linux/arch and returns the binary.
func build(pkg, arch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "karpfunc-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "relay")
	cmd := exec.Command(goTool(), "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s for linux/%s: %w", pkg, arch, err)
	}
	return os.ReadFile(bin)
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// imageIndex assembles one image per architecture (binaries by GOARCH) into
// an OCI image index.
func imageIndex(bins map[string][]byte) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range platforms {
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
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Entrypoint = []string{"/relay"}
	cfg.Config.User = nonRoot
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/karpfunc/karpfunc",
		"org.opencontainers.image.title": "karpfunc-relay"}
	return mutate.ConfigFile(img, cfg)
}

// writeOCIArchive writes idx as an OCI image layout and tars the layout
// (oci-archive: skopeo, crane, oras and containerd import it).
func writeOCIArchive(idx v1.ImageIndex, tag, out string) error {
	dir, err := os.MkdirTemp("", "karpfunc-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel) + "/", Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX})
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	return errors.Join(err, tw.Close(), f.Close())
}
