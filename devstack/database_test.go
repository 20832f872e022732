package devstack

import (
	"context"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/testkit/pglocal"
)

// fakeInstaller stands in for apt-get: Install links the machine's real
// PostgreSQL binaries into dir, where the search looks, as the package
// would put them in /usr/lib/postgresql.
type fakeInstaller struct {
	possible  bool
	dir, from string
	installed int
}

func (f *fakeInstaller) Possible() bool { return f.possible }

func (f *fakeInstaller) Install(context.Context, io.Writer) error {
	f.installed++
	if f.from == "" {
		return errors.New("apt-get install: exit status 100")
	}
	return os.Symlink(f.from, filepath.Join(f.dir, "bin"))
}

// make run on a machine without PostgreSQL (DESIGN §6): a DATABASE_URL is
// taken as it is; without one, PostgreSQL's server binaries where they are
// looked for run under the state directory; where there are none, as root
// on Debian or Ubuntu, Debian's postgresql is installed first, saying so;
// and anywhere else the stack stops at once with the one line to run.
func TestMakeRunFindsOrInstallsPostgreSQL(t *testing.T) {
	t.Parallel()
	real, err := pglocal.Bin()
	if err != nil {
		t.Fatal(err)
	}
	start := func(t *testing.T, opts Options) (*Stack, string, error) {
		t.Helper()
		var out strings.Builder
		opts.StateDir, opts.Out, opts.Logs = t.TempDir(), &out, io.Discard
		s := &Stack{opts: opts}
		err := s.startDatabase(context.Background(), false)
		t.Cleanup(func() {
			if s.postgres != nil {
				s.postgres.Stop()
			}
		})
		return s, out.String(), err
	}
	t.Run("a DATABASE_URL", func(t *testing.T) {
		t.Parallel()
		s, out, err := start(t, Options{DatabaseURL: "postgres://u:secret@db.example:5432/p", PostgresSearch: []string{t.TempDir()}})
		if err != nil || s.DatabaseURL != "postgres://u:secret@db.example:5432/p" || strings.Contains(out, "secret") {
			t.Errorf("%v %q: said %q", err, s.DatabaseURL, out)
		}
	})
	t.Run("nothing found, nothing to install with", func(t *testing.T) {
		t.Parallel()
		inst := &fakeInstaller{possible: false}
		_, out, err := start(t, Options{PostgresSearch: []string{t.TempDir()}, Installer: inst})
		if !errors.Is(err, errNoPostgres) || !strings.Contains(err.Error(), "sudo apt-get install postgresql") || inst.installed != 0 || out != "" {
			t.Errorf("%v (installed %d times, said %q), want errNoPostgres and its one line", err, inst.installed, out)
		}
	})
	t.Run("nothing found, root on Debian", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		inst := &fakeInstaller{possible: true, dir: dir, from: real}
		s, out, err := start(t, Options{PostgresSearch: []string{filepath.Join(dir, "*")}, Installer: inst})
		if err != nil {
			t.Fatal(err)
		}
		if inst.installed != 1 || !strings.Contains(out, "installing Debian's postgresql now (apt-get install postgresql)") {
			t.Errorf("installed %d times; said %q", inst.installed, out)
		}
		c, err := pgx.Connect(context.Background(), s.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		c.Close(context.Background())
	})
	t.Run("the install fails", func(t *testing.T) {
		t.Parallel()
		inst := &fakeInstaller{possible: true}
		_, _, err := start(t, Options{PostgresSearch: []string{t.TempDir()}, Installer: inst})
		if err == nil || !strings.Contains(err.Error(), "exit status 100") || !strings.Contains(err.Error(), "sudo apt-get install postgresql") {
			t.Errorf("%v, want apt-get's failure and the one line", err)
		}
	})
}

// Root on Debian or Ubuntu, by /etc/os-release's ID or ID_LIKE.
func TestDebianLike(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		"ID=debian\n":                      true,
		"ID=ubuntu\nID_LIKE=debian\n":      true,
		"ID=linuxmint\nID_LIKE=\"ubuntu\"": true,
		"ID=fedora\nID_LIKE=\"rhel\"\n":    false,
		"":                                 false,
	} {
		path := filepath.Join(t.TempDir(), "os-release")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := debianLike(path); got != want {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
}

// make run keeps the local chains with the database that records what
// happened on them (DESIGN §10): a second run finds the same blocks and
// the same records; a run whose chains start new (their data deleted, or
// kept by no earlier version) starts the database afresh too, and says
// so, rather than leave it holding a place, nonces and deposits of blocks
// the new chains lack (the watcher failed every round: "chain 84532: not
// found").
func TestMakeRunKeepsTheChainsWithTheirDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// run starts the database and the chains as Start does, leaves a row
	// when asked, and answers what it found: whether the row of the run
	// before was there, the hash of block 1, and what it said.
	run := func(leave bool) (kept bool, block1 string, said string) {
		t.Helper()
		var out strings.Builder
		s := &Stack{opts: Options{StateDir: dir, Out: &out, Logs: io.Discard,
			Ports: map[string]string{"chain_84532": "127.0.0.1:0", "chain_11155111": "127.0.0.1:0"}}}
		defer s.Stop()
		if err := s.startDatabase(ctx, s.chainsNew()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.startChains(); err != nil {
			t.Fatal(err)
		}
		c, err := pgx.Connect(ctx, s.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, "SELECT to_regclass('earlier_run') IS NOT NULL").Scan(&kept); err != nil {
			t.Fatal(err)
		}
		if leave {
			if _, err := c.Exec(ctx, "CREATE TABLE earlier_run ()"); err != nil {
				t.Fatal(err)
			}
		}
		h, err := s.chains[0].Client().HeaderByNumber(ctx, big.NewInt(1))
		if err != nil {
			t.Fatal(err)
		}
		return kept, h.Hash().Hex(), out.String()
	}
	const reset = "the database held an earlier chain's deposits, refunds and nonces: it starts afresh too"

	kept, first, said := run(true)
	if kept || strings.Contains(said, reset) {
		t.Fatalf("the first run: found a row %v, said %q", kept, said)
	}
	kept, again, said := run(false)
	if !kept || again != first || strings.Contains(said, reset) {
		t.Fatalf("the second run: found the first's row %v, block 1 %s (was %s), said %q", kept, again, first, said)
	}
	if err := os.RemoveAll(filepath.Join(dir, "chain")); err != nil {
		t.Fatal(err)
	}
	if kept, _, said := run(false); kept || !strings.Contains(said, reset) {
		t.Fatalf("a run on new chains: found the earlier row %v, said %q", kept, said)
	}
}
