package payout

import (
	"sync"
	"sync/atomic"

	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// corridors remembers, per key, the rail and country of the last payout
// quote the key opened or executed in this process. A partner pays along
// few corridors, so its next execution's quote is most likely of the same
// one: execution guesses it, checks the beneficiary against it, and reads
// and closes the offer in one round trip (quote.Book.FindClosing). A wrong
// guess, or none (a key new to this process), costs the round trip it
// meant to save, never a refusal: the quote is read as it is.
//
// Keys are the gateway's authenticated key ids, a few per partner; past
// maxCorridors keys, a key not yet known is not remembered.
type corridors struct {
	m sync.Map // key id → corridor
	n atomic.Int64
}

// maxCorridors bounds the keys remembered.
const maxCorridors = 100_000

type corridor struct{ rail, country string }

// remember notes keyID's corridor (stored only when it changed).
func (c *corridors) remember(keyID, rail, country string) {
	if v, ok := c.m.Load(keyID); ok {
		if v.(corridor) == (corridor{rail, country}) {
			return
		}
	} else if c.n.Load() >= maxCorridors {
		return
	}
	if _, loaded := c.m.Swap(keyID, corridor{rail, country}); !loaded {
		c.n.Add(1)
	}
}

// guess is what keyID's execution of a quote on chain expects its quote to
// be, and its beneficiary (raw) as checked against that rail and country;
// a zero Guess where there is nothing to guess from, the chain is not
// offered, or the beneficiary does not pass that rail's checks.
func (s *service) guess(keyID string, chain int64, raw []byte) (quote.Guess, beneficiary.Checked) {
	v, ok := s.corridors.m.Load(keyID)
	if !ok || !s.offered(chain) {
		return quote.Guess{}, beneficiary.Checked{}
	}
	c := v.(corridor)
	payee, err := beneficiary.Check(c.rail, c.country, raw)
	if err != nil {
		return quote.Guess{}, beneficiary.Checked{}
	}
	return quote.Guess{Rail: c.rail, Country: c.country, By: record.Digest(payee.Fields)}, payee
}
