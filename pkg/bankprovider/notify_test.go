package bankprovider

import (
	"errors"
	"testing"
	"time"
)

// A notification is taken only signed by the provider, as it was sent, and
// within five minutes of our clock.
func TestANotificationIsTakenOnlySignedAndFresh(t *testing.T) {
	t.Parallel()
	secret, now := NotifySecret("sk_sandbox"), time.Unix(1_800_000_000, 0)
	body := []byte(`{"type":"changes.available","after":"chg_1"}`)
	good := Sign(secret, body, now)
	for _, tt := range []struct {
		name, header string
		body         []byte
		at           time.Time
		want         error
	}{
		{"signed", good, body, now, nil},
		{"a minute late", good, body, now.Add(time.Minute), nil},
		{"unsigned", "", body, now, ErrUnsigned},
		{"another body", good, []byte(`{"type":"changes.available","after":"chg_2"}`), now, ErrUnsigned},
		{"another secret", Sign(NotifySecret("sk_other"), body, now), body, now, ErrUnsigned},
		{"no time", good[len("t=1800000000,"):], body, now, ErrUnsigned},
		{"stale", good, body, now.Add(6 * time.Minute), ErrStale},
		{"from the future", good, body, now.Add(-6 * time.Minute), ErrStale},
	} {
		if err := Verify(secret, tt.body, tt.header, tt.at); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}
