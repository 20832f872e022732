// Command gen writes openapi.json and docs.html, the forms of openapi.yaml
// the gateway embeds. Run it with make generate (go generate in apidocs).
package main

import (
	"log"
	"os"

	"github.com/partnerpay/api/services/gateway/internal/apidocs/render"
)

func main() {
	source, err := os.ReadFile("openapi.yaml")
	if err != nil {
		log.Fatal(err)
	}
	doc, err := render.JSON(source)
	if err != nil {
		log.Fatalf("openapi.yaml: %v", err)
	}
	page, err := render.Page(doc)
	if err != nil {
		log.Fatalf("docs page: %v", err)
	}
	for name, b := range map[string][]byte{"openapi.json": doc, "docs.html": page} {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
