package framework

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// waitReadyz polls url (a /readyz endpoint) every 200 ms until it answers
// 200, for at most timeout. exited is closed when the process behind url
// ends; exitErr then says how, and waiting stops at once.
func waitReadyz(ctx context.Context, httpClient *http.Client, url string, timeout time.Duration, exited <-chan struct{}, exitErr func() error) error {
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("probing %s: %w", url, err)
		}
		resp, err := httpClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return exitErr()
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last answer: %s)", url, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s (last answer: %s)", url, timeout, last)
		}
	}
}
