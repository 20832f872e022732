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

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/testkit/chaintest"
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
		_, err := s.startDatabase(context.Background(), false)
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
// happened on them (DESIGN §10): a second run finds the same records and
// the same chains. One kept without the other starts new with it, and
// make run says so: a database kept across chains started from their
// genesis held a place, nonces and deposits of blocks they lack (the
// watcher failed every round: "chain 84532: not found"); chains kept
// across a new database held transfers to the addresses it hands out
// again.
func TestMakeRunKeepsTheChainsWithTheirDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	marker := common.HexToAddress("0x00000000000000000000000000000000000000c3")
	// run starts the database and the chains as Start does, and answers
	// whether the mark the run before left is in the database and on the
	// chain, and what it said; then it leaves its own.
	run := func() (inDatabase, onChain bool, said string) {
		t.Helper()
		var out strings.Builder
		s := &Stack{opts: Options{StateDir: dir, Out: &out, Logs: io.Discard,
			Ports: map[string]string{"chain_84532": "127.0.0.1:0", "chain_11155111": "127.0.0.1:0"}}}
		defer s.Stop()
		if _, err := s.startRecords(ctx); err != nil {
			t.Fatal(err)
		}
		db, err := pgx.Connect(ctx, s.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close(ctx)
		if err := db.QueryRow(ctx, "SELECT to_regclass('earlier_run') IS NOT NULL").Scan(&inDatabase); err != nil {
			t.Fatal(err)
		}
		c := s.chains[0]
		usdc := c.Tokens["USDC"]
		data := append(crypto.Keccak256([]byte("balanceOf(address)"))[:4], common.LeftPadBytes(marker.Bytes(), 32)...)
		held, err := c.Client().CallContract(ctx, ethereum.CallMsg{To: &usdc, Data: data}, nil)
		if err != nil {
			t.Fatal(err)
		}
		onChain = new(big.Int).SetBytes(held).Sign() > 0
		if _, err := db.Exec(ctx, "CREATE TABLE IF NOT EXISTS earlier_run ()"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Transfer(ctx, chaintest.Partner, usdc, marker, big.NewInt(1)); err != nil {
			t.Fatal(err)
		}
		c.Commit()
		return inDatabase, onChain, out.String()
	}
	const (
		databaseAfresh = "the database held an earlier chain's deposits, refunds and nonces: it starts afresh too"
		chainsAfresh   = "the database is new, so the local chains start from their genesis with it"
	)

	if db, chain, said := run(); db || chain || strings.Contains(said, databaseAfresh) || strings.Contains(said, chainsAfresh) {
		t.Fatalf("the first run: found a mark in the database %v, on the chain %v; said %q", db, chain, said)
	}
	if db, chain, said := run(); !db || !chain || strings.Contains(said, databaseAfresh) || strings.Contains(said, chainsAfresh) {
		t.Fatalf("the second run: found the first's mark in the database %v, on the chain %v; said %q", db, chain, said)
	}
	if err := os.RemoveAll(filepath.Join(dir, "chain", "84532")); err != nil {
		t.Fatal(err)
	}
	if db, chain, said := run(); db || chain || !strings.Contains(said, databaseAfresh) {
		t.Fatalf("a run with a chain's data gone: found the earlier mark in the database %v, on the chain %v; said %q", db, chain, said)
	}
	if err := os.RemoveAll(filepath.Join(dir, "pg")); err != nil {
		t.Fatal(err)
	}
	if db, chain, said := run(); db || chain || !strings.Contains(said, chainsAfresh) {
		t.Fatalf("a run with the database gone: found the earlier mark in the database %v, on the chain %v; said %q", db, chain, said)
	}
}
