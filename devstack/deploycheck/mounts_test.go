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
// nothing else would notice). What each file means is checked by its own
// program in make deploy-check: the collector's validate, promtool,
// amtool.
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
}
