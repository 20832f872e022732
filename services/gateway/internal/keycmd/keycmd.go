// Package keycmd is the operator's key tool, run as `gateway keys …`. Each
// command that makes a key prints it alone on one line of stdout, once: only
// its fingerprint is written to the keys file.
package keycmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

const usage = `usage:
  gateway keys issue  --file F --id ID --products bank,fiat --source-chains 84532
                      [--destination-chains 84532] [--tokens 84532:0xabc,…]
                      [--rate 10] [--max-execution-usd 25000]
                      [--scope read|write] [--allowed-ips CIDR,…] [--expires-at RFC3339]
      --destination-chains defaults to the source chains; --tokens to every
      catalogue token on the key's chains (the catalogue of the environment
      the gateway derives from BANK_PROVIDER_URL).
  gateway keys narrow --file F --id ID [--scope read|write]
                      [--allowed-ips CIDR,…|any] [--expires-at RFC3339|never]
      changes a key in place; the key itself stays the same.
      --scope read: the key reads (GETs, status and validate) and creates
      or moves nothing. --allowed-ips: the addresses (IPv4 or IPv6 ranges,
      or single addresses) it may call from. --expires-at: after it the key
      is refused like an unknown one.
  gateway keys rotate --file F --id ID
  gateway keys revoke --file F --id ID
  gateway keys list   --file F
      keys expiring within 14 days are marked.
`

// Config is what the key tool reads from the environment (config.Load):
// the default --file, and the upstreams the gateway derives its
// environment from, so a key's default tokens are its deployment's.
type Config struct {
	KeysFile  string `env:"GATEWAY_KEYS_FILE"`
	Upstreams environment.Config
}

// Run executes `keys <args>`.
func Run(args []string, cfg Config, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("keys: a command is required")
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet("keys "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	file := fs.String("file", cfg.KeysFile, "keys file (default $GATEWAY_KEYS_FILE)")
	id := fs.String("id", "", "key id")
	o := issueOpts{upstreams: cfg.Upstreams}
	if cmd == "issue" {
		fs.StringVar(&o.products, "products", "", "comma-separated products: "+strings.Join(partner.Products, ","))
		fs.StringVar(&o.source, "source-chains", "", "comma-separated chain ids the key may send from")
		fs.Func("destination-chains", "comma-separated chain ids the key may deliver to (default: the source chains)", func(v string) error {
			o.destination, o.destinationSet = v, true
			return nil
		})
		fs.Func("tokens", "comma-separated chain:address pairs the key may name (default: every catalogue token on its chains)", func(v string) error {
			o.tokens, o.tokensSet = v, true
			return nil
		})
		fs.IntVar(&o.rate, "rate", 10, "requests per second")
		fs.StringVar(&o.maxUSD, "max-execution-usd", "25000", "execution ceiling in USD")
	}
	var n narrowing
	if cmd == "issue" || cmd == "narrow" {
		fs.Func("scope", "read or write (default write)", func(v string) error { n.scope = &v; return nil })
		fs.Func("allowed-ips", "comma-separated CIDR ranges or addresses the key may call from (any: every address)", func(v string) error { n.ips = &v; return nil })
		fs.Func("expires-at", "RFC 3339 time after which the key is refused (never: no end)", func(v string) error { n.expires = &v; return nil })
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("keys %s: unexpected argument %q", cmd, fs.Arg(0))
	}
	if *file == "" {
		return fmt.Errorf("keys %s: --file is required (or set GATEWAY_KEYS_FILE)", cmd)
	}
	needID := cmd == "issue" || cmd == "rotate" || cmd == "revoke" || cmd == "narrow"
	if needID && *id == "" {
		return fmt.Errorf("keys %s: --id is required", cmd)
	}
	switch cmd {
	case "issue":
		return withFile(*file, func(f *apikey.File) (string, error) {
			key, err := issue(f, *id, o)
			if err != nil {
				return "", err
			}
			k, _ := f.Find(*id)
			return key, n.apply(k, now(), "issue")
		}, stdout)
	case "narrow":
		if n.scope == nil && n.ips == nil && n.expires == nil {
			return errors.New("keys narrow: give at least one of --scope, --allowed-ips, --expires-at")
		}
		return withFile(*file, func(f *apikey.File) (string, error) {
			k, ok := f.Find(*id)
			if !ok {
				return "", fmt.Errorf("keys narrow: no key with id %q", *id)
			}
			return "", n.apply(k, now(), "narrow")
		}, stdout)
	case "rotate":
		return withFile(*file, func(f *apikey.File) (string, error) { return rotate(f, *id) }, stdout)
	case "revoke":
		return withFile(*file, func(f *apikey.File) (string, error) { return "", revoke(f, *id) }, stdout)
	case "list":
		return list(*file, stdout)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("keys: unknown command %q", cmd)
}

type issueOpts struct {
	products, source, destination, tokens string
	destinationSet, tokensSet             bool
	rate                                  int
	maxUSD                                string
	upstreams                             environment.Config
}

func issue(f *apikey.File, id string, o issueOpts) (string, error) {
	if _, exists := f.Find(id); exists {
		return "", fmt.Errorf("keys issue: id %q exists; use rotate for a new key with the same grants", id)
	}
	products := splitList(o.products)
	if len(products) == 0 {
		return "", errors.New("keys issue: --products is required: a key without products can do nothing")
	}
	src, err := chains(o.source, "--source-chains")
	if err != nil {
		return "", err
	}
	dst := src
	if o.destinationSet {
		if dst, err = chains(o.destination, "--destination-chains"); err != nil {
			return "", err
		}
	}
	var tokens map[string][]string
	if o.tokensSet {
		if tokens, err = tokenGrants(o.tokens); err != nil {
			return "", err
		}
	} else {
		// The same derivation as the gateway's, so the default lists the
		// tokens of the deployment the key is for.
		env, err := o.upstreams.Derive()
		if err != nil {
			return "", err
		}
		tokens = catalog.ChainsFor(env).TokenAddresses(slices.Concat(src, dst)...)
	}
	key, err := apikey.Generate()
	if err != nil {
		return "", err
	}
	f.Keys = append(f.Keys, apikey.Key{
		ID:          id,
		Fingerprint: apikey.Fingerprint(key),
		Grants: partner.Grants{
			Products:        products,
			Chains:          partner.Chains{Source: src, Destination: dst},
			Tokens:          tokens,
			MaxExecutionUSD: o.maxUSD,
		},
		RatePerSecond: o.rate,
	})
	return key, nil
}

func rotate(f *apikey.File, id string) (string, error) {
	k, ok := f.Find(id)
	if !ok {
		return "", fmt.Errorf("keys rotate: no key with id %q", id)
	}
	key, err := apikey.Generate()
	if err != nil {
		return "", err
	}
	k.Fingerprint = apikey.Fingerprint(key)
	return key, nil
}

func revoke(f *apikey.File, id string) error {
	i := slices.IndexFunc(f.Keys, func(k apikey.Key) bool { return k.ID == id })
	if i < 0 {
		return fmt.Errorf("keys revoke: no key with id %q", id)
	}
	f.Keys = slices.Delete(f.Keys, i, i+1)
	return nil
}

func list(path string, stdout io.Writer) error {
	f, err := apikey.Load(path)
	if apikey.IsNotExist(err) {
		f, err = &apikey.File{}, nil
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPRODUCTS\tSOURCE CHAINS\tDESTINATION CHAINS\tRATE/S\tMAX EXECUTION USD\tSCOPE\tALLOWED IPS\tEXPIRES\tFINGERPRINT")
	at := now()
	for _, k := range f.Keys {
		ips := "any"
		if len(k.AllowedIPs) > 0 {
			ips = strings.Join(k.AllowedIPs, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s…\n", k.ID, strings.Join(k.Products, ","),
			joinInts(k.Chains.Source), joinInts(k.Chains.Destination), k.RatePerSecond, k.MaxExecutionUSD,
			k.EffectiveScope(), ips, expiry(k.ExpiresAt, at), k.Fingerprint[:len("sha256:")+12])
	}
	return tw.Flush()
}

// withFile applies change to the keys file under an exclusive lock, so two
// operators cannot lose each other's change, saves it atomically, and prints
// the new key (if any) only once the file is safely written.
func withFile(path string, change func(*apikey.File) (string, error), stdout io.Writer) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	f, err := apikey.Load(path)
	if apikey.IsNotExist(err) {
		f, err = &apikey.File{}, nil
	}
	if err != nil {
		return err
	}
	key, err := change(f)
	if err != nil {
		return err
	}
	if err := f.Save(path); err != nil {
		return err
	}
	if key != "" {
		_, err = fmt.Fprintln(stdout, key)
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func chains(s, flagName string) ([]int64, error) {
	out := []int64{}
	for _, p := range splitList(s) {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("keys issue: %s: %q is not a chain id", flagName, p)
		}
		out = append(out, n)
	}
	return out, nil
}

func tokenGrants(s string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, p := range splitList(s) {
		chain, addr, ok := strings.Cut(p, ":")
		n, err := strconv.ParseInt(chain, 10, 64)
		if !ok || err != nil || n <= 0 || !isAddress(addr) {
			return nil, fmt.Errorf("keys issue: --tokens: %q is not chain:0x<40 hex>", p)
		}
		out[chain] = append(out[chain], addr)
	}
	return out, nil
}

func isAddress(s string) bool {
	if len(s) != 42 || !strings.HasPrefix(s, "0x") {
		return false
	}
	for _, c := range s[2:] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

func joinInts(xs []int64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

// now is the key tool's clock.
var now = time.Now

// narrowing is what issue and narrow were asked to set; nil: unchanged.
type narrowing struct {
	scope, ips, expires *string
}

// apply sets the asked narrowing on k, as of at.
func (n narrowing) apply(k *apikey.Key, at time.Time, cmd string) error {
	if n.scope != nil {
		switch *n.scope {
		case apikey.ScopeRead, apikey.ScopeWrite:
			k.Scope = *n.scope
		default:
			return fmt.Errorf("keys %s: --scope: %q is not read or write", cmd, *n.scope)
		}
	}
	if n.ips != nil {
		k.AllowedIPs = nil
		if v := strings.TrimSpace(*n.ips); v != "any" && v != "" {
			for _, s := range splitList(v) {
				p, err := apikey.ParseRange(s)
				if err != nil {
					return fmt.Errorf("keys %s: --allowed-ips: %w", cmd, err)
				}
				if r := p.String(); !slices.Contains(k.AllowedIPs, r) {
					k.AllowedIPs = append(k.AllowedIPs, r)
				}
			}
		}
	}
	if n.expires != nil {
		k.ExpiresAt = nil
		if v := strings.TrimSpace(*n.expires); v != "never" && v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return fmt.Errorf("keys %s: --expires-at: %q is not an RFC 3339 time such as 2027-01-31T00:00:00Z", cmd, v)
			}
			if !t.After(at) {
				return fmt.Errorf("keys %s: --expires-at: %s has passed; to end a key now, revoke it", cmd, v)
			}
			t = t.UTC()
			k.ExpiresAt = &t
		}
	}
	return nil
}

// expiry is a key's EXPIRES column: never, the time, and a mark when it
// ends within apikey.ExpiringWithin or has ended.
func expiry(t *time.Time, at time.Time) string {
	switch {
	case t == nil:
		return "never"
	case !at.Before(*t):
		return t.UTC().Format(time.RFC3339) + " (EXPIRED: refused)"
	case t.Sub(at) <= apikey.ExpiringWithin:
		return fmt.Sprintf("%s (expires in %s)", t.UTC().Format(time.RFC3339), left(t.Sub(at)))
	}
	return t.UTC().Format(time.RFC3339)
}

// left is a short wait for people: days, or hours under two days.
func left(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	case d >= time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h"
	}
	return "under an hour"
}
