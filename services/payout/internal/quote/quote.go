// Package quote is the machinery the payout and deposit quotes share: quote
// ids, open offers, closing an executed one, and tombstones.
//
// A quote is a fixed offer. Every quote request opens a new one (DESIGN
// §3): two identical payouts quoted at once are two quotes, each executable
// once; a retry that must not open a second quote carries an
// Idempotency-Key and is answered the first one. No id is ever priced
// twice.
//
// Offers are short-lived and may be lost without harm: a lost offer makes
// its id unknown (quote again), never repriced. What an executed quote
// became, its payout, is the system of record's (PostgreSQL), not this
// book's.
//
// An id is <prefix>_<chain>_<32 hex>: 16 bytes of HMAC-SHA256 under the
// server secret of the key id, the canonical request and the quote's random
// nonce; its first 2 bytes are also its keys' hash tag. Nobody without the
// secret can make one, and none repeats.
//
// Storage (Redis): every key of one quote carries the same hash tag, the
// first 4 hex of its id, so each operation below is one Lua script on one
// cluster slot — atomic on a single node and on a Redis Cluster alike:
//
//	<p>:{tag}:q:<id>     the open quote: owner and the caller's record (expires with it)
//	<p>:{tag}:x:<id>     closed: a payout is executing it (expires with the quote)
//	<p>:{tag}:t:<day>    tombstones of the quotes expiring that UTC day, packed
//
// A tombstone is what lets an expired id answer 410 rather than 404 for 24
// hours without keeping the quote: 20 bytes appended to a string shared by
// the quotes of one tag and day (10 bytes of the id, 6 of the owner's
// digest, 4 of the time until which it answers). Per-id keys would cost
// about 160 bytes each in Redis; packed, a key quoting at 100 new quotes a
// second holds about 170 MB of tombstones at steady state instead of 1.4 GB.
package quote

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/format"
)

// Kind is a family of quotes: its id prefix ("bpq" for bank payouts, "dq"
// for crypto deposits).
type Kind struct{ Prefix string }

// TombstoneLife is how long an expired id still answers as expired.
const TombstoneLife = 24 * time.Hour

const (
	idBytes     = 16
	tagBytes    = 2
	tombIDBytes = 10
	ownerBytes  = 6
	tombSize    = tombIDBytes + ownerBytes + 4
)

// ID is a parsed quote id.
type ID struct {
	Kind  Kind
	Chain int64
	raw   [idBytes]byte
}

func (id ID) String() string {
	return id.Kind.Prefix + "_" + strconv.FormatInt(id.Chain, 10) + "_" + hex.EncodeToString(id.raw[:])
}

// Parse checks s against the kind's id shape, <prefix>_<chain>_<32 lower-case
// hex>, before anything looks it up; ok is false for anything else.
func (k Kind) Parse(s string) (ID, bool) {
	rest, ok := strings.CutPrefix(s, k.Prefix+"_")
	if !ok || len(rest) > 16+1+2*idBytes {
		return ID{}, false
	}
	chain, h, ok := strings.Cut(rest, "_")
	if !ok || len(h) != 2*idBytes || chain == "" || chain[0] == '0' || len(chain) > 16 || strings.Trim(chain, "0123456789") != "" {
		return ID{}, false // digits only: ParseInt would take "+1" for "1"
	}
	n, err := strconv.ParseInt(chain, 10, 64)
	if err != nil || format.ChainID("chain", n) != nil {
		return ID{}, false
	}
	id := ID{Kind: k, Chain: n}
	if _, err := hex.Decode(id.raw[:], []byte(h)); err != nil || strings.ToLower(h) != h {
		return ID{}, false
	}
	return id, true
}

// Book keeps the quotes of every kind in Redis.
type Book struct {
	rdb    redis.UniversalClient
	secret []byte
	now    func() time.Time
}

// NewBook returns a book on rdb; secret keys the ids.
func NewBook(rdb redis.UniversalClient, secret []byte, now func() time.Time) *Book {
	return &Book{rdb: rdb, secret: secret, now: now}
}

func (b *Book) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, b.secret)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// owner is the 6-byte digest of a key id stored with every record, so an
// id presented by another key reads as unknown.
func (b *Book) owner(keyID string) []byte { return b.mac("owner", keyID)[:ownerBytes] }

func keyPrefix(k Kind, raw []byte) string {
	return k.Prefix + ":{" + hex.EncodeToString(raw[:tagBytes]) + "}:"
}

// Offer is an open quote.
type Offer struct {
	ID string
	// Record is the caller's record of the quote (build's).
	Record []byte
}

// Open opens a new quote of canonical (the request, canonical form) for
// keyID, alive ttl. build makes the caller's record of it from its id and
// expiry.
func (b *Book) Open(ctx context.Context, k Kind, keyID string, chain int64, canonical string, ttl time.Duration,
	build func(id string, expiresAt time.Time) ([]byte, error)) (Offer, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return Offer{}, err
	}
	id := ID{Kind: k, Chain: chain}
	copy(id.raw[:], b.mac(k.Prefix+"/v3", keyID, canonical, string(nonce[:])))
	now := b.now()
	expires := now.UTC().Add(ttl).Truncate(time.Second)
	life := expires.Sub(now)
	if life < time.Millisecond {
		life = time.Millisecond
	}
	record, err := build(id.String(), expires)
	if err != nil {
		return Offer{}, err
	}
	owner := b.owner(keyID)
	p := keyPrefix(k, id.raw[:])
	tomb := make([]byte, 0, tombSize)
	tomb = append(tomb, id.raw[tagBytes:tagBytes+tombIDBytes]...)
	tomb = append(tomb, owner...)
	tomb = binary.BigEndian.AppendUint32(tomb, uint32(expires.Add(TombstoneLife).Unix()))
	day := expires.Unix() / 86400
	if err := openScript.Run(ctx, b.rdb, []string{p + "q:" + id.String(), p + "t:" + strconv.FormatInt(day, 10)},
		string(owner)+string(record), life.Milliseconds(), string(tomb), (day+2)*86400).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return Offer{}, fmt.Errorf("open quote: %w", err)
	}
	return Offer{ID: id.String(), Record: record}, nil
}

// openScript stores a new quote and appends its tombstone. KEYS: the
// quote, its tombstone bucket. ARGV: owner+record, life (ms), tombstone,
// bucket expiry (unix s).
var openScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('APPEND', KEYS[2], ARGV[3])
redis.call('EXPIREAT', KEYS[2], ARGV[4])
return 1
`)

// State is what a quote id is now, for the key that asks.
type State int

// The states of an id.
const (
	Unknown State = iota // never issued, another key's, or its offer was lost
	Open                 // issued and not expired (closed or not)
	Expired              // expired within the last 24 hours
)

// Found is what Find knows of an id.
type Found struct {
	State State
	// Record is the caller's record of an open quote.
	Record []byte
	// Closing is what FindClosing did to an open quote's offer.
	Closing Closing
	// Made is a ClosedForBy whose mark this call set: the offer was not
	// closed before (Reopen takes back only such a closing).
	Made bool
}

// Closing is what FindClosing did to an open offer.
type Closing int

// What FindClosing did.
const (
	NotTried       Closing = iota // the quote is not of the guess's rail and country (or there was no guess)
	ClosedForBy                   // closed for the guess's beneficiary, as Close(id, by) would have
	ClosedForOther                // closed before for another beneficiary: nothing changed
)

// Guess is what an execution expects of its quote before it reads it: its
// rail and country, and the beneficiary's digest as checked against them
// (By), guessed from what the caller read before; a wrong guess costs only
// the round trip it meant to save.
type Guess struct {
	Rail, Country, By string
}

// FindClosing is Find, and, in the same round trip, Close(id, g.By) of an
// open offer of keyID's whose record names g's rail and country: the
// closing an execution makes once it has read the quote and checked its
// beneficiary against them, made before it is read (one round trip instead
// of two). The record is the caller's JSON, with "rail" and "country"
// members. Found.Closing says what was done; NotTried leaves the offer as
// it was, for the caller to Close once it has read the quote.
func (b *Book) FindClosing(ctx context.Context, id ID, keyID string, g Guess) (Found, error) {
	if g.By == "" || g.Rail == "" || g.Country == "" {
		return b.Find(ctx, id, keyID)
	}
	keys, args, owner := b.findArgs(id, keyID)
	keys = append(keys, keyPrefix(id.Kind, id.raw[:])+"x:"+id.String())
	args = append(args, string(owner), g.Rail, g.Country, g.By)
	res, err := findClosingScript.Run(ctx, b.rdb, keys, args...).Slice()
	if err != nil {
		return Found{}, fmt.Errorf("find quote: %w", err)
	}
	return found(res, owner), nil
}

// findArgs are findScript's keys and arguments for keyID's read of id (the
// quote, today's and yesterday's tombstones; the tombstone's id and owner,
// the time, a tombstone's size), and keyID's owner tag.
func (b *Book) findArgs(id ID, keyID string) (keys []string, args []any, owner []byte) {
	p := keyPrefix(id.Kind, id.raw[:])
	now := b.now().Unix()
	day := now / 86400
	owner = b.owner(keyID)
	keys = make([]string, 3, 4)
	keys[0], keys[1], keys[2] = p+"q:"+id.String(), p+"t:"+strconv.FormatInt(day, 10), p+"t:"+strconv.FormatInt(day-1, 10)
	args = make([]any, 3, 7)
	args[0], args[1], args[2] = string(id.raw[tagBytes:tagBytes+tombIDBytes])+string(owner), now, tombSize
	return keys, args, owner
}

// found reads a find script's answer for owner.
func found(res []any, owner []byte) Found {
	switch res[0] {
	case "open":
		if v := []byte(res[1].(string)); bytes.HasPrefix(v, owner) {
			f := Found{State: Open, Record: v[ownerBytes:]}
			if len(res) > 2 {
				switch res[2] {
				case "made":
					f.Closing, f.Made = ClosedForBy, true
				case "mine":
					f.Closing = ClosedForBy
				case "other":
					f.Closing = ClosedForOther
				}
			}
			return f
		}
	case "expired":
		return Found{State: Expired}
	}
	return Found{State: Unknown}
}

// Find reads id (already parsed) as keyID sees it.
func (b *Book) Find(ctx context.Context, id ID, keyID string) (Found, error) {
	keys, args, owner := b.findArgs(id, keyID)
	res, err := findScript.Run(ctx, b.rdb, keys, args...).Slice()
	if err != nil {
		return Found{}, fmt.Errorf("find quote: %w", err)
	}
	return found(res, owner), nil
}

// findScript reads an id: the open quote, else a tombstone of the asking
// owner that still answers. KEYS: quote, today's and yesterday's buckets.
// ARGV: the tombstone's id and owner bytes, now (unix s), the tombstone
// size.
var findScript = redis.NewScript(`
local q = redis.call('GET', KEYS[1])
if q then return {'open', q} end
` + findTombstone)

// findClosingScript is findScript, and closeScript's closing of an open
// quote of the owner whose record names the guessed rail and country.
// KEYS: findScript's, then the closed mark. ARGV: findScript's, then the
// owner, the rail, the country and who it is closed for.
var findClosingScript = redis.NewScript(`
local q = redis.call('GET', KEYS[1])
if q then
  local owner = ARGV[4]
  if string.sub(q, 1, #owner) ~= owner then return {'open', q} end
  local ok, r = pcall(cjson.decode, string.sub(q, #owner + 1))
  if not ok or type(r) ~= 'table' or r['rail'] ~= ARGV[5] or r['country'] ~= ARGV[6] then return {'open', q} end
  local by = redis.call('GET', KEYS[4])
  if by and by ~= '1' and by ~= ARGV[7] then return {'open', q, 'other'} end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl <= 0 then return {'open', q} end
  redis.call('SET', KEYS[4], ARGV[7], 'PX', ttl)
  if by == ARGV[7] then return {'open', q, 'mine'} end
  return {'open', q, 'made'}
end
` + findTombstone)

// findTombstone is the find scripts' search of the tombstones, once the
// quote is not open.
const findTombstone = `local size = tonumber(ARGV[3])
local now = tonumber(ARGV[2])
for i = 2, 3 do
  local b = redis.call('GET', KEYS[i])
  if b then
    local from = 1
    while true do
      local at = string.find(b, ARGV[1], from, true)
      if not at then break end
      if (at - 1) % size == 0 and struct.unpack('>I4', b, at + #ARGV[1]) > now then
        return {'expired'}
      end
      from = at + 1
    end
  end
end
return {'unknown'}
`

// Close marks an open quote (parsed id) as being executed for by (a
// digest of the beneficiary), before its payout commits. The mark lives
// as long as the offer and binds
// the quote to its beneficiary: closing it for anyone else answers false,
// even when the payout of the first did not survive a database failover
// (its commit was never acknowledged), so the quote is never paid to
// another. Closing a quote whose offer is gone does nothing.
func (b *Book) Close(ctx context.Context, id ID, by string) (bool, error) {
	p := keyPrefix(id.Kind, id.raw[:])
	n, err := closeScript.Run(ctx, b.rdb, []string{p + "q:" + id.String(), p + "x:" + id.String()}, by).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("close quote: %w", err)
	}
	return n == 1, nil
}

// Closed reports whether an execution has closed the quote (parsed id)
// for a beneficiary: it can then be executed for that one alone.
func (b *Book) Closed(ctx context.Context, id ID) (bool, error) {
	n, err := b.rdb.Exists(ctx, keyPrefix(id.Kind, id.raw[:])+"x:"+id.String()).Result()
	if err != nil {
		return false, fmt.Errorf("read quote: %w", err)
	}
	return n == 1, nil
}

// Reopen takes back a closing FindClosing made for by (Found.Made; the
// mark still names by), for an execution refused once it read the quote:
// a refused request leaves the offer as it found it. A mark that was there
// before (an execution for by that may be committing now) is not the
// refused request's to take back.
func (b *Book) Reopen(ctx context.Context, id ID, by string) error {
	p := keyPrefix(id.Kind, id.raw[:])
	if err := reopenScript.Run(ctx, b.rdb, []string{p + "x:" + id.String()}, by).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reopen quote: %w", err)
	}
	return nil
}

// reopenScript removes the closed mark if it names who. KEYS: mark. ARGV:
// who.
var reopenScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`)

// closeScript sets the closed mark, naming who it is for, for the offer's
// remaining life; 0 when it is closed for someone else. KEYS: quote,
// mark. ARGV: who.
var closeScript = redis.NewScript(`
local by = redis.call('GET', KEYS[2])
if by and by ~= '1' and by ~= ARGV[1] then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl) end
return 1
`)
