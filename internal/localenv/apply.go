package localenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyFile creates every object in a multi-document YAML file, or updates it
// when it exists (server-side apply, field manager "karpfunc-local").
func (e *Env) ApplyFile(ctx context.Context, path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return e.Apply(ctx, data, path)
}

// Apply applies the objects in data; source names it in errors.
func (e *Env) Apply(ctx context.Context, data []byte, source string) ([]*unstructured.Unstructured, error) {
	objs, err := DecodeObjects(data, source)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if err := e.Kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("karpfunc-local"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("%s: applying %s %s: %w", source, obj.GetKind(), obj.GetName(), err)
		}
	}
	return objs, nil
}

// DecodeObjects splits multi-document YAML (or JSON) into objects.
func DecodeObjects(data []byte, source string) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: document %d has no apiVersion/kind", source, i)
		}
		out = append(out, obj)
	}
}
