package deploycheck

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestEveryFileComposeMountsParses: every YAML and JSON file that
// docker-compose.yml mounts into a container parses strictly (a file
// broken since it was last edited stops its container at start-up, where
// nothing else would notice), and the collector's pipelines name only the
// receivers, processors and exporters it defines.
func TestEveryFileComposeMountsParses(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Volumes []string `json:"volumes"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, svc := range compose.Services {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "./") {
				continue // a named volume
			}
			err := filepath.WalkDir(filepath.Join("../..", src), func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				body, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				var v any
				switch filepath.Ext(path) {
				case ".yml", ".yaml":
					err = yaml.UnmarshalStrict(body, &v)
				case ".json":
					err = json.Unmarshal(body, &v)
				default:
					return nil
				}
				checked++
				if err != nil {
					t.Errorf("%s mounts %s, which does not parse: %v", name, path, err)
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if checked < 5 {
		t.Errorf("%d mounted files checked; compose mounts more", checked)
	}

	b, err = os.ReadFile("../../deploy/otel/collector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var col struct {
		Extensions map[string]any `json:"extensions"`
		Receivers  map[string]any `json:"receivers"`
		Processors map[string]any `json:"processors"`
		Exporters  map[string]any `json:"exporters"`
		Service    struct {
			Extensions []string `json:"extensions"`
			Pipelines  map[string]struct {
				Receivers  []string `json:"receivers"`
				Processors []string `json:"processors"`
				Exporters  []string `json:"exporters"`
			} `json:"pipelines"`
		} `json:"service"`
	}
	if err := yaml.UnmarshalStrict(b, &col); err != nil {
		t.Fatalf("collector.yaml: %v", err)
	}
	defined := func(kind string, m map[string]any, names []string) {
		for _, n := range names {
			if _, ok := m[n]; !ok {
				t.Errorf("collector.yaml: the service uses %s %q, which it does not define", kind, n)
			}
		}
	}
	defined("extension", col.Extensions, col.Service.Extensions)
	traces, ok := col.Service.Pipelines["traces"]
	if !ok || len(traces.Receivers) == 0 || len(traces.Exporters) == 0 {
		t.Fatalf("collector.yaml: no traces pipeline from a receiver to an exporter: %+v", col.Service.Pipelines)
	}
	defined("receiver", col.Receivers, traces.Receivers)
	defined("processor", col.Processors, traces.Processors)
	defined("exporter", col.Exporters, traces.Exporters)
}
