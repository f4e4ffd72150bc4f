// Package chart embeds karpfunc's cluster chart (the relay and the RBAC of
// both the relay and the Functions) and renders it with the Helm SDK, so
// local runs and tests apply exactly the objects `helm install` would.
package chart

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

//go:embed Chart.yaml values.yaml all:templates
var files embed.FS

// Load returns the chart as Helm loads it from disk.
func Load() (*chart.Chart, error) {
	var buffered []*loader.BufferedFile
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		buffered = append(buffered, &loader.BufferedFile{Name: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart: reading embedded files: %w", err)
	}
	loaded, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("chart: loading: %w", err)
	}
	return loaded, nil
}

// Render renders the chart for a release named release in namespace with
// values (merged over values.yaml, as `helm install --set` would) and
// returns every object, sorted by kind and name. A values error is the
// chart's own fail message.
func Render(release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	loaded, err := Load()
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(loaded, values, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart: values: %w", err)
	}
	out, err := engine.Render(loaded, vals)
	if err != nil {
		return nil, fmt.Errorf("chart: rendering: %w", err)
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(out[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var object map[string]any
			if err := yaml.Unmarshal([]byte(doc), &object); err != nil {
				return nil, fmt.Errorf("chart: %s: %w", name, err)
			}
			if len(object) == 0 {
				continue
			}
			manifest := &unstructured.Unstructured{Object: object}
			if manifest.GetNamespace() == "" && namespaced(manifest.GetKind()) {
				manifest.SetNamespace(namespace)
			}
			objs = append(objs, manifest)
		}
	}
	sort.SliceStable(objs, func(i, j int) bool {
		if objs[i].GetKind() != objs[j].GetKind() {
			return objs[i].GetKind() < objs[j].GetKind()
		}
		return objs[i].GetNamespace()+"/"+objs[i].GetName() < objs[j].GetNamespace()+"/"+objs[j].GetName()
	})
	return objs, nil
}

func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "Namespace", "CustomResourceDefinition":
		return false
	}
	return true
}
