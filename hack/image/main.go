// Command image builds the relay's container image without a container
// engine (internal/relayimage: the relay for linux/amd64 and linux/arm64 on
// an empty base, one multi-platform OCI image index). It writes the index as
// an OCI image layout tarball (oci-archive) and, with -push, also pushes it to a registry
// with the credentials of ~/.docker/config.json (e.g. after az acr login).
//
//	go run ./hack/image -out dist/relay-image.tar [-push myreg.azurecr.io/karpfunc/relay:0.1.0]
//
// The build is reproducible: same sources, same digests (no timestamps).
package main

import (
	"archive/tar"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/karpfunc/karpfunc/internal/relayimage"
)

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
	idx, err := relayimage.Build(pkg)
	if err != nil {
		return err
	}
	if err := writeOCIArchive(idx, tag, out); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: relay image index %s (%s)\n", out, digest, strings.Join(relayimage.Platforms, ", "))
	if push != "" {
		ref, err := name.ParseReference(push)
		if err != nil {
			return fmt.Errorf("-push %q: %w", push, err)
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		fmt.Printf("pushed %s@%s\n", ref, digest)
	}
	return nil
}

// writeOCIArchive writes idx as an OCI image layout and tars the layout
// (oci-archive: skopeo, crane, oras and containerd import it).
func writeOCIArchive(idx v1.ImageIndex, tag, out string) error {
	dir, err := os.MkdirTemp("", "karpfunc-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	layoutPath, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := layoutPath.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	file, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(file)
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
	return errors.Join(err, tw.Close(), file.Close())
}
