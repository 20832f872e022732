package payout

import (
	"testing"

	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/pgtest"
)

// The committed schema (services/payout/schema.sql) is what the migrations
// make: a newcomer reads the rules there, in the form the database
// enforces them.
func TestTheSchemaFileIsWhatTheMigrationsMake(t *testing.T) {
	t.Parallel()
	pgtest.SchemaFile(t, "../../schema.sql", `-- The payout service's schema, as its migrations (internal/store/migrations, and pkg/idempotency's)
-- make it: pg_dump --schema-only of an empty database they were applied to.
-- Generated: change a migration, then run make schema. CI fails when this
-- file and the migrations differ.
`, idempotency.Migrations, store.Feed.Migrations(), store.Migrations)
}
