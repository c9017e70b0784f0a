package main

import (
	"context"
	"log/slog"
	"time"

	"gatehouse/internal/responses"
)

// responseStore returns where responses created with store: true are
// kept: the process's database (SQLite or PostgreSQL). nil when there is
// none (a bare proxy), and the API then refuses store: true.
func (s *stores) responseStore() responses.Store {
	if s == nil || s.store == nil {
		return nil
	}
	rs, _ := s.store.(responses.Store)
	return rs
}

// responsePruneBatch bounds one delete, so pruning never holds the table
// long; responsePruneEvery is how often the retention runs.
const (
	responsePruneBatch = 500
	responsePruneEvery = time.Hour
)

// retainResponses deletes stored responses older than the retention (the
// usage records' own, usage.retention) now and then every hour, until ctx
// ends; the caller waits on done before closing the store.
func retainResponses(ctx context.Context, rs responses.Store, retention time.Duration, log *slog.Logger, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(responsePruneEvery)
	defer t.Stop()
	for {
		pruneResponses(ctx, rs, time.Now().Add(-retention), log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneResponses deletes the responses created before a time, a batch at
// a time, and reports how many went.
func pruneResponses(ctx context.Context, rs responses.Store, before time.Time, log *slog.Logger) int {
	total := 0
	for ctx.Err() == nil {
		n, err := rs.DeleteResponsesBefore(ctx, before, responsePruneBatch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("stored responses: retention failed", "error", err.Error())
			}
			break
		}
		if n < responsePruneBatch {
			break
		}
	}
	return total
}
