package listing

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
)

// Read reads a page of table's rows of the key, newest first, as p says:
// Limit+1 rows at most (the extra one says there are more), each made by
// scan from columns. What it returns is confirmed on the standby
// (database.DB.Confirm), as every answer that rests on rows read back.
func Read[R any](ctx context.Context, db *database.DB, table, columns string, scan func(pgx.Row) (R, error), keyID string, p Params) ([]R, error) {
	where, args := p.Where(keyID)
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM `+table+` WHERE `+where+
		` ORDER BY created_at DESC, id DESC LIMIT `+strconv.Itoa(p.Limit+1), args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (R, error) { return scan(row) })
	if err != nil {
		return nil, err
	}
	return out, db.Confirm(ctx)
}
