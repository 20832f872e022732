package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL, through pgx: the pool and a transaction share these.

type pgQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func pgExec(ctx context.Context, q pgQuerier, query string, args []any) (int64, error) {
	tag, err := q.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func pgQuery(ctx context.Context, q pgQuerier, query string, args []any) (Rows, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

type pgRow struct{ pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNoRows
	}
	inUTC(dest)
	return err
}

type pgRows struct{ pgx.Rows }

func (r pgRows) Scan(dest ...any) error {
	err := r.Rows.Scan(dest...)
	inUTC(dest)
	return err
}

// inUTC puts scanned times in UTC, as the embedded engine reads them (pgx
// reads timestamptz in the local zone).
func inUTC(dest []any) {
	for _, d := range dest {
		switch p := d.(type) {
		case *time.Time:
			*p = p.UTC()
		case **time.Time:
			if *p != nil {
				t := (*p).UTC()
				*p = &t
			}
		}
	}
}

type pgTx struct{ tx pgx.Tx }

func (t pgTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return pgExec(ctx, t.tx, query, args)
}

func (t pgTx) QueryRow(ctx context.Context, query string, args ...any) Row {
	return pgRow{t.tx.QueryRow(ctx, query, args...)}
}

func (t pgTx) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return pgQuery(ctx, t.tx, query, args)
}

// SQLite, through database/sql and modernc.org/sqlite (pure Go). Times
// travel as fixed-width UTC text, so they compare in SQL as they do in Go
// and read back exactly (to the microsecond, as PostgreSQL keeps them).

const sqliteTime = "2006-01-02T15:04:05.000000Z"

type sqlQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func sqliteArgs(args []any) []any {
	var out []any
	for i, a := range args {
		var text any
		switch t := a.(type) {
		case time.Time:
			text = t.UTC().Format(sqliteTime)
		case *time.Time:
			if t != nil {
				text = t.UTC().Format(sqliteTime)
			}
		default:
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = text
	}
	if out == nil {
		return args
	}
	return out
}

func sqliteExec(ctx context.Context, q sqlQuerier, query string, args []any) (int64, error) {
	res, err := q.ExecContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func sqliteQuery(ctx context.Context, q sqlQuerier, query string, args []any) (Rows, error) {
	rows, err := q.QueryContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return nil, err
	}
	return &sqliteRows{rows: rows}, nil
}

// scanTimes scans through sc, reading *time.Time and **time.Time
// destinations from their text form.
func scanTimes(sc func(...any) error, dest []any) error {
	var texts []*sql.NullString
	var targets []any
	d := dest
	for i, x := range dest {
		switch x.(type) {
		case *time.Time, **time.Time:
			if texts == nil {
				d = append([]any(nil), dest...)
			}
			s := new(sql.NullString)
			texts, targets = append(texts, s), append(targets, x)
			d[i] = s
		}
	}
	if err := sc(d...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNoRows
		}
		return err
	}
	for i, s := range texts {
		var t time.Time
		if s.Valid {
			var err error
			if t, err = time.Parse(sqliteTime, s.String); err != nil {
				return fmt.Errorf("database: time %q: %w", s.String, err)
			}
		}
		switch p := targets[i].(type) {
		case *time.Time:
			*p = t
		case **time.Time:
			if s.Valid {
				*p = &t
			} else {
				*p = nil
			}
		}
	}
	return nil
}

type sqliteRow struct{ row *sql.Row }

func (r sqliteRow) Scan(dest ...any) error { return scanTimes(r.row.Scan, dest) }

type sqliteRows struct{ rows *sql.Rows }

func (r *sqliteRows) Next() bool             { return r.rows.Next() }
func (r *sqliteRows) Scan(dest ...any) error { return scanTimes(r.rows.Scan, dest) }
func (r *sqliteRows) Err() error             { return r.rows.Err() }
func (r *sqliteRows) Close()                 { _ = r.rows.Close() }

type sqliteTx struct{ tx *sql.Tx }

func (t sqliteTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return sqliteExec(ctx, t.tx, query, args)
}

func (t sqliteTx) QueryRow(ctx context.Context, query string, args ...any) Row {
	return sqliteRow{t.tx.QueryRowContext(ctx, query, sqliteArgs(args)...)}
}

func (t sqliteTx) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return sqliteQuery(ctx, t.tx, query, args)
}
