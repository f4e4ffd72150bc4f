// Package crdfields lists the fields of a CRD version's spec schema as
// dotted paths with a type, in a stable order, and reads and writes that
// list as text. The schema test in package apis uses it to compare
// karpfunc's AKSNodeClass with the Azure provider's field by field.
//
// Types are the OpenAPI type; arrays are "array<item>", maps (objects with
// additionalProperties) are "map<value>". An array of objects contributes
// its items' fields under "path[]".
package crdfields

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Field is one schema property.
type Field struct {
	Path string // spec.security.encryptionAtHost
	Type string // boolean, string, integer, object, array<string>, map<string>
}

// FromCRD reads a CRD YAML and returns the fields under spec of the named
// version, sorted by path.
func FromCRD(raw []byte, version string) ([]Field, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		return nil, fmt.Errorf("decoding CRD: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("CRD %s version %s has no schema", crd.Name, version)
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return nil, fmt.Errorf("CRD %s version %s has no spec property", crd.Name, version)
		}
		var out []Field
		walk("spec", spec, &out)
		sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		return out, nil
	}
	return nil, fmt.Errorf("CRD %s has no version %s", crd.Name, version)
}

func walk(path string, s apiextensionsv1.JSONSchemaProps, out *[]Field) {
	for name, child := range s.Properties {
		p := path + "." + name
		*out = append(*out, Field{Path: p, Type: typeOf(child)})
		walk(p, child, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(path+"[]", *s.Items.Schema, out)
	}
}

func typeOf(s apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "array<" + typeOf(*s.Items.Schema) + ">"
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map<" + typeOf(*s.AdditionalProperties.Schema) + ">"
	case s.Type == "" && s.XIntOrString:
		return "int-or-string"
	}
	return s.Type
}

// Write writes one "path type" line per field after the header lines, each
// prefixed with "# ".
func Write(w io.Writer, header []string, fields []Field) error {
	bw := bufio.NewWriter(w)
	for _, h := range header {
		fmt.Fprintf(bw, "# %s\n", h)
	}
	for _, f := range fields {
		fmt.Fprintf(bw, "%s %s\n", f.Path, f.Type)
	}
	return bw.Flush()
}

// Read parses what Write wrote; lines starting with # and blank lines are
// skipped.
func Read(r io.Reader) ([]Field, error) {
	var out []Field
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		path, typ, ok := strings.Cut(line, " ")
		if !ok || path == "" || typ == "" {
			return nil, fmt.Errorf("line %d: %q is not \"<path> <type>\"", n, line)
		}
		out = append(out, Field{Path: path, Type: typ})
	}
	return out, sc.Err()
}
