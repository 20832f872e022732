package deploycheck

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"sigs.k8s.io/yaml"
)

// TestTheDatabaseClusterPassesTheOperatorsCRDSchema: the CloudNativePG
// Cluster the chart renders is validated as the API server would validate
// it, against the openAPIV3Schema of the operator's own CRD (shipped in
// its Go module, the version go.mod pins): every constraint (enums,
// minimums, patterns, required fields) holds, and no field is unknown to
// the schema (the API server would silently prune it; kubeconform -strict
// refuses it).
func TestTheDatabaseClusterPassesTheOperatorsCRDSchema(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cloudnative-pg/cloudnative-pg").Output()
	if err != nil {
		t.Fatalf("go list the CloudNativePG module: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "config/crd/bases/postgresql.cnpg.io_clusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	var schema *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" && v.Schema != nil {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	if schema == nil {
		t.Fatal("the CRD has no v1 schema")
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	validator, _, err := validation.NewSchemaValidator(&internal)
	if err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	for _, values := range []string{"values-sandbox.yaml", "values-production.yaml"} {
		clusters := 0
		for _, doc := range renderDocs(t, values) {
			if doc["apiVersion"] != "postgresql.cnpg.io/v1" || doc["kind"] != "Cluster" {
				continue
			}
			clusters++
			if res := validator.Validate(doc); !res.IsValid() {
				for _, e := range res.Errors {
					t.Errorf("%s: the Cluster breaks the CRD's schema: %v", values, e)
				}
			}
			// DESIGN §6: promote only a standby with every acknowledged
			// commit (quorum-based failover), and never acknowledge a
			// commit no standby has.
			spec, _ := doc["spec"].(map[string]any)
			pg, _ := spec["postgresql"].(map[string]any)
			sync, _ := pg["synchronous"].(map[string]any)
			if sync["failoverQuorum"] != true || sync["dataDurability"] != "required" {
				t.Errorf("%s: the Cluster's synchronous replication is %v, want failoverQuorum true and dataDurability required", values, sync)
			}
			// A read's confirmation writes nothing when the standbys are
			// caught up, which needs the owner to read flush_lsn.
			boot, _ := spec["bootstrap"].(map[string]any)
			initdb, _ := boot["initdb"].(map[string]any)
			if sql := fmt.Sprint(initdb["postInitApplicationSQL"]); !strings.Contains(sql, `GRANT pg_read_all_stats TO "`+fmt.Sprint(initdb["owner"])+`"`) {
				t.Errorf("%s: the Cluster's owner is not granted pg_read_all_stats at init (postInitApplicationSQL %s)", values, sql)
			}
			opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
			if unknown := pruning.PruneWithOptions(doc, structural, true, opts); len(unknown) > 0 {
				t.Errorf("%s: fields the CRD's schema does not know (the API server would drop them): %v", values, unknown)
			}
		}
		if clusters != 1 {
			t.Errorf("%s: %d CloudNativePG Clusters rendered, want 1", values, clusters)
		}
	}
}

// renderDocs is every object the chart renders with values, as JSON maps.
func renderDocs(t *testing.T, values string) []map[string]any {
	t.Helper()
	var set []string
	if values == "values-production.yaml" {
		set = pager
	}
	out, err := helmTemplate(t, values, set...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var docs []map[string]any
	for _, doc := range strings.Split(string(out), "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m)
	}
	return docs
}
