package bank

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
)

// Notify POSTs a signed notification to url each time the changes feed
// has news (checked every every), until ctx ends: the provider's way of
// waking its customer's worker sooner than its next read of the feed. A
// notification that does not arrive loses nothing (the feed has it all).
func (b *Bank) Notify(ctx context.Context, url string, secret []byte, every time.Duration, log *slog.Logger) {
	client := &http.Client{Timeout: 2 * time.Second}
	told := ""
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		last := b.Publish()
		if last == "" || last == told {
			continue
		}
		body, _ := json.Marshal(bankprovider.Notification{Type: "changes.available", After: last})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			log.Warn("notification not sent", "err", err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(bankprovider.SignatureHeader, bankprovider.Sign(secret, body, b.now()))
		resp, err := client.Do(req)
		if err != nil {
			log.Debug("notification not delivered; the feed has it", "err", err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode < 300 {
			told = last
		}
	}
}
