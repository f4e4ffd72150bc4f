package apis

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/internal/crdfields"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// providerFields is the Azure provider's AKSNodeClass spec schema; its
// header names the commit and hack/crdfields' package comment the command
// that regenerates it.
const providerFields = "testdata/provider-aksnodeclass-v1beta1-fields.txt"

// TestAKSNodeClassCoversProviderSchema fails on any field of the provider's
// AKSNodeClass that karpfunc's CRD lacks, types differently, or neither
// implements (v1beta1.ImplementedFields) nor refuses by name (a CEL rule
// whose message starts with the field's path or a parent's).
func TestAKSNodeClassCoversProviderSchema(t *testing.T) {
	f, err := os.Open(providerFields)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	provider, err := crdfields.Read(f)
	if err != nil {
		t.Fatalf("%s: %v", providerFields, err)
	}
	if len(provider) == 0 {
		t.Fatalf("%s lists no fields", providerFields)
	}
	ours, err := crdfields.FromCRD(aksNodeClassCRD, "v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	ourTypes := map[string]string{}
	for _, f := range ours {
		ourTypes[f.Path] = f.Type
	}
	refused := refusedPaths(t)
	parents := map[string]bool{}
	for _, f := range provider {
		if i := strings.LastIndex(f.Path, "."); i > 0 {
			parents[strings.TrimSuffix(f.Path[:i], "[]")] = true
		}
	}
	for _, f := range provider {
		got, ok := ourTypes[f.Path]
		switch {
		case !ok:
			t.Errorf("%s (%s): the provider has it, karpfunc's AKSNodeClass does not; the API server would prune it", f.Path, f.Type)
			continue
		case got != f.Type:
			t.Errorf("%s: karpfunc types it %s, the provider %s", f.Path, got, f.Type)
			continue
		}
		if parents[f.Path] {
			continue // an object with fields: its leaves are checked
		}
		if !covered(f.Path, v1beta1.ImplementedFields) && !covered(f.Path, refused) {
			t.Errorf("%s: neither implemented (v1beta1.ImplementedFields) nor refused by a CEL rule whose message starts with its path", f.Path)
		}
	}
	for _, p := range v1beta1.ImplementedFields {
		if _, ok := ourTypes[p]; !ok {
			t.Errorf("v1beta1.ImplementedFields lists %s, which karpfunc's CRD does not have", p)
		}
		if covered(p, refused) {
			t.Errorf("%s is both implemented and refused", p)
		}
	}
}

// covered says whether path is one of paths or under one of them.
func covered(path string, paths []string) bool {
	for _, p := range paths {
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[]") {
			return true
		}
	}
	return false
}

// refusedPaths are the field paths that start the messages of the CEL
// rules on the spec ("spec.fipsMode: FIPS is not supported ...").
func refusedPaths(t *testing.T) []string {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(aksNodeClassCRD, crd); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range crd.Spec.Versions {
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		for _, rule := range spec.XValidations {
			head, _, _ := strings.Cut(rule.Message, " ")
			head = strings.TrimSuffix(head, ":")
			if strings.HasPrefix(head, "spec.") {
				out = append(out, head)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the AKSNodeClass CRD has no refusal rules on spec")
	}
	return out
}
