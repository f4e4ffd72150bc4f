package main

import (
	"archive/zip"
	"os"
	"path/filepath"
	"testing"
)

func TestZipDirKeepsModesAndPaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "Provision"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"handler": 0o755, "host.json": 0o644, "Provision/function.json": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "app.zip")
	if err := zipDir(dir, out); err != nil {
		t.Fatal(err)
	}
	r, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[string]os.FileMode{}
	for _, f := range r.File {
		got[f.Name] = f.Mode().Perm()
	}
	want := map[string]os.FileMode{"handler": 0o755, "host.json": 0o644, "Provision/function.json": 0o644}
	if len(got) != len(want) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
	for name, mode := range want {
		if got[name] != mode {
			t.Errorf("%s: mode %v, want %v", name, got[name], mode)
		}
	}
}
